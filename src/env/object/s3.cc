#include "env/object/s3.h"

#include <cctype>
#include <ctime>

#include "env/object/sigv4.h"
#include "env/object/uri.h"

namespace weightlift::internal {
namespace {

// A bucket usable as a DNS label for virtual-hosted-style: lower case,
// digits, '-', no dots (dots break TLS wildcard certificates).
bool DnsCompatible(const std::string& b) {
  for (char c : b) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return true;
}

// Every <TAG>...</TAG> inside TEXT, in order.
std::vector<std::string> AllText(const std::string& text,
                                 const std::string& tag) {
  std::vector<std::string> out;
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  size_t pos = 0;
  while ((pos = text.find(open, pos)) != std::string::npos) {
    const size_t b = pos + open.size();
    const size_t e = text.find(close, b);
    if (e == std::string::npos) break;
    out.push_back(text.substr(b, e - b));
    pos = e + close.size();
  }
  return out;
}

}  // namespace

std::string XmlUnescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out.push_back(s[i]);
      continue;
    }
    const size_t semi = s.find(';', i);
    if (semi == std::string_view::npos) {
      out.push_back('&');
      continue;
    }
    std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp")
      out += '&';
    else if (ent == "lt")
      out += '<';
    else if (ent == "gt")
      out += '>';
    else if (ent == "quot")
      out += '"';
    else if (ent == "apos")
      out += '\'';
    else if (!ent.empty() && ent[0] == '#') {
      const bool hex = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X');
      const unsigned long cp = std::strtoul(
          std::string(ent.substr(hex ? 2 : 1)).c_str(), nullptr, hex ? 16 : 10);
      // UTF-8 encode.
      if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      out.append(s.substr(i, semi - i + 1));
    }
    i = semi;
  }
  return out;
}

S3Client::S3Client(std::shared_ptr<Transport> transport,
                   ObjectStorageOptions options)
    : transport_(std::move(transport)), options_(std::move(options)) {
  std::string endpoint = options_.endpoint_url;
  if (endpoint.empty()) {
    endpoint = "https://s3." + options_.region + ".amazonaws.com";
    aws_default_ = true;
  }
  auto parts = SplitUrl(endpoint);  // validated by Options::Validate
  if (parts.ok()) {
    scheme_ = parts->scheme;
    authority_ = parts->authority;
    base_path_ = parts->path == "/" ? "" : parts->path;
    while (!base_path_.empty() && base_path_.back() == '/') {
      base_path_.pop_back();
    }
  }
}

S3Client::Url S3Client::MakeUrl(const std::string& bucket,
                                const std::string& key,
                                const std::string& query) const {
  bool virtual_host = false;
  switch (options_.addressing) {
    case S3Addressing::kPath:
      break;
    case S3Addressing::kVirtual:
      virtual_host = true;
      break;
    case S3Addressing::kAuto:
      virtual_host = aws_default_ && DnsCompatible(bucket);
      break;
  }
  Url u;
  const std::string encoded_key = UriEncode(key, /*keep_slash=*/true);
  if (virtual_host) {
    u.authority = bucket + "." + authority_;
    u.path = base_path_ + "/" + encoded_key;
  } else {
    u.authority = authority_;
    u.path = base_path_ + "/" + UriEncode(bucket, false) +
             (key.empty() && !query.empty() ? "" : "/" + encoded_key);
  }
  u.url = scheme_ + "://" + u.authority + u.path;
  if (!query.empty()) u.url += "?" + query;
  return u;
}

std::vector<std::string> S3Client::Sign(
    const char* method, const Url& url,
    const std::string& canonical_query) const {
  std::vector<std::string> headers = {"Host: " + url.authority};
  if (options_.credentials.anonymous()) return headers;
  SigV4Request r;
  r.method = method;
  r.host = url.authority;
  r.canonical_uri = url.path;
  r.canonical_query = canonical_query;
  for (std::string& h : SignV4(r, options_.credentials, options_.region, "s3",
                               std::time(nullptr))) {
    headers.push_back(std::move(h));
  }
  return headers;
}

ObjectTarget S3Client::Target(const std::string& bucket,
                              const std::string& key) const {
  const Url url = MakeUrl(bucket, key, "");
  ObjectTarget t;
  t.url = url.url;
  t.printable =
      "s3://" + bucket + "/" + key + " (" + PrintableUrl(url.url) + ")";
  // The signer copies what it needs: a File may outlive this client.
  auto self = std::make_shared<const S3Client>(*this);
  t.sign = [self, url](const char* method) {
    return self->Sign(method, url, "");
  };
  return t;
}

StatusOr<S3Client::Listing> S3Client::List(const std::string& bucket,
                                           const std::string& prefix,
                                           const std::string& delimiter,
                                           size_t max_keys) const {
  Listing out;
  std::string token;
  const RetryPolicy policy{options_.max_attempts,
                           options_.backoff_initial_seconds,
                           options_.backoff_max_seconds};
  for (int page = 0; page < 100000; ++page) {
    // Canonical query: names sorted, values encoded ('/' too).
    std::string query;
    if (!token.empty()) {
      query += "continuation-token=" + UriEncode(token, false) + "&";
    }
    if (!delimiter.empty()) {
      query += "delimiter=" + UriEncode(delimiter, false) + "&";
    }
    query += "list-type=2&prefix=" + UriEncode(prefix, false);
    const Url url = MakeUrl(bucket, "", query);
    Exchange x;
    Exchange* xs[] = {&x};
    int attempts = 0;
    const int failed = RunWithRetries(
        *transport_, xs, policy,
        [&](size_t, int attempt) {
          attempts = attempt;
          x = Exchange();
          x.url = url.url;
          x.headers = Sign("GET", url, query);
          x.body_limit = 64u << 20;
        },
        nullptr);
    if (failed >= 0) {
      std::string msg = "ListObjectsV2 s3://" + bucket + "/" + prefix + " (" +
                        PrintableUrl(url.url) + "): " + DescribeOutcome(x);
      if (attempts > 1)
        msg += " (after " + std::to_string(attempts) + " attempts)";
      if (x.curl_code == 0 && x.status == 404) return Status::NotFound(msg);
      return Status::IoError(msg);
    }
    for (const std::string& contents : AllText(x.body, "Contents")) {
      auto keys = AllText(contents, "Key");
      if (!keys.empty()) out.keys.push_back(XmlUnescape(keys.front()));
    }
    for (const std::string& common : AllText(x.body, "CommonPrefixes")) {
      auto p = AllText(common, "Prefix");
      if (!p.empty()) out.prefixes.push_back(XmlUnescape(p.front()));
    }
    if (out.keys.size() > max_keys) {
      return Status::ResourceExhausted("ListObjectsV2 s3://" + bucket + "/" +
                                       prefix + ": more than " +
                                       std::to_string(max_keys) + " keys");
    }
    auto truncated = AllText(x.body, "IsTruncated");
    auto next = AllText(x.body, "NextContinuationToken");
    if (truncated.empty() || truncated.front() != "true") return out;
    if (next.empty() || next.front().empty()) {
      return Status::IoError("ListObjectsV2 s3://" + bucket + "/" + prefix +
                             ": truncated listing without a continuation "
                             "token");
    }
    token = XmlUnescape(next.front());
  }
  return Status::ResourceExhausted("ListObjectsV2: too many pages");
}

}  // namespace weightlift::internal
