"""A fault-injecting HTTP proxy for the object-storage tests (stdlib only).

Sits between weightlift and a real S3 server on 127.0.0.1 and forwards every
request unchanged (Host and Authorization included, so SigV4 still holds),
except the ones a fault rule picks. Rules are set with PUT /__faults__ (a
JSON list) and the count of faults injected read with GET /__faults__.

A rule: {"fault": KIND, "count": N, "min_offset": B}. It applies to the next
N GET requests whose Range starts at byte B or later (B = 1 skips the read
of an object's first bytes that opening it does). Kinds:
  503        answer 503 SlowDown (S3's XML error) instead of forwarding
  reset      forward the headers and half the body, then reset the connection
  stall      forward the headers and half the body, then send nothing for
             `stall_s` seconds (default 5) and close
  truncate   forward the headers and half the body, then close cleanly
  short      announce and send half the body (Content-Length halved)
  long       announce and send the body plus 100 extra bytes
  etag       forward the answer with a different ETag
  endless_error  answer 500 with a body that does not end (up to 1 TiB, so
             bounded, but far more than any client should read: a client
             must stop after the part of an error body it keeps)
Every loop is bounded: rules are consumed, and stalls end.

Run: python fault_proxy.py UPSTREAM_URL PORT_FILE  (prints nothing; writes
its port to PORT_FILE once listening).
"""
from __future__ import annotations

import http.client
import json
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding",
        "te", "trailer", "upgrade"}


class State:
    def __init__(self, upstream: str):
        u = urllib.parse.urlsplit(upstream)
        self.host, self.port = u.hostname, u.port or 80
        self.lock = threading.Lock()
        self.rules: list[dict] = []
        self.injected: dict[str, int] = {}
        self.requests = 0

    def pick(self, method: str, range_header: str | None):
        """The fault for this request (consuming one use), or None."""
        with self.lock:
            self.requests += 1
            if method != "GET":
                return None
            start = 0
            if range_header and range_header.startswith("bytes="):
                try:
                    start = int(range_header[6:].split("-")[0])
                except ValueError:
                    start = 0
            for rule in self.rules:
                if rule.get("count", 0) <= 0:
                    continue
                if start < rule.get("min_offset", 0):
                    continue
                rule["count"] -= 1
                kind = rule["fault"]
                self.injected[kind] = self.injected.get(kind, 0) + 1
                return rule
            return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State = None  # set by serve()

    def log_message(self, *args):  # quiet
        pass

    def _control(self):
        if self.command == "PUT":
            n = int(self.headers.get("Content-Length", "0"))
            rules = json.loads(self.rfile.read(n) or b"[]")
            with self.state.lock:
                self.state.rules = rules
                self.state.injected = {}
            body = b"{}"
        else:
            with self.state.lock:
                body = json.dumps({"injected": self.state.injected,
                                   "requests": self.state.requests}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self):
        if self.path.startswith("/__faults__"):
            return self._control()
        n = int(self.headers.get("Content-Length", "0") or 0)
        req_body = self.rfile.read(n) if n else None
        rule = self.state.pick(self.command, self.headers.get("Range"))
        kind = rule["fault"] if rule else None
        if kind == "503":
            body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown'
                    b'</Code><Message>Please reduce your request rate.</Message>'
                    b'</Error>')
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if kind == "endless_error":
            self.send_response(500, "Internal Server Error")
            self.send_header("Content-Type", "text/plain")
            self.send_header("Connection", "close")
            self.end_headers()
            chunk = b"error " * 10922
            try:
                for _ in range((1 << 40) // len(chunk)):
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True
            return
        up = http.client.HTTPConnection(self.state.host, self.state.port,
                                        timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in _HOP}
            up.request(self.command, self.path, body=req_body, headers=headers)
            resp = up.getresponse()
            data = resp.read()
        finally:
            up.close()
        ok = 200 <= resp.status < 300 and self.command == "GET"
        if not ok:
            kind = None
        send = data
        announced = len(data)
        if kind in ("reset", "stall", "truncate"):
            send = data[: len(data) // 2]
        elif kind == "short":
            send = data[: len(data) // 2]
            announced = len(send)
        elif kind == "long":
            send = data + b"\0" * 100
            announced = len(send)
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            lk = k.lower()
            if lk in _HOP or lk == "content-length":
                continue
            if lk == "etag" and kind == "etag":
                v = '"0123456789abcdef0123456789abcdef"'
            self.send_header(k, v)
        self.send_header("Content-Length", str(announced))
        self.end_headers()
        if self.command == "HEAD":
            return
        self.wfile.write(send)
        self.wfile.flush()
        if kind == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.close_connection = True
        elif kind == "stall":
            time.sleep(float(rule.get("stall_s", 5)))
            self.close_connection = True
        elif kind == "truncate":
            self.close_connection = True

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward


def serve(upstream: str, port: int = 0) -> ThreadingHTTPServer:
    Handler.state = State(upstream)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def main():
    upstream, port_file = sys.argv[1], sys.argv[2]
    server = serve(upstream)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
