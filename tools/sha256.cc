#include "sha256.h"

#if WL_HAVE_OPENSSL
#include <openssl/evp.h>
#endif

namespace weightlift::cli {

#if WL_HAVE_OPENSSL

bool Sha256Available() { return true; }

StatusOr<std::unique_ptr<Sha256>> Sha256::Create() {
  std::unique_ptr<Sha256> h(new Sha256());
  h->ctx_ = EVP_MD_CTX_new();
  if (h->ctx_ == nullptr) {
    return Status::ResourceExhausted("EVP_MD_CTX_new failed");
  }
  WL_RETURN_IF_ERROR(h->Reset());
  return h;
}

Sha256::~Sha256() {
  if (ctx_ != nullptr) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}

Status Sha256::Reset() {
  if (EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(),
                        nullptr) != 1) {
    return Status::Internal("EVP_DigestInit_ex(sha256) failed");
  }
  return Status::OK();
}

Status Sha256::Update(const void* data, size_t size) {
  if (size == 0) return Status::OK();
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, size) != 1) {
    return Status::Internal("EVP_DigestUpdate failed");
  }
  return Status::OK();
}

StatusOr<std::string> Sha256::FinishHex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len) != 1) {
    return Status::Internal("EVP_DigestFinal_ex failed");
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

#else  // !WL_HAVE_OPENSSL

bool Sha256Available() { return false; }

StatusOr<std::unique_ptr<Sha256>> Sha256::Create() {
  return Status::Unsupported(
      "--hash sha256 is unsupported in this build: OpenSSL's libcrypto was "
      "not found when it was configured (install libssl-dev and rebuild)");
}
Sha256::~Sha256() = default;
Status Sha256::Reset() { return Status::Unsupported("no libcrypto"); }
Status Sha256::Update(const void*, size_t) {
  return Status::Unsupported("no libcrypto");
}
StatusOr<std::string> Sha256::FinishHex() {
  return Status::Unsupported("no libcrypto");
}

#endif

std::string Sha256SumLine(const std::string& hex, const std::string& name) {
  bool escape = false;
  for (char c : name) {
    if (c == '\\' || c == '\n' || c == '\r') escape = true;
  }
  if (!escape) return hex + "  " + name;
  std::string out = "\\" + hex + "  ";
  for (char c : name) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace weightlift::cli
