// S3 requests: where a bucket and key live (path- or virtual-hosted-style
// URLs), the SigV4 headers for them, and ListObjectsV2.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "env/object/remote_object.h"
#include "env/object/transport.h"
#include "weightlift/object_storage.h"

namespace weightlift::internal {

class S3Client {
 public:
  S3Client(std::shared_ptr<Transport> transport, ObjectStorageOptions options);

  // How to GET BUCKET/KEY (signed unless the credentials are anonymous).
  ObjectTarget Target(const std::string& bucket, const std::string& key) const;

  struct Listing {
    std::vector<std::string> keys;      // full keys under the prefix
    std::vector<std::string> prefixes;  // "sub/dirs/" (with DELIMITER)
  };
  // ListObjectsV2 of BUCKET under PREFIX, all pages (at most MAX_KEYS keys;
  // more is ResourceExhausted). DELIMITER "/" groups deeper keys into
  // prefixes; "" lists every key.
  StatusOr<Listing> List(const std::string& bucket, const std::string& prefix,
                         const std::string& delimiter,
                         size_t max_keys = 100000) const;

  const ObjectStorageOptions& options() const { return options_; }
  const std::shared_ptr<Transport>& transport() const { return transport_; }

 private:
  struct Url {
    std::string url;        // full URL (query included)
    std::string authority;  // Host header
    std::string path;       // encoded path (the canonical URI)
  };
  Url MakeUrl(const std::string& bucket, const std::string& key,
              const std::string& query) const;
  std::vector<std::string> Sign(const char* method, const Url& url,
                                const std::string& canonical_query) const;

  std::shared_ptr<Transport> transport_;
  ObjectStorageOptions options_;
  std::string scheme_;     // of the endpoint
  std::string authority_;  // of the endpoint
  std::string base_path_;  // of the endpoint, without a trailing '/'
  bool aws_default_ = false;
};

// Decodes the five XML entities and &#N; / &#xN; (S3 listings escape keys).
std::string XmlUnescape(std::string_view s);

}  // namespace weightlift::internal
