#include "env/object/transport.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "util/fork_epoch.h"

namespace weightlift::internal {
namespace {

std::once_flag g_curl_init;

// Completion counter shared by the exchanges of one Run call.
struct Batch {
  std::mutex mu;
  std::condition_variable cv;
  size_t remaining = 0;
};

struct Pending {
  Exchange* x;
  Batch* batch;
};

// One easy handle's per-transfer state.
struct Transfer {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  Exchange* x = nullptr;
  Batch* batch = nullptr;
  // Set when OnBody stopped an error response after keeping its first
  // kErrorBodyBytes: the exchange then ends as that HTTP status, not as a
  // write error.
  bool error_body_cut = false;
  char error[CURL_ERROR_SIZE];
};

// What an error response's body is kept for (its message); the rest is not
// read, so a server that streams an endless error body cannot hold a load.
constexpr size_t kErrorBodyBytes = 4096;

bool StartsWithNoCase(const char* p, size_t n, const char* prefix) {
  const size_t k = std::strlen(prefix);
  return n >= k && strncasecmp(p, prefix, k) == 0;
}

std::string HeaderValue(const char* p, size_t n, size_t name_len) {
  std::string v(p + name_len, n - name_len);
  const size_t b = v.find_first_not_of(" \t");
  const size_t e = v.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return v.substr(b, e - b + 1);
}

size_t OnHeader(char* p, size_t size, size_t n, void* user) {
  const size_t len = size * n;
  Exchange* x = static_cast<Transfer*>(user)->x;
  if (StartsWithNoCase(p, len, "HTTP/")) {  // a new response (redirect, 100)
    x->etag.clear();
    x->content_range.clear();
    x->last_modified.clear();
    x->content_length = -1;
  } else if (StartsWithNoCase(p, len, "etag:")) {
    x->etag = HeaderValue(p, len, 5);
  } else if (StartsWithNoCase(p, len, "content-range:")) {
    x->content_range = HeaderValue(p, len, 14);
  } else if (StartsWithNoCase(p, len, "last-modified:")) {
    x->last_modified = HeaderValue(p, len, 14);
  } else if (StartsWithNoCase(p, len, "content-length:")) {
    x->content_length =
        std::strtoll(HeaderValue(p, len, 15).c_str(), nullptr, 10);
  }
  return len;
}

size_t OnBody(char* p, size_t size, size_t n, void* user) {
  const size_t len = size * n;
  Transfer* t = static_cast<Transfer*>(user);
  Exchange* x = t->x;
  if (!x->headers_checked) {
    x->headers_checked = true;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &x->status);
    if (x->status >= 200 && x->status < 300 && x->check_headers) {
      std::string why = x->check_headers(*x);
      if (!why.empty()) {
        x->abort_reason = std::move(why);
        return 0;  // CURLE_WRITE_ERROR
      }
    }
  }
  if (x->status < 200 || x->status >= 300) {
    const size_t keep = std::min(
        len, kErrorBodyBytes - std::min(kErrorBodyBytes, x->body.size()));
    x->body.append(p, keep);
    if (x->body.size() < kErrorBodyBytes) return len;
    t->error_body_cut = true;
    return 0;  // enough of it: stop reading (Finish keeps the status)
  }
  if (x->dst.empty()) {
    if (x->body.size() + len > x->body_limit) {
      x->abort_reason =
          "response longer than " + std::to_string(x->body_limit) + " bytes";
      return 0;
    }
    x->body.append(p, len);
    return len;
  }
  if (len > x->dst.size() - x->received) {
    x->abort_reason = "body longer than the " + std::to_string(x->dst.size()) +
                      " bytes asked for";
    return 0;
  }
  std::memcpy(x->dst.data() + x->received, p, len);
  x->received += len;
  return len;
}

class Driver {
 public:
  Driver(const TransportOptions& o, int max_active)
      : options_(o), max_active_(max_active) {
    multi_ = curl_multi_init();
    curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                      static_cast<long>(max_active));
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS,
                      static_cast<long>(max_active));
    // HTTP/2 is negotiated where a server offers it, but each transfer gets
    // its own connection: many streams on one TCP connection share one
    // congestion window, which caps a bulk download well below what
    // parallel connections reach.
    curl_multi_setopt(multi_, CURLMOPT_PIPELINING, CURLPIPE_NOTHING);
    thread_ = std::thread([this] { Loop(); });
  }
  ~Driver() {
    if (made_.forked()) {
      // The driver thread stayed in the parent, and the connections are
      // the parent's too: closing them here (a TLS close_notify) would cut
      // the parent's transfers. Left as they are (util/fork_epoch.h).
      AbandonThread(std::move(thread_));
      return;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    curl_multi_wakeup(multi_);
    thread_.join();
    for (Transfer* t : idle_) {
      curl_easy_cleanup(t->easy);
      delete t;
    }
    curl_multi_cleanup(multi_);
  }
  bool ok() const { return multi_ != nullptr; }

  void Submit(Exchange* x, Batch* b) {
    {
      std::lock_guard<std::mutex> l(mu_);
      queue_.push_back({x, b});
    }
    curl_multi_wakeup(multi_);
  }

 private:
  Transfer* Acquire() {
    if (!idle_.empty()) {
      Transfer* t = idle_.back();
      idle_.pop_back();
      curl_easy_reset(t->easy);
      return t;
    }
    Transfer* t = new Transfer;
    t->easy = curl_easy_init();
    return t;
  }

  void Start(const Pending& p) {
    Transfer* t = Acquire();
    Exchange* x = p.x;
    t->x = x;
    t->batch = p.batch;
    t->error_body_cut = false;
    t->error[0] = '\0';
    for (const std::string& h : x->headers) {
      t->headers = curl_slist_append(t->headers, h.c_str());
    }
    // curl would otherwise add "Expect:" and "Accept: */*"; keep them out.
    t->headers = curl_slist_append(t->headers, "Accept:");
    CURL* e = t->easy;
    curl_easy_setopt(e, CURLOPT_URL, x->url.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_NOBODY, x->head ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
    curl_easy_setopt(
        e, CURLOPT_CONNECTTIMEOUT_MS,
        static_cast<long>(options_.connect_timeout_seconds * 1000));
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(
        e, CURLOPT_LOW_SPEED_TIME,
        std::max(1L, static_cast<long>(options_.stall_timeout_seconds)));
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, options_.verify_tls ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, options_.verify_tls ? 2L : 0L);
    if (!options_.ca_bundle.empty()) {
      curl_easy_setopt(e, CURLOPT_CAINFO, options_.ca_bundle.c_str());
    }
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    // Fewer, larger write callbacks (the default is 16 KiB).
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L * 1024);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    if (x->follow_redirects) {
      curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
      curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    }
    curl_multi_add_handle(multi_, e);
    ++active_;
  }

  void Finish(CURL* e, CURLcode result) {
    Transfer* t = nullptr;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
    Exchange* x = t->x;
    if (result == CURLE_WRITE_ERROR && t->error_body_cut) result = CURLE_OK;
    x->curl_code = result;
    if (result != CURLE_OK) {
      x->curl_error = t->error[0] ? t->error : curl_easy_strerror(result);
    }
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    if (status != 0) x->status = status;
    curl_multi_remove_handle(multi_, e);
    curl_slist_free_all(t->headers);
    t->headers = nullptr;
    Batch* b = t->batch;
    t->x = nullptr;
    t->batch = nullptr;
    idle_.push_back(t);
    --active_;
    std::lock_guard<std::mutex> l(b->mu);
    if (--b->remaining == 0) b->cv.notify_all();
  }

  void Loop() {
    for (;;) {
      {
        std::lock_guard<std::mutex> l(mu_);
        if (stop_) return;
        while (active_ < max_active_ && !queue_.empty()) {
          Pending p = queue_.front();
          queue_.pop_front();
          Start(p);
        }
      }
      int running = 0;
      curl_multi_perform(multi_, &running);
      int left = 0;
      while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
        if (m->msg == CURLMSG_DONE) Finish(m->easy_handle, m->data.result);
      }
      curl_multi_poll(multi_, nullptr, 0, 1000, nullptr);
    }
  }

  const TransportOptions options_;
  const int max_active_;
  MadeInProcess made_;
  CURLM* multi_ = nullptr;
  std::thread thread_;
  std::mutex mu_;
  bool stop_ = false;
  std::deque<Pending> queue_;
  int active_ = 0;               // driver thread only
  std::vector<Transfer*> idle_;  // driver thread only
};

class CurlTransport final : public Transport {
 public:
  explicit CurlTransport(const TransportOptions& o) : options_(o) {
    const int threads = std::max(1, std::min(o.threads, o.max_connections));
    for (int i = 0; i < threads; ++i) {
      // Connections split over the drivers; together max_connections.
      const int share = o.max_connections / threads +
                        (i < o.max_connections % threads ? 1 : 0);
      drivers_.push_back(std::make_unique<Driver>(o, share));
    }
  }

  void Run(std::span<Exchange* const> exchanges) override {
    if (exchanges.empty()) return;
    if (const Status forked = made_.CheckNotForked(
            "this HTTP transport", "open the checkpoint again in this process");
        !forked.ok()) {
      // Its drivers stayed in the parent: nothing would ever run these.
      for (Exchange* x : exchanges) {
        x->curl_code = CURLE_FAILED_INIT;
        x->abort_reason = forked.message();
      }
      return;
    }
    Batch batch;
    batch.remaining = exchanges.size();
    for (Exchange* x : exchanges) {
      x->headers_checked = false;
      const size_t d =
          next_.fetch_add(1, std::memory_order_relaxed) % drivers_.size();
      drivers_[d]->Submit(x, &batch);
    }
    std::unique_lock<std::mutex> l(batch.mu);
    batch.cv.wait(l, [&] { return batch.remaining == 0; });
  }

  const TransportOptions& options() const override { return options_; }

 private:
  const TransportOptions options_;
  MadeInProcess made_;
  std::vector<std::unique_ptr<Driver>> drivers_;
  std::atomic<size_t> next_{0};
};

}  // namespace

StatusOr<std::shared_ptr<Transport>> Transport::Create(
    const TransportOptions& options) {
  CURLcode init = CURLE_OK;
  std::call_once(g_curl_init,
                 [&] { init = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (init != CURLE_OK) {
    return Status::Internal(std::string("curl_global_init failed: ") +
                            curl_easy_strerror(init));
  }
  return std::shared_ptr<Transport>(std::make_shared<CurlTransport>(options));
}

bool IsRetryable(const Exchange& x) {
  if (!x.abort_reason.empty()) return false;
  switch (x.curl_code) {
    case CURLE_OK:
      return x.status >= 500 || x.status == 429 || x.status == 408;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

namespace {

// <Code>..</Code> and <Message>..</Message> of an S3 error body.
std::string XmlText(const std::string& body, const std::string& tag) {
  const std::string open = "<" + tag + ">";
  const size_t b = body.find(open);
  if (b == std::string::npos) return {};
  const size_t e = body.find("</" + tag + ">", b);
  if (e == std::string::npos) return {};
  std::string v = body.substr(b + open.size(), e - b - open.size());
  if (v.size() > 200) v = v.substr(0, 200) + "...";
  return v;
}

}  // namespace

std::string DescribeOutcome(const Exchange& x) {
  if (!x.abort_reason.empty()) return x.abort_reason;
  if (x.curl_code != CURLE_OK) {
    std::string what;
    switch (x.curl_code) {
      case CURLE_OPERATION_TIMEDOUT:
        what = "timed out or stalled";
        break;
      case CURLE_PARTIAL_FILE:
        what = "body cut short";
        break;
      case CURLE_RECV_ERROR:
      case CURLE_SEND_ERROR:
      case CURLE_GOT_NOTHING:
        what = "connection reset";
        break;
      case CURLE_COULDNT_CONNECT:
      case CURLE_COULDNT_RESOLVE_HOST:
        what = "connection failed";
        break;
      default:
        what = "transfer failed";
    }
    std::string out = what + " (curl " + std::to_string(x.curl_code) + ": " +
                      x.curl_error + ")";
    if (x.status != 0) out += " after HTTP " + std::to_string(x.status);
    return out;
  }
  std::string out = "HTTP " + std::to_string(x.status);
  const std::string code = XmlText(x.body, "Code");
  const std::string message = XmlText(x.body, "Message");
  if (!code.empty() || !message.empty()) {
    out += " (" + code + (message.empty() ? "" : ": " + message) + ")";
  }
  return out;
}

}  // namespace weightlift::internal
