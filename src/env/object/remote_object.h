// RemoteObject: one object (an S3 key or an HTTP(S) URL) read by ranges, with
// retries, resume and its version pinned for the whole load.
//
// Opening fetches the first bytes with a ranged GET (no HEAD, which presigned
// URLs refuse): that gives the size (Content-Range), the ETag (or
// Last-Modified) and the safetensors header of the object in one request.
// Every later GET sends If-Match with that ETag and checks the ETag, the
// Content-Range and the body length of each answer, so bytes of two versions
// of an object are never mixed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "env/object/transport.h"
#include "weightlift/object_storage.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// How to reach one object.
struct ObjectTarget {
  std::string url;        // what is requested (may hold a query string)
  std::string printable;  // for messages: PrintableUrl(url) or "s3://b/k"
  // Headers to add to a request with METHOD (signing); null for none.
  std::function<std::vector<std::string>(const char* method)> sign;
  bool follow_redirects = false;
};

struct RetryPolicy {
  int max_attempts = 8;
  double initial_seconds = 0.1;
  double max_seconds = 5;
};

// The wait before attempt ATTEMPT (>= 2): "full jitter", UNIFORM01 * min(max,
// initial * 2^(attempt - 2)).
double BackoffSeconds(const RetryPolicy& policy, int attempt, double uniform01);

// Runs EXCHANGES through TRANSPORT, retrying the retryable failures with
// POLICY. PREPARE(i, attempt) (re)fills exchange I's request before each
// attempt (fresh signature, the range from the byte it reached). Returns
// the index of the first exchange that failed for good, or -1; RETRIES
// counts the extra attempts made.
int RunWithRetries(Transport& transport, std::span<Exchange* const> exchanges,
                   const RetryPolicy& policy,
                   const std::function<void(size_t, int)>& prepare,
                   std::atomic<uint64_t>* retries);

class RemoteObject {
 public:
  // Opens TARGET: NotFound on 404, IoError (URL, status, range) otherwise.
  static StatusOr<std::shared_ptr<RemoteObject>> Open(
      std::shared_ptr<Transport> transport, ObjectTarget target,
      const ObjectStorageOptions& options);

  // Reads exactly dst.size() bytes at OFFSET: split into pieces of
  // piece_bytes, all in flight at once. Thread-safe. Errors name the URL
  // (no query string), the status and the byte range.
  Status ReadAt(uint64_t offset, std::span<std::byte> dst);

  uint64_t size() const { return size_; }
  // The version the object had when opened: its ETag, else its
  // Last-Modified ("" when the server sent neither).
  const std::string& version() const { return version_; }
  const std::string& printable() const { return target_.printable; }
  // Requests repeated after a retryable failure, since opening.
  uint64_t retries() const { return retries_.load(); }
  // "s3 ranged GETs: 8 MiB pieces, up to 16 in flight" (for notes).
  std::string Describe() const;

 private:
  RemoteObject(std::shared_ptr<Transport> t, ObjectTarget target,
               const ObjectStorageOptions& o);
  // The request headers for bytes [BEGIN, END) (END exclusive).
  void Prepare(Exchange& x, uint64_t begin, uint64_t end, bool pin) const;
  // check_headers for a GET of [BEGIN, END).
  std::string CheckAnswer(const Exchange& x, uint64_t begin,
                          uint64_t end) const;
  Status Failure(const Exchange& x, uint64_t begin, uint64_t end,
                 int attempts) const;

  std::shared_ptr<Transport> transport_;
  ObjectTarget target_;
  size_t piece_bytes_;
  int min_pieces_;
  RetryPolicy policy_;
  uint64_t size_ = 0;
  std::string version_;
  bool version_is_etag_ = false;
  std::vector<std::byte> head_;  // the first bytes, fetched when opened
  std::atomic<uint64_t> retries_{0};
};

}  // namespace weightlift::internal
