#include "env/object/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstdio>

#include "weightlift/object_storage.h"

namespace weightlift::internal {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[p[i] >> 4];
    out[2 * i + 1] = kHex[p[i] & 15];
  }
  return out;
}

std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out,
       &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string Trim(const std::string& v) {
  const size_t b = v.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  const size_t e = v.find_last_not_of(" \t");
  return v.substr(b, e - b + 1);
}

}  // namespace

std::string Sha256Hex(const std::string& data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return Hex(md, sizeof md);
}

std::vector<std::string> SignV4(const SigV4Request& request,
                                const ObjectStorageCredentials& credentials,
                                const std::string& region,
                                const std::string& service, std::time_t now) {
  std::tm tm{};
  gmtime_r(&now, &tm);
  char amz_date[32], date[16];
  std::strftime(amz_date, sizeof amz_date, "%Y%m%dT%H%M%SZ", &tm);
  std::strftime(date, sizeof date, "%Y%m%d", &tm);

  std::vector<std::pair<std::string, std::string>> headers = {
      {"host", request.host},
      {"x-amz-content-sha256", request.payload_hash},
      {"x-amz-date", amz_date},
  };
  if (!credentials.session_token.empty()) {
    headers.emplace_back("x-amz-security-token", credentials.session_token);
  }
  for (const auto& [name, value] : request.extra_signed_headers) {
    headers.emplace_back(name, Trim(value));
  }
  std::sort(headers.begin(), headers.end());

  std::string canonical_headers, signed_headers;
  for (const auto& [name, value] : headers) {
    canonical_headers += name + ":" + value + "\n";
    if (!signed_headers.empty()) signed_headers += ";";
    signed_headers += name;
  }
  const std::string canonical_request =
      request.method + "\n" + request.canonical_uri + "\n" +
      request.canonical_query + "\n" + canonical_headers + "\n" +
      signed_headers + "\n" + request.payload_hash;
  const std::string scope =
      std::string(date) + "/" + region + "/" + service + "/aws4_request";
  const std::string string_to_sign = "AWS4-HMAC-SHA256\n" +
                                     std::string(amz_date) + "\n" + scope +
                                     "\n" + Sha256Hex(canonical_request);
  const std::string k_date = Hmac("AWS4" + credentials.secret_access_key, date);
  const std::string k_signing =
      Hmac(Hmac(Hmac(k_date, region), service), "aws4_request");
  const std::string sig = Hmac(k_signing, string_to_sign);
  const std::string signature =
      Hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());

  std::vector<std::string> out = {
      "x-amz-date: " + std::string(amz_date),
      "x-amz-content-sha256: " + request.payload_hash,
  };
  if (!credentials.session_token.empty()) {
    out.push_back("x-amz-security-token: " + credentials.session_token);
  }
  out.push_back("Authorization: AWS4-HMAC-SHA256 Credential=" +
                credentials.access_key_id + "/" + scope + ", SignedHeaders=" +
                signed_headers + ", Signature=" + signature);
  return out;
}

}  // namespace weightlift::internal
