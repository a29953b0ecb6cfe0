#include "env/object/remote_object.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

namespace weightlift::internal {
namespace {

void ResetOutputs(Exchange& x) {
  x.curl_code = 0;
  x.curl_error.clear();
  x.status = 0;
  x.etag.clear();
  x.content_range.clear();
  x.last_modified.clear();
  x.content_length = -1;
  x.received = 0;
  x.body.clear();
  x.abort_reason.clear();
  x.headers_checked = false;
}

bool Succeeded(const Exchange& x) {
  return x.curl_code == 0 && x.abort_reason.empty() && x.status >= 200 &&
         x.status < 300 && (x.dst.empty() || x.received == x.dst.size());
}

// "bytes B-E/TOTAL" or "bytes */TOTAL" (then B = E = -1). TOTAL may be "*"
// (-1). False when it does not parse.
bool ParseContentRange(const std::string& v, int64_t* b, int64_t* e,
                       int64_t* total) {
  if (v.rfind("bytes ", 0) != 0) return false;
  const char* p = v.c_str() + 6;
  if (*p == '*') {
    *b = *e = -1;
    ++p;
  } else {
    char* end = nullptr;
    *b = std::strtoll(p, &end, 10);
    if (end == p || *end != '-') return false;
    p = end + 1;
    *e = std::strtoll(p, &end, 10);
    if (end == p) return false;
    p = end;
  }
  if (*p != '/') return false;
  ++p;
  if (*p == '*') {
    *total = -1;
    return true;
  }
  char* end = nullptr;
  *total = std::strtoll(p, &end, 10);
  return end != p && *total >= 0;
}

std::string Range(uint64_t begin, uint64_t end) {
  return "bytes=" + std::to_string(begin) + "-" + std::to_string(end - 1);
}

double Uniform01() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

}  // namespace

double BackoffSeconds(const RetryPolicy& policy, int attempt,
                      double uniform01) {
  const int doublings = std::clamp(attempt - 2, 0, 62);
  const double cap = std::min(
      policy.max_seconds, policy.initial_seconds * std::ldexp(1.0, doublings));
  return uniform01 * cap;
}

int RunWithRetries(Transport& transport, std::span<Exchange* const> exchanges,
                   const RetryPolicy& policy,
                   const std::function<void(size_t, int)>& prepare,
                   std::atomic<uint64_t>* retries) {
  std::vector<size_t> todo(exchanges.size());
  for (size_t i = 0; i < todo.size(); ++i) todo[i] = i;
  std::vector<Exchange*> batch;
  for (int attempt = 1;; ++attempt) {
    batch.clear();
    for (size_t i : todo) {
      prepare(i, attempt);
      batch.push_back(exchanges[i]);
    }
    transport.Run(batch);
    std::vector<size_t> again;
    for (size_t i : todo) {
      const Exchange& x = *exchanges[i];
      if (Succeeded(x)) continue;
      if (!IsRetryable(x) || attempt >= policy.max_attempts) {
        return static_cast<int>(i);
      }
      again.push_back(i);
    }
    if (again.empty()) return -1;
    if (retries) retries->fetch_add(again.size());
    const double wait = BackoffSeconds(policy, attempt + 1, Uniform01());
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    todo = std::move(again);
  }
}

RemoteObject::RemoteObject(std::shared_ptr<Transport> t, ObjectTarget target,
                           const ObjectStorageOptions& o)
    : transport_(std::move(t)),
      target_(std::move(target)),
      piece_bytes_(o.piece_bytes),
      min_pieces_(o.min_pieces_per_read),
      policy_{o.max_attempts, o.backoff_initial_seconds,
              o.backoff_max_seconds} {}

void RemoteObject::Prepare(Exchange& x, uint64_t begin, uint64_t end,
                           bool pin) const {
  ResetOutputs(x);
  x.url = target_.url;
  x.follow_redirects = target_.follow_redirects;
  x.headers.clear();
  if (target_.sign) x.headers = target_.sign("GET");
  x.headers.push_back("Range: " + Range(begin, end));
  if (pin && version_is_etag_) x.headers.push_back("If-Match: " + version_);
}

std::string RemoteObject::CheckAnswer(const Exchange& x, uint64_t begin,
                                      uint64_t end) const {
  if (version_is_etag_ && x.etag != version_) {
    return "object changed during the load (ETag " + version_ + " -> " +
           (x.etag.empty() ? "none" : x.etag) + ")";
  }
  if (!version_is_etag_ && !version_.empty() && x.last_modified != version_) {
    return "object changed during the load (Last-Modified " + version_ +
           " -> " + x.last_modified + ")";
  }
  if (x.status == 200) {
    if (begin == 0 && end == size_ &&
        (x.content_length < 0 ||
         static_cast<uint64_t>(x.content_length) == size_)) {
      return {};  // the whole object, asked as a range
    }
    return "the server answered 200 with the whole object to a Range "
           "request: it does not honour Range requests";
  }
  if (x.status != 206) {
    return "unexpected HTTP " + std::to_string(x.status) +
           " to a Range request";
  }
  int64_t b, e, total;
  if (!ParseContentRange(x.content_range, &b, &e, &total)) {
    return "206 answer without a usable Content-Range ('" + x.content_range +
           "')";
  }
  if (total >= 0 && static_cast<uint64_t>(total) != size_) {
    return "object changed during the load (size " + std::to_string(size_) +
           " -> " + std::to_string(total) + ")";
  }
  if (b != static_cast<int64_t>(begin) || e != static_cast<int64_t>(end - 1)) {
    return "answer for the wrong range (Content-Range " + x.content_range + ")";
  }
  if (x.content_length >= 0 &&
      static_cast<uint64_t>(x.content_length) != end - begin) {
    return "body of " + std::to_string(x.content_length) +
           " bytes announced for the " + std::to_string(end - begin) +
           " bytes asked (Content-Length)";
  }
  return {};
}

Status RemoteObject::Failure(const Exchange& x, uint64_t begin, uint64_t end,
                             int attempts) const {
  std::string what;
  if (x.curl_code == 0 && x.abort_reason.empty() && x.status >= 200 &&
      x.status < 300) {
    what = "body ended after " + std::to_string(x.received) + " of " +
           std::to_string(x.dst.size()) + " bytes";
  } else if (x.curl_code == 0 && x.status == 412) {
    what = "object changed during the load (HTTP 412: If-Match " + version_ +
           " no longer matches)";
  } else {
    what = DescribeOutcome(x);
  }
  if (attempts > 1)
    what += " (after " + std::to_string(attempts) + " attempts)";
  std::string msg =
      "GET " + target_.printable + " " + Range(begin, end) + ": " + what;
  if (x.curl_code == 0 && x.status == 404) return Status::NotFound(msg);
  return Status::IoError(msg);
}

StatusOr<std::shared_ptr<RemoteObject>> RemoteObject::Open(
    std::shared_ptr<Transport> transport, ObjectTarget target,
    const ObjectStorageOptions& options) {
  std::shared_ptr<RemoteObject> obj(
      new RemoteObject(std::move(transport), std::move(target), options));
  const uint64_t want = std::max<uint64_t>(1, options.open_prefetch_bytes);
  std::vector<std::byte> head(want);
  Exchange x;
  Exchange* xs[] = {&x};
  int attempts = 0;
  const int failed = RunWithRetries(
      *obj->transport_, xs, obj->policy_,
      [&](size_t, int attempt) {
        attempts = attempt;
        obj->Prepare(x, 0, want, /*pin=*/false);
        x.dst = std::span<std::byte>(head);
        x.check_headers = [want](const Exchange& a) -> std::string {
          if (a.status == 200 && a.content_length >= 0 &&
              static_cast<uint64_t>(a.content_length) > want) {
            return "the server answered 200 with the whole object (" +
                   std::to_string(a.content_length) +
                   " bytes) to a Range request: it does not honour Range "
                   "requests";
          }
          return {};
        };
      },
      &obj->retries_);
  const bool empty_object = x.curl_code == 0 && x.status == 416;
  if (failed >= 0 && !empty_object) {
    // A 2xx shorter than asked is the whole (small) object here.
    if (!(x.curl_code == 0 && x.abort_reason.empty() && x.status >= 200 &&
          x.status < 300)) {
      return obj->Failure(x, 0, want, attempts);
    }
  }
  int64_t b = -1, e = -1, total = -1;
  if (empty_object) {
    if (!ParseContentRange(x.content_range, &b, &e, &total) || total != 0) {
      return obj->Failure(x, 0, want, attempts);
    }
    obj->size_ = 0;
    x.received = 0;
  } else if (x.status == 206) {
    if (!ParseContentRange(x.content_range, &b, &e, &total) || total < 0 ||
        b != 0 ||
        static_cast<uint64_t>(e + 1) != std::min<uint64_t>(want, total) ||
        x.received != static_cast<uint64_t>(e + 1)) {
      return Status::IoError(
          "GET " + obj->target_.printable + " " + Range(0, want) +
          ": inconsistent answer (Content-Range '" + x.content_range + "', " +
          std::to_string(x.received) + " bytes received)");
    }
    obj->size_ = static_cast<uint64_t>(total);
  } else {  // 200: the whole object, no larger than WANT
    if (x.content_length >= 0 &&
        static_cast<uint64_t>(x.content_length) != x.received) {
      return obj->Failure(x, 0, want, attempts);
    }
    obj->size_ = x.received;
  }
  head.resize(x.received);
  obj->head_ = std::move(head);
  if (!x.etag.empty()) {
    obj->version_ = x.etag;
    obj->version_is_etag_ = true;
  } else {
    obj->version_ = x.last_modified;
  }
  return obj;
}

Status RemoteObject::ReadAt(uint64_t offset, std::span<std::byte> dst) {
  if (dst.empty()) return Status::OK();
  if (offset > size_ || dst.size() > size_ - offset) {
    return Status::IoError(target_.printable + ": read of " +
                           std::to_string(dst.size()) + " bytes at offset " +
                           std::to_string(offset) +
                           " goes past the end of the object (" +
                           std::to_string(size_) + " bytes)");
  }
  if (offset + dst.size() <= head_.size()) {
    std::memcpy(dst.data(), head_.data() + offset, dst.size());
    return Status::OK();
  }
  // Pieces of piece_bytes_, but at least min_pieces_ of >= 1 MiB.
  size_t piece_bytes = piece_bytes_;
  if (dst.size() / piece_bytes < static_cast<size_t>(min_pieces_)) {
    piece_bytes = std::min(
        piece_bytes, std::max<size_t>(size_t{1} << 20,
                                      (dst.size() + min_pieces_ - 1) /
                                          static_cast<size_t>(min_pieces_)));
  }
  const size_t n = (dst.size() + piece_bytes - 1) / piece_bytes;
  std::vector<Exchange> xs(n);
  std::vector<Exchange*> ptrs(n);
  std::vector<uint64_t> done(n, 0);
  std::vector<int> attempts(n, 0);
  for (size_t i = 0; i < n; ++i) ptrs[i] = &xs[i];
  auto piece = [&](size_t i) {
    const uint64_t b = offset + i * piece_bytes;
    const uint64_t e = std::min<uint64_t>(b + piece_bytes, offset + dst.size());
    return std::pair<uint64_t, uint64_t>(b, e);
  };
  const int failed = RunWithRetries(
      *transport_, ptrs, policy_,
      [&](size_t i, int attempt) {
        Exchange& x = xs[i];
        if (attempt > 1) done[i] += x.received;  // resume where it stopped
        attempts[i] = attempt;
        const auto [b, e] = piece(i);
        const uint64_t from = b + done[i];
        Prepare(x, from, e, /*pin=*/true);
        x.dst = dst.subspan(from - offset, e - from);
        x.check_headers = [this, from, e](const Exchange& a) {
          return CheckAnswer(a, from, e);
        };
      },
      &retries_);
  if (failed >= 0) {
    const auto [b, e] = piece(failed);
    const Exchange& x = xs[failed];
    return Failure(x, b + done[failed], e, attempts[failed]);
  }
  return Status::OK();
}

std::string RemoteObject::Describe() const {
  const TransportOptions& t = transport_->options();
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "ranged GETs of up to %zu KiB (each read in at least %d), "
                "up to %d in flight on %d curl threads",
                piece_bytes_ >> 10, min_pieces_, t.max_connections, t.threads);
  return buf;
}

}  // namespace weightlift::internal
