// The Env for "s3://", "http://" and "https://" locations (see
// include/weightlift/object_storage.h for how a program turns it on).
//
// Files are RemoteObjects: any backend a loader asks for is served by the
// same ranged GETs (backend_name() says "s3" or "http"), ReadAt is
// thread-safe and splits each read into pieces that are all in flight at
// once on the process-wide Transport. Memory: bodies land in the caller's
// buffer; each object keeps only its first open_prefetch_bytes.
//
// An S3 "directory" is a prefix: "s3://bucket/prefix/" (or a key with no
// object but keys under "key/") lists with ListObjectsV2. HTTP servers have
// no listing: a sharded checkpoint there is named by its index URL.
#pragma once

#include <memory>
#include <string>

#include "env/env.h"
#include "weightlift/object_storage.h"

namespace weightlift::internal {

// An Env over OPTIONS (validated) and its own Transport. Tests use this
// directly; programs go through ConfigureObjectStorage.
StatusOr<std::unique_ptr<Env>> NewObjectEnv(
    const ObjectStorageOptions& options);

}  // namespace weightlift::internal
