#include "env/object/uri.h"

#include <algorithm>
#include <cctype>

namespace weightlift::internal {
namespace {

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) {
      return false;
    }
  }
  return true;
}

// S3's bucket naming rules (3-63 characters of a-z 0-9 . -, starting and
// ending with a letter or digit); older buckets may hold upper case and '_',
// which S3-compatible servers still accept, so those pass too.
bool PlausibleBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' &&
        c != '_') {
      return false;
    }
  }
  return std::isalnum(static_cast<unsigned char>(b.front())) &&
         std::isalnum(static_cast<unsigned char>(b.back()));
}

}  // namespace

bool IsObjectUri(std::string_view location) {
  return StartsWithNoCase(location, "s3://") ||
         StartsWithNoCase(location, "http://") ||
         StartsWithNoCase(location, "https://");
}

StatusOr<ObjectUri> ParseObjectUri(std::string_view location) {
  ObjectUri uri;
  if (StartsWithNoCase(location, "s3://")) {
    std::string_view rest = location.substr(5);
    const size_t slash = rest.find('/');
    uri.bucket = std::string(rest.substr(0, slash));
    uri.key = slash == std::string_view::npos
                  ? std::string()
                  : std::string(rest.substr(slash + 1));
    if (!PlausibleBucket(uri.bucket)) {
      return Status::InvalidArgument(
          "'" + std::string(location) +
          "': not an S3 location (s3://BUCKET/KEY with a bucket name of 3-63 "
          "letters, digits, '.', '-')");
    }
    if (uri.key.find('?') != std::string::npos ||
        uri.key.find('#') != std::string::npos) {
      // Legal in a key, but almost always a URL pasted by mistake.
      return Status::InvalidArgument("'s3://" + uri.bucket +
                                     "/...': an S3 key with '?' or '#' is not "
                                     "supported");
    }
    uri.kind = ObjectUri::Kind::kS3;
    return uri;
  }
  if (StartsWithNoCase(location, "http://") ||
      StartsWithNoCase(location, "https://")) {
    WL_ASSIGN_OR_RETURN(UrlParts parts, SplitUrl(location));
    (void)parts;
    uri.kind = ObjectUri::Kind::kHttp;
    uri.url = std::string(location);
    return uri;
  }
  return Status::InvalidArgument("'" + PrintableUrl(location) +
                                 "': not an object location (s3://, "
                                 "http://, https://)");
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3 / 2);
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

StatusOr<UrlParts> SplitUrl(std::string_view url) {
  UrlParts p;
  const size_t colon = url.find("://");
  if (colon == std::string_view::npos) {
    return Status::InvalidArgument("'" + PrintableUrl(url) +
                                   "': not a URL (no scheme)");
  }
  p.scheme = std::string(url.substr(0, colon));
  std::transform(p.scheme.begin(), p.scheme.end(), p.scheme.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  std::string_view rest = url.substr(colon + 3);
  const size_t hash = rest.find('#');
  if (hash != std::string_view::npos) rest = rest.substr(0, hash);
  const size_t path_start = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, path_start);
  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) authority = authority.substr(at + 1);
  if (authority.empty()) {
    return Status::InvalidArgument("'" + PrintableUrl(url) +
                                   "': a URL without a host");
  }
  p.authority = std::string(authority);
  std::string_view path_query = path_start == std::string_view::npos
                                    ? std::string_view()
                                    : rest.substr(path_start);
  const size_t q = path_query.find('?');
  p.path = std::string(path_query.substr(0, q));
  if (q != std::string_view::npos) p.query = path_query.substr(q + 1);
  if (p.path.empty()) p.path = "/";
  return p;
}

std::string PrintableUrl(std::string_view url) {
  std::string_view u = url.substr(0, url.find_first_of("?#"));
  const size_t colon = u.find("://");
  if (colon == std::string_view::npos) return std::string(u);
  const size_t host_start = colon + 3;
  const size_t path_start = u.find('/', host_start);
  std::string_view authority =
      u.substr(host_start, path_start == std::string_view::npos
                               ? std::string_view::npos
                               : path_start - host_start);
  const size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return std::string(u);
  std::string out(u.substr(0, host_start));
  out += authority.substr(at + 1);
  if (path_start != std::string_view::npos) out += u.substr(path_start);
  return out;
}

}  // namespace weightlift::internal
