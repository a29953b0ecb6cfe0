#include "env/object/object_env.h"

#include <algorithm>
#include <mutex>
#include <span>

#include "env/object/remote_object.h"
#include "env/object/s3.h"
#include "env/object/transport.h"
#include "env/object/uri.h"
#include "util/fork_epoch.h"

namespace weightlift::internal {
namespace {

// What one configuration shares: the options, the transport, the S3 client.
struct ObjectStore {
  ObjectStorageOptions options;
  std::shared_ptr<Transport> transport;
  std::unique_ptr<S3Client> s3;
};

StatusOr<std::shared_ptr<const ObjectStore>> MakeStore(
    const ObjectStorageOptions& options) {
  WL_RETURN_IF_ERROR(options.Validate());
  TransportOptions t;
  t.max_connections = options.max_connections;
  t.threads = options.transport_threads;
  t.connect_timeout_seconds = options.connect_timeout_seconds;
  t.stall_timeout_seconds = options.stall_timeout_seconds;
  t.verify_tls = options.verify_tls;
  t.ca_bundle = options.ca_bundle;
  auto store = std::make_shared<ObjectStore>();
  store->options = options;
  WL_ASSIGN_OR_RETURN(store->transport, Transport::Create(t));
  store->s3 = std::make_unique<S3Client>(store->transport, options);
  return std::shared_ptr<const ObjectStore>(std::move(store));
}

StatusOr<ObjectTarget> TargetFor(const ObjectStore& store,
                                 const ObjectUri& uri) {
  if (uri.kind == ObjectUri::Kind::kS3) {
    return store.s3->Target(uri.bucket, uri.key);
  }
  ObjectTarget t;
  t.url = uri.url;
  t.printable = PrintableUrl(uri.url);
  t.follow_redirects = true;  // e.g. a hub's resolve URL to its CDN
  return t;
}

class ObjectFile final : public File {
 public:
  ObjectFile(std::shared_ptr<const ObjectStore> store, std::string location,
             ObjectUri uri, std::shared_ptr<RemoteObject> object)
      : store_(std::move(store)),
        location_(std::move(location)),
        uri_(std::move(uri)),
        object_(std::move(object)) {
    identity_.size = object_->size();
    identity_.etag = object_->version();
  }

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override {
    return object_->ReadAt(offset, dst);
  }
  uint64_t read_cost_bytes() const override { return kObjectReadCostBytes; }

  StatusOr<FileIdentity> Stat() const override {
    WL_ASSIGN_OR_RETURN(ObjectTarget target, TargetFor(*store_, uri_));
    ObjectStorageOptions probe = store_->options;
    probe.open_prefetch_bytes = 1;
    WL_ASSIGN_OR_RETURN(auto now, RemoteObject::Open(store_->transport,
                                                     std::move(target), probe));
    FileIdentity id;
    id.size = now->size();
    id.etag = now->version();
    return id;
  }

  StatusOr<std::unique_ptr<File>> Reopen(Backend,
                                         const IoOptions&) const override {
    // Every backend is the same ranged GETs: share the pinned object.
    return std::unique_ptr<File>(
        new ObjectFile(store_, location_, uri_, object_));
  }

  const std::string& path() const override { return location_; }
  const FileIdentity& identity() const override { return identity_; }
  std::string_view backend_name() const override {
    return uri_.kind == ObjectUri::Kind::kS3 ? "s3" : "http";
  }
  // Not a degradation: the report's one place for what served the file.
  std::string Degraded() const override {
    std::string d = object_->Describe();
    if (const uint64_t r = object_->retries(); r > 0) {
      d += "; " + std::to_string(r) +
           " requests retried after transient "
           "failures";
    }
    return d;
  }

 private:
  std::shared_ptr<const ObjectStore> store_;
  std::string location_;
  ObjectUri uri_;
  std::shared_ptr<RemoteObject> object_;
  FileIdentity identity_;
};

// "s3://b/k/" -> "k/" style prefix for listing ("" stays "").
std::string DirPrefix(const std::string& key) {
  if (key.empty() || key.back() == '/') return key;
  return key + "/";
}

class ObjectEnv final : public Env {
 public:
  explicit ObjectEnv(std::shared_ptr<const ObjectStore> store)
      : store_(std::move(store)) {}

  StatusOr<std::unique_ptr<File>> OpenForRead(const std::string& location,
                                              Backend,
                                              const IoOptions&) override {
    WL_ASSIGN_OR_RETURN(ObjectUri uri, ParseObjectUri(location));
    if (uri.kind == ObjectUri::Kind::kS3 &&
        (uri.key.empty() || uri.key.back() == '/')) {
      return Status::InvalidArgument("'" + location +
                                     "' is a prefix (a directory), not an "
                                     "object");
    }
    WL_ASSIGN_OR_RETURN(ObjectTarget target, TargetFor(*store_, uri));
    auto object = RemoteObject::Open(store_->transport, std::move(target),
                                     store_->options);
    if (!object.ok()) return AddHint(object.status());
    return std::unique_ptr<File>(
        new ObjectFile(store_, location, std::move(uri), *std::move(object)));
  }

  StatusOr<FileStat> Stat(const std::string& location) override {
    WL_ASSIGN_OR_RETURN(ObjectUri uri, ParseObjectUri(location));
    FileStat out;
    out.resolved = location;
    if (uri.kind == ObjectUri::Kind::kS3 &&
        (uri.key.empty() || uri.key.back() == '/')) {
      WL_ASSIGN_OR_RETURN(bool any, HasKeysUnder(uri));
      if (!any) return NotFoundPrefix(location);
      out.is_directory = true;
      return out;
    }
    WL_ASSIGN_OR_RETURN(ObjectTarget target, TargetFor(*store_, uri));
    ObjectStorageOptions probe = store_->options;
    probe.open_prefetch_bytes = 1;
    auto object =
        RemoteObject::Open(store_->transport, std::move(target), probe);
    if (object.ok()) {
      out.identity.size = (*object)->size();
      out.identity.etag = (*object)->version();
      return out;
    }
    if (object.status().code() == StatusCode::kNotFound &&
        uri.kind == ObjectUri::Kind::kS3) {
      WL_ASSIGN_OR_RETURN(bool any, HasKeysUnder(uri));
      if (any) {
        out.is_directory = true;
        return out;
      }
    }
    return AddHint(object.status());
  }

  StatusOr<std::vector<std::string>> ListDirectory(
      const std::string& location) override {
    WL_ASSIGN_OR_RETURN(ObjectUri uri, ParseObjectUri(location));
    if (uri.kind != ObjectUri::Kind::kS3) {
      return Status::Unsupported(
          "'" + PrintableUrl(location) +
          "': an HTTP server has no listing; name the checkpoint's "
          "model.safetensors.index.json or .safetensors URL instead");
    }
    const std::string prefix = DirPrefix(uri.key);
    WL_ASSIGN_OR_RETURN(S3Client::Listing l,
                        store_->s3->List(uri.bucket, prefix, "/"));
    std::vector<std::string> names;
    for (const std::string& k : l.keys) {
      if (k.size() > prefix.size()) names.push_back(k.substr(prefix.size()));
    }
    for (std::string p : l.prefixes) {
      if (p.size() > prefix.size()) {
        p = p.substr(prefix.size());
        if (!p.empty() && p.back() == '/') p.pop_back();
        names.push_back(p);
      }
    }
    if (names.empty()) return NotFoundPrefix(location);
    std::sort(names.begin(), names.end());
    return names;
  }

  StatusOr<std::unique_ptr<WritableFile>> OpenForWrite(
      const std::string& location) override {
    return Status::Unsupported("'" + PrintableUrl(location) +
                               "': writing to object storage is not "
                               "supported");
  }

  std::string Join(const std::string& dir,
                   const std::string& name) const override {
    if (!dir.empty() && dir.back() == '/') return dir + name;
    return dir + "/" + name;
  }

  std::string Parent(const std::string& location) const override {
    std::string l = location.substr(0, location.find_first_of("?#"));
    const size_t scheme_end = l.find("://");
    const size_t root = scheme_end == std::string::npos ? 0 : scheme_end + 3;
    const size_t slash = l.rfind('/');
    if (slash == std::string::npos || slash < root) return l;
    return l.substr(0, slash);
  }

 private:
  StatusOr<bool> HasKeysUnder(const ObjectUri& uri) {
    WL_ASSIGN_OR_RETURN(S3Client::Listing l,
                        store_->s3->List(uri.bucket, DirPrefix(uri.key), "/",
                                         /*max_keys=*/1000));
    return !l.keys.empty() || !l.prefixes.empty();
  }

  static Status NotFoundPrefix(const std::string& location) {
    return Status::NotFound("'" + location +
                            "': no object and no keys under that prefix");
  }

  // 403 with no credentials: say where credentials come from.
  Status AddHint(const Status& s) const {
    if (s.message().find("HTTP 403") != std::string::npos &&
        store_->options.credentials.anonymous()) {
      return Status(s.code(),
                    s.message() +
                        "; no credentials were found, so the request was "
                        "anonymous (set AWS_ACCESS_KEY_ID/"
                        "AWS_SECRET_ACCESS_KEY or AWS_PROFILE)");
    }
    return s;
  }

  std::shared_ptr<const ObjectStore> store_;
};

// The process-wide configuration behind the registered schemes.
std::mutex g_mu;
std::shared_ptr<const ObjectStore> g_store;
ObjectStorageOptions g_options;
bool g_registered = false;
// The fork epoch g_store was made in: a forked child makes its own store,
// since the transport's threads and connections stayed in the parent
// (util/fork_epoch.h). REQUIRES g_mu held.
uint64_t g_store_epoch = 0;
void RemakeStoreAfterFork() {
  if (!g_store || g_store_epoch == ForkEpoch()) return;
  // On failure the old store stays, and its transport says why it cannot
  // run here.
  if (auto store = MakeStore(g_options); store.ok()) {
    g_store = std::move(store).value();
    g_store_epoch = ForkEpoch();
  }
}

bool SameOptions(const ObjectStorageOptions& a, const ObjectStorageOptions& b) {
  return a.region == b.region && a.endpoint_url == b.endpoint_url &&
         a.addressing == b.addressing &&
         a.credentials.access_key_id == b.credentials.access_key_id &&
         a.credentials.secret_access_key == b.credentials.secret_access_key &&
         a.credentials.session_token == b.credentials.session_token &&
         a.piece_bytes == b.piece_bytes &&
         a.min_pieces_per_read == b.min_pieces_per_read &&
         a.max_connections == b.max_connections &&
         a.transport_threads == b.transport_threads &&
         a.connect_timeout_seconds == b.connect_timeout_seconds &&
         a.stall_timeout_seconds == b.stall_timeout_seconds &&
         a.open_prefetch_bytes == b.open_prefetch_bytes &&
         a.verify_tls == b.verify_tls && a.ca_bundle == b.ca_bundle &&
         a.max_attempts == b.max_attempts &&
         a.backoff_initial_seconds == b.backoff_initial_seconds &&
         a.backoff_max_seconds == b.backoff_max_seconds;
}

// The Env registered for the schemes: forwards to the store configured
// last (a File keeps the store it was opened with).
class ConfiguredEnv final : public Env {
 public:
  StatusOr<std::unique_ptr<File>> OpenForRead(
      const std::string& location, Backend backend,
      const IoOptions& options) override {
    return Current().OpenForRead(location, backend, options);
  }
  StatusOr<FileStat> Stat(const std::string& location) override {
    return Current().Stat(location);
  }
  StatusOr<std::vector<std::string>> ListDirectory(
      const std::string& location) override {
    return Current().ListDirectory(location);
  }
  StatusOr<std::unique_ptr<WritableFile>> OpenForWrite(
      const std::string& location) override {
    return Current().OpenForWrite(location);
  }
  std::string Join(const std::string& dir,
                   const std::string& name) const override {
    return ObjectEnv(nullptr).Join(dir, name);
  }
  std::string Parent(const std::string& location) const override {
    return ObjectEnv(nullptr).Parent(location);
  }

 private:
  ObjectEnv Current() {
    std::lock_guard<std::mutex> l(g_mu);
    RemakeStoreAfterFork();
    return ObjectEnv(g_store);
  }
};

}  // namespace

StatusOr<std::unique_ptr<Env>> NewObjectEnv(
    const ObjectStorageOptions& options) {
  WL_ASSIGN_OR_RETURN(auto store, MakeStore(options));
  return std::unique_ptr<Env>(new ObjectEnv(std::move(store)));
}

}  // namespace weightlift::internal

namespace weightlift {

Status ConfigureObjectStorage(const ObjectStorageOptions& options) {
  using namespace internal;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_store && SameOptions(options, g_options) &&
      g_store_epoch == ForkEpoch()) {
    return Status::OK();
  }
  WL_ASSIGN_OR_RETURN(auto store, MakeStore(options));
  g_store = std::move(store);
  g_options = options;
  g_store_epoch = ForkEpoch();
  if (!g_registered) {
    for (const char* scheme : {"s3", "http", "https"}) {
      RegisterEnv(scheme, []() -> StatusOr<std::unique_ptr<Env>> {
        return std::unique_ptr<Env>(new ConfiguredEnv());
      });
    }
    g_registered = true;
  }
  return Status::OK();
}

}  // namespace weightlift

namespace weightlift {

Status ConfigureObjectStorageFromEnvironment() {
  WL_ASSIGN_OR_RETURN(ObjectStorageOptions options,
                      ObjectStorageOptionsFromEnvironment());
  return ConfigureObjectStorage(options);
}

StatusOr<std::string> ReadSmallObject(const std::string& location,
                                      uint64_t max_bytes) {
  if (!IsObjectStorageLocation(location)) {
    return Status::InvalidArgument("'" + location +
                                   "' is not an object-storage location");
  }
  WL_ASSIGN_OR_RETURN(internal::Env * env, internal::EnvForLocation(location));
  WL_ASSIGN_OR_RETURN(std::unique_ptr<internal::File> f,
                      env->OpenForRead(location, Backend::kPread));
  if (f->size() > max_bytes) {
    return Status::ResourceExhausted(
        internal::PrintableUrl(location) + ": " + std::to_string(f->size()) +
        " bytes, more than the " + std::to_string(max_bytes) + " allowed");
  }
  std::string out(f->size(), '\0');
  WL_RETURN_IF_ERROR(
      f->ReadAt(0, std::as_writable_bytes(std::span<char>(out))));
  return out;
}

}  // namespace weightlift
