// Object storage: checkpoints read straight from S3-compatible buckets
// ("s3://bucket/key", "s3://bucket/prefix/") and HTTP(S) servers that honour
// Range requests ("https://host/path"), with no copy on local disk.
//
// The library never reads the environment itself: a program (the CLI, the
// Python module) fills ObjectStorageOptions, usually with
// ObjectStorageOptionsFromEnvironment(), and calls ConfigureObjectStorage.
// From then on every API that takes a location (Checkpoint::Open, the
// loaders) accepts those URIs. docs/object-storage.md has the details.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "weightlift/status.h"

namespace weightlift {

// SigV4 credentials. All empty = anonymous (unsigned) requests.
struct ObjectStorageCredentials {
  std::string access_key_id;
  std::string secret_access_key;  // never printed, logged or put in errors
  std::string session_token;      // optional (temporary credentials)
  bool anonymous() const { return access_key_id.empty(); }
};

enum class S3Addressing {
  kAuto,     // path-style for a custom endpoint (MinIO, SeaweedFS, Ceph) or a
             // bucket name that is not a DNS label; else virtual-hosted
  kPath,     // https://endpoint/bucket/key
  kVirtual,  // https://bucket.endpoint/key
};

struct ObjectStorageOptions {
  // --- S3 -----------------------------------------------------------------
  std::string region = "us-east-1";
  // Scheme, host and port of the S3 API, e.g. "http://127.0.0.1:8333".
  // Empty: AWS, "https://s3.<region>.amazonaws.com".
  std::string endpoint_url;
  S3Addressing addressing = S3Addressing::kAuto;
  ObjectStorageCredentials credentials;
  // Where the credentials came from ("environment", "profile default in
  // ~/.aws/credentials", "anonymous"): for messages, never the secret.
  std::string credentials_source = "anonymous";

  // --- Transport (shared by every object of the process) -------------------
  // Each read is split into ranged GETs of this size, all in flight at once
  // up to max_connections. 8 MiB measured best on the development machine
  // (docs/object-storage.md); smaller pieces cost more requests per byte.
  size_t piece_bytes = 8u << 20;
  // A read smaller than min_pieces_per_read * piece_bytes is still split
  // into this many GETs (of at least 1 MiB each), so that a loader with few
  // threads (4 on a 2-core machine) keeps several connections busy.
  int min_pieces_per_read = 2;
  // Concurrent requests (and kept-alive connections) for the process.
  int max_connections = 16;
  // Threads driving libcurl (each owns one multi handle and a share of the
  // connections); raise it for HTTPS at many GB/s (TLS costs CPU).
  int transport_threads = 2;
  // A connection not made within this time is a retryable failure.
  double connect_timeout_seconds = 10;
  // A transfer that receives no byte for this long is abandoned and retried
  // from the byte it reached.
  double stall_timeout_seconds = 30;
  // The first bytes of every object, fetched when it is opened, so reading
  // its safetensors header costs no extra request.
  size_t open_prefetch_bytes = 256u << 10;
  // Verify TLS certificates (and hosts) with the system's CA store, or
  // with ca_bundle when set.
  bool verify_tls = true;
  std::string ca_bundle;

  // --- Retries --------------------------------------------------------------
  // 5xx, 429, 408, timeouts, stalls and connection resets are retried: a
  // piece gets at most max_attempts attempts; before attempt k (k >= 2) the
  // piece waits a random time in [0, min(backoff_max, backoff_initial *
  // 2^(k-2))] ("full jitter"). A partial body resumes from the byte it
  // reached. Everything else (403, 404, 412 changed object, a body of the
  // wrong length) fails at once.
  int max_attempts = 8;
  double backoff_initial_seconds = 0.1;
  double backoff_max_seconds = 5;

  // InvalidArgument naming the field when a value is out of range.
  Status Validate() const;
};

// Options from the process environment, the way the AWS CLI and SDKs read
// it: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the
// profile AWS_PROFILE (default "default") in AWS_SHARED_CREDENTIALS_FILE
// (~/.aws/credentials) and AWS_CONFIG_FILE (~/.aws/config), else anonymous.
// Region: AWS_REGION, AWS_DEFAULT_REGION, the profile's region, "us-east-1".
// Endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
// endpoint_url. Addressing: the profile's "s3 = addressing_style = ..." or
// WEIGHTLIFT_S3_ADDRESSING (auto|path|virtual). The limits above can be set
// with WEIGHTLIFT_OBJECT_* variables (docs/object-storage.md).
// InvalidArgument when AWS_PROFILE names a profile that does not exist or a
// value does not parse (the message never holds a secret).
StatusOr<ObjectStorageOptions> ObjectStorageOptionsFromEnvironment();

// Makes "s3://", "http://" and "https://" locations work everywhere a
// location is taken, with OPTIONS. Calling it again replaces the options for
// objects opened afterwards (objects already open keep theirs). Thread-safe.
Status ConfigureObjectStorage(const ObjectStorageOptions& options);

// ObjectStorageOptionsFromEnvironment() then ConfigureObjectStorage(): what
// the CLI and the Python module call before opening an object location (a
// program's edge may read the environment; the library does not).
Status ConfigureObjectStorageFromEnvironment();

// The bytes of object LOCATION when it has at most MAX_BYTES (small files
// beside a checkpoint, such as config.json); ResourceExhausted naming the
// size when larger. Needs ConfigureObjectStorage first.
StatusOr<std::string> ReadSmallObject(const std::string& location,
                                      uint64_t max_bytes);

// True for "s3://...", "http://..." and "https://..." locations.
bool IsObjectStorageLocation(const std::string& location);

}  // namespace weightlift
