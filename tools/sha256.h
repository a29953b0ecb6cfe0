// SHA-256 through OpenSSL's libcrypto (EVP), when this build found it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "weightlift/status.h"

namespace weightlift::cli {

// True when this build links libcrypto.
bool Sha256Available();

// Incremental SHA-256. Create() is Unsupported in a build without libcrypto.
class Sha256 {
 public:
  static StatusOr<std::unique_ptr<Sha256>> Create();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  // Starts a new digest (the object is reusable).
  Status Reset();
  Status Update(const void* data, size_t size);
  // Lowercase hex of the digest of everything since Reset().
  StatusOr<std::string> FinishHex();

 private:
  Sha256() = default;
  void* ctx_ = nullptr;  // EVP_MD_CTX*
};

// The line sha256sum prints for NAME: "<hex>  <name>". A name holding a
// backslash, newline or carriage return is escaped the way GNU sha256sum
// does it: the line starts with '\' and those characters become \\, \n, \r.
std::string Sha256SumLine(const std::string& hex, const std::string& name);

}  // namespace weightlift::cli
