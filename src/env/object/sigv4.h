// AWS Signature Version 4 for S3 requests, with OpenSSL's SHA-256 / HMAC.
//
// Written here rather than through libcurl's CURLOPT_AWS_SIGV4 because
// Debian 12's libcurl (7.88) neither sends x-amz-security-token for
// temporary credentials nor lets the caller choose which headers are signed,
// and its query canonicalization changed between releases; this one is
// checked against the published AWS example (sigv4_test.cc).
#pragma once

#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace weightlift {
struct ObjectStorageCredentials;
}

namespace weightlift::internal {

struct SigV4Request {
  std::string method;  // "GET", "HEAD"
  std::string host;    // Host header value ("bucket.s3.amazonaws.com:443"
                       // without the default port, as curl sends it)
  std::string canonical_uri;    // already percent-encoded path
  std::string canonical_query;  // "a=1&b=2": names sorted, values encoded
  // Headers to sign besides host, x-amz-content-sha256, x-amz-date and
  // x-amz-security-token (those are added): lower-case name, value.
  std::vector<std::pair<std::string, std::string>> extra_signed_headers;
  // SHA-256 hex of the body, or "UNSIGNED-PAYLOAD".
  std::string payload_hash = "UNSIGNED-PAYLOAD";
};

// The headers ("Name: value") to add to REQUEST so that S3 accepts it:
// x-amz-date, x-amz-content-sha256, x-amz-security-token (temporary
// credentials only) and Authorization. NOW is the signing time (UTC).
std::vector<std::string> SignV4(const SigV4Request& request,
                                const ObjectStorageCredentials& credentials,
                                const std::string& region,
                                const std::string& service, std::time_t now);

// Hex SHA-256 of DATA (for payload hashes and tests).
std::string Sha256Hex(const std::string& data);

}  // namespace weightlift::internal
