// Transport: HTTP exchanges over libcurl's multi interface, many at once.
//
// One Transport serves the whole process (all objects, all loader threads):
// its threads each drive one curl multi handle, which keeps connections
// alive between exchanges (and multiplexes HTTP/2 streams where a server
// offers HTTP/2 over TLS). Callers hand a batch of exchanges to Run() and
// block until all of them completed; bodies are written straight into the
// caller's memory, so the transport holds no copy of the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "weightlift/status.h"

namespace weightlift::internal {

// One request and what came back. The caller fills the inputs; Run fills the
// outputs. Not touched by the transport after Run returns.
struct Exchange {
  // --- in ---
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  bool head = false;                 // HEAD instead of GET
  // A 2xx body is written here; a body longer than DST stops the transfer
  // (abort_reason says so). Empty: a 2xx body is kept in `body` instead,
  // up to body_limit bytes (listings).
  std::span<std::byte> dst;
  size_t body_limit = 1u << 20;
  bool follow_redirects = false;
  // Called once when a 2xx response's headers are complete, before any body
  // byte lands in DST; a non-empty return stops the transfer with that
  // reason (a wrong Content-Range, a changed ETag).
  std::function<std::string(const struct Exchange&)> check_headers;

  // --- out ---
  int curl_code = 0;       // CURLcode; 0 = the transfer completed
  std::string curl_error;  // curl's message when curl_code != 0
  long status = 0;         // HTTP status of the last response; 0 if none
  std::string etag;        // response headers (last response)
  std::string content_range;
  std::string last_modified;
  int64_t content_length = -1;
  uint64_t received = 0;     // body bytes written into DST
  std::string body;          // non-2xx body (first 4 KiB) or, DST empty, the
                             // 2xx body
  std::string abort_reason;  // set when the transport stopped the transfer
                             // on purpose (check_headers, a body too long)

  // Internal to the transport.
  bool headers_checked = false;
};

struct TransportOptions {
  int max_connections = 16;  // exchanges in flight, whole process
  int threads = 2;           // curl multi handles, one thread each
  double connect_timeout_seconds = 10;
  double stall_timeout_seconds = 30;  // no body byte this long: timeout
  bool verify_tls = true;
  std::string ca_bundle;
};

class Transport {
 public:
  static StatusOr<std::shared_ptr<Transport>> Create(
      const TransportOptions& options);
  virtual ~Transport() = default;

  // Runs EXCHANGES concurrently (at most max_connections in flight across
  // all callers) and returns when every one completed, failed or not.
  // Thread-safe.
  virtual void Run(std::span<Exchange* const> exchanges) = 0;

  virtual const TransportOptions& options() const = 0;
};

// Whether a finished exchange failed in a way worth another attempt:
// connection refused or reset, timeouts and stalls, a body cut short, HTTP
// 5xx, 429 and 408.
bool IsRetryable(const Exchange& x);

// "HTTP 503 (SlowDown: Reduce your request rate)", "connection failed
// (curl 7: Couldn't connect to server)", "stopped: <abort_reason>": what
// happened to X, never holding a header value.
std::string DescribeOutcome(const Exchange& x);

}  // namespace weightlift::internal
