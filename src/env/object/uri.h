// Object locations ("s3://bucket/key", "http(s)://host/path"): parsing, the
// URI encoding S3 signs, and the form of a URL that is safe to print.
#pragma once

#include <string>
#include <string_view>

#include "weightlift/status.h"

namespace weightlift::internal {

struct ObjectUri {
  enum class Kind { kS3, kHttp };
  Kind kind = Kind::kS3;
  // s3: the bucket and the key (no leading '/'; "" or ending in '/' for a
  // prefix).
  std::string bucket;
  std::string key;
  // http(s): the URL as given.
  std::string url;
};

// True for "s3://", "http://" and "https://" (scheme case-insensitive).
bool IsObjectUri(std::string_view location);

// InvalidArgument naming the location when it is not one of the forms above
// (no bucket, a bucket name S3 would refuse, no host).
StatusOr<ObjectUri> ParseObjectUri(std::string_view location);

// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters
// (A-Z a-z 0-9 - _ . ~) stay, every other byte becomes %XX (upper case);
// '/' stays when KEEP_SLASH (paths), else becomes %2F (query values).
std::string UriEncode(std::string_view s, bool keep_slash);

// URL without its query string, fragment and user:password, for messages:
// presigned URLs carry their signature in the query.
std::string PrintableUrl(std::string_view url);

// Pieces of an http(s) URL. InvalidArgument when it has no host.
struct UrlParts {
  std::string scheme;     // "http" or "https", lower case
  std::string authority;  // "host" or "host:port" (no user info)
  std::string path;       // starts with '/' ("/" when empty)
  std::string query;      // after '?', without it; may be empty
};
StatusOr<UrlParts> SplitUrl(std::string_view url);

}  // namespace weightlift::internal
