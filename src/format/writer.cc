#include "format/writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "env/env.h"
#include "format/header.h"
#include "format/json_reader.h"

namespace weightlift::internal {
namespace {

// JSON string escaping as serde_json does it: quote, backslash and control
// characters; UTF-8 passes through unchanged.
void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x",
                        static_cast<unsigned>(static_cast<unsigned char>(c)));
          *out += buf;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

Status CheckUtf8(std::string_view s, std::string_view what) {
  size_t bad;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(s.data()),
                                   s.size());
  if (!IsValidUtf8(bytes, &bad)) {
    return Status::InvalidArgument(std::string(what) +
                                   " is not valid UTF-8 at byte " +
                                   std::to_string(bad));
  }
  return Status::OK();
}

// Double-buffered sequential output: Append() fills one buffer while the
// previous one is written by a background task.
class StreamingFile {
 public:
  StreamingFile(WritableFile* out, size_t buffer_bytes) : out_(out) {
    bufs_[0].resize(buffer_bytes);
    bufs_[1].resize(buffer_bytes);
  }
  ~StreamingFile() {
    if (pending_.valid()) (void)pending_.get();
  }

  // Room left in the current buffer, to be filled then Commit()ed.
  std::span<std::byte> Room() {
    return std::span<std::byte>(bufs_[cur_]).subspan(used_);
  }
  Status Commit(size_t n) {
    used_ += n;
    if (used_ == bufs_[cur_].size()) return Flush();
    return Status::OK();
  }
  Status Append(std::span<const std::byte> data) {
    while (!data.empty()) {
      std::span<std::byte> room = Room();
      const size_t n = std::min(room.size(), data.size());
      std::memcpy(room.data(), data.data(), n);
      data = data.subspan(n);
      WL_RETURN_IF_ERROR(Commit(n));
    }
    return Status::OK();
  }
  // Writes what is buffered and waits for every write to finish.
  Status Finish() {
    WL_RETURN_IF_ERROR(Flush());
    return Wait();
  }

 private:
  Status Wait() {
    if (!pending_.valid()) return Status::OK();
    return pending_.get();
  }
  Status Flush() {
    WL_RETURN_IF_ERROR(Wait());
    if (used_ == 0) return Status::OK();
    std::span<const std::byte> chunk(bufs_[cur_].data(), used_);
    pending_ = std::async(std::launch::async,
                          [this, chunk] { return out_->Append(chunk); });
    cur_ ^= 1;
    used_ = 0;
    return Status::OK();
  }

  WritableFile* out_;
  std::vector<std::byte> bufs_[2];
  int cur_ = 0;
  size_t used_ = 0;
  std::future<Status> pending_;
};

Status WriteBody(StreamingFile* out, const std::string& header,
                 const std::vector<TensorToWrite>& tensors,
                 const std::vector<uint64_t>& sizes) {
  std::byte prefix[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<std::byte>(n >> (8 * i));
  WL_RETURN_IF_ERROR(out->Append(prefix));
  WL_RETURN_IF_ERROR(out->Append(std::as_bytes(std::span(header))));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorToWrite& t = tensors[i];
    if (!t.generate) {
      WL_RETURN_IF_ERROR(out->Append(t.data));
      continue;
    }
    uint64_t done = 0;
    while (done < sizes[i]) {
      std::span<std::byte> room = out->Room();
      const size_t piece =
          static_cast<size_t>(std::min<uint64_t>(room.size(), sizes[i] - done));
      t.generate(done, room.first(piece));
      done += piece;
      WL_RETURN_IF_ERROR(out->Commit(piece));
    }
  }
  return out->Finish();
}

}  // namespace

void SortLikeReference(std::vector<TensorToWrite>* tensors) {
  std::stable_sort(tensors->begin(), tensors->end(),
                   [](const TensorToWrite& a, const TensorToWrite& b) {
                     if (a.dtype != b.dtype) return a.dtype > b.dtype;
                     return a.name < b.name;
                   });
}

StatusOr<std::string> BuildHeaderJson(const std::vector<TensorToWrite>& tensors,
                                      const WriteOptions& options) {
  std::string json = "{";
  bool first = true;
  if (!options.metadata.empty()) {
    json += "\"__metadata__\":{";
    for (const auto& [k, v] : options.metadata) {
      WL_RETURN_IF_ERROR(CheckUtf8(k, "metadata key"));
      WL_RETURN_IF_ERROR(CheckUtf8(v, "metadata value of \"" + k + "\""));
      if (!first) json += ',';
      first = false;
      AppendJsonString(k, &json);
      json += ':';
      AppendJsonString(v, &json);
    }
    json += '}';
    first = false;
  }
  std::set<std::string_view> seen;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      return Status::InvalidArgument("tensor name \"" + t.name +
                                     "\" cannot be written");
    }
    WL_RETURN_IF_ERROR(CheckUtf8(t.name, "tensor name"));
    if (!seen.insert(t.name).second) {
      return Status::InvalidArgument("tensor '" + t.name + "' given twice");
    }
    StatusOr<uint64_t> bytes =
        TensorBytes(t.shape, t.dtype, "tensor '" + t.name + "'");
    if (!bytes.ok()) return Status::InvalidArgument(bytes.status().message());
    uint64_t end;
    if (__builtin_add_overflow(offset, *bytes, &end)) {
      return Status::InvalidArgument("tensor '" + t.name +
                                     "': total size overflows 64 bits");
    }
    if (!first) json += ',';
    first = false;
    AppendJsonString(t.name, &json);
    json += ":{\"dtype\":\"";
    json += DTypeName(t.dtype);
    json += "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (i) json += ',';
      json += std::to_string(t.shape[i]);
    }
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(end) + "]}";
    offset = end;
  }
  json += '}';
  if (options.pad_header) {
    json.append((8 - json.size() % 8) % 8, ' ');
  }
  return json;
}

Status WriteSafetensors(const std::string& path,
                        std::vector<TensorToWrite> tensors,
                        const WriteOptions& options) {
  if (options.reference_order) SortLikeReference(&tensors);
  WL_ASSIGN_OR_RETURN(std::string header, BuildHeaderJson(tensors, options));
  std::vector<uint64_t> sizes;
  for (const TensorToWrite& t : tensors) {
    StatusOr<uint64_t> bytes = TensorBytes(t.shape, t.dtype, t.name);
    sizes.push_back(*bytes);  // validated by BuildHeaderJson
    if (!t.generate && t.data.size() != *bytes) {
      return Status::InvalidArgument(path + ": tensor '" + t.name + "' needs " +
                                     std::to_string(*bytes) + " bytes, " +
                                     std::to_string(t.data.size()) + " given");
    }
  }
  WL_ASSIGN_OR_RETURN(Env * env, EnvForLocation(path));
  // Nothing appears at PATH unless every byte was written (WritableFile).
  WL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                      env->OpenForWrite(path));
  {
    StreamingFile out(file.get(),
                      std::max(options.buffer_bytes, size_t{8} << 20));
    WL_RETURN_IF_ERROR(WriteBody(&out, header, tensors, sizes));
  }  // waits for the last background write
  return file->Close();
}

std::string ShardFileName(int k, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", k, n);
  return buf;
}

Status WriteShardedCheckpoint(const std::string& dir,
                              std::vector<std::vector<TensorToWrite>> shards,
                              const WriteOptions& options) {
  const int n = static_cast<int>(shards.size());
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  std::map<std::string, std::string> sorted_map;
  uint64_t total = 0;
  for (int k = 0; k < n; ++k) {
    const std::string name = ShardFileName(k + 1, n);
    for (const TensorToWrite& t : shards[k]) {
      StatusOr<uint64_t> bytes = TensorBytes(t.shape, t.dtype, t.name);
      if (!bytes.ok()) return Status::InvalidArgument(bytes.status().message());
      if (__builtin_add_overflow(total, *bytes, &total)) {
        return Status::InvalidArgument("checkpoint size overflows 64 bits");
      }
      WL_RETURN_IF_ERROR(CheckUtf8(t.name, "tensor name"));
      if (!sorted_map.emplace(t.name, name).second) {
        return Status::InvalidArgument("tensor '" + t.name +
                                       "' is in two shards");
      }
    }
  }
  WL_ASSIGN_OR_RETURN(Env * env, EnvForLocation(dir));
  for (int k = 0; k < n; ++k) {
    const std::string path = env->Join(dir, ShardFileName(k + 1, n));
    WL_RETURN_IF_ERROR(WriteSafetensors(path, std::move(shards[k]), options));
  }
  for (const auto& [tensor, shard] : sorted_map) weight_map[tensor] = shard;
  nlohmann::ordered_json index;
  index["metadata"]["total_size"] = total;
  index["weight_map"] = std::move(weight_map);
  const std::string text = index.dump(2) + "\n";
  WL_ASSIGN_OR_RETURN(
      std::unique_ptr<WritableFile> file,
      env->OpenForWrite(env->Join(dir, "model.safetensors.index.json")));
  WL_RETURN_IF_ERROR(file->Append(std::as_bytes(std::span(text))));
  return file->Close();
}

}  // namespace weightlift::internal
