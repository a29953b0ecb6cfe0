// Checkpoint::Open: finds the files of a checkpoint (one file, an index, or a
// directory), parses every header and cross-checks the index.
#include "weightlift/checkpoint.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "env/env.h"
#include "format/header.h"
#include "format/held_files.h"
#include "format/index.h"

namespace weightlift {
namespace {

using internal::Env;
using internal::File;
using internal::ParsedHeader;
using internal::ParsedIndex;

constexpr std::string_view kIndexName = "model.safetensors.index.json";

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.substr(s.size() - suffix.size()) == suffix;
}

// Parses the files of PATHS (in order). With INDEX, SHARD_NAMES[i] is the
// index's name for PATHS[i] and every tensor is cross-checked against it.
// Every file is opened once, here, and held open in the Checkpoint for the
// loads (see held_files.h). KNOWN: Env::Stat of PATHS[0] when the caller
// has it already (one file opened by path), so it is not asked twice.
StatusOr<Checkpoint> OpenFiles(Env& env, const std::vector<std::string>& paths,
                               const std::vector<std::string>& shard_names,
                               const ParsedIndex* index,
                               const std::string& index_path,
                               const internal::FileStat* known = nullptr) {
  std::vector<FileInfo> files;
  std::vector<TensorInfo> tensors;
  std::vector<std::shared_ptr<File>> open_files;
  std::map<std::string, uint32_t, std::less<>> owner;
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    StatusOr<std::unique_ptr<File>> opened =
        env.OpenForRead(path, Backend::kPread);
    if (!opened.ok()) {
      if (index != nullptr && opened.status().code() == StatusCode::kNotFound) {
        return Status::Corruption(FormatError::kIndexMissingShard,
                                  index_path + ": shard \"" + shard_names[i] +
                                      "\" (" + path + ") does not exist");
      }
      return opened.status();
    }
    std::shared_ptr<File> file = std::move(*opened);
    WL_ASSIGN_OR_RETURN(ParsedHeader h, internal::ReadHeader(*file));
    FileInfo f;
    f.path = path;
    if (i == 0 && known != nullptr) {
      f.resolved_path = known->resolved;
    } else {
      WL_ASSIGN_OR_RETURN(internal::FileStat st, env.Stat(path));
      f.resolved_path = std::move(st.resolved);
    }
    f.size = h.file_size;
    f.header_size = h.header_size;
    f.data_offset = h.data_offset;
    f.metadata = std::move(h.metadata);
    f.has_metadata = h.has_metadata;
    const uint32_t file_index = static_cast<uint32_t>(files.size());
    files.push_back(std::move(f));
    open_files.push_back(std::move(file));
    for (internal::ParsedTensor& t : h.tensors) {
      auto [it, inserted] = owner.emplace(t.name, file_index);
      if (!inserted) {
        return Status::Corruption(FormatError::kDuplicateTensor,
                                  "tensor '" + t.name + "' is in both " +
                                      paths[it->second] + " and " + path);
      }
      if (index != nullptr) {
        auto mapped = index->weight_map.find(t.name);
        if (mapped == index->weight_map.end() ||
            mapped->second != shard_names[i]) {
          return Status::Corruption(
              FormatError::kIndexTensorExtra,
              path + ": tensor '" + t.name + "' at data_offsets [" +
                  std::to_string(t.begin) + ", " + std::to_string(t.end) +
                  "] is " +
                  (mapped == index->weight_map.end()
                       ? std::string("not in the index ")
                       : "mapped to shard \"" + mapped->second + "\" by ") +
                  index_path);
        }
      }
      TensorInfo ti;
      ti.name = std::move(t.name);
      ti.dtype = t.dtype;
      ti.shape = std::move(t.shape);
      ti.file = file_index;
      ti.offset = h.data_offset + t.begin;  // <= file size: validated
      ti.size = t.end - t.begin;
      tensors.push_back(std::move(ti));
    }
  }
  if (index != nullptr) {
    for (const auto& [name, shard] : index->weight_map) {
      if (owner.find(name) == owner.end()) {
        return Status::Corruption(FormatError::kIndexTensorMissing,
                                  index_path + ": tensor '" + name +
                                      "' is mapped to shard \"" + shard +
                                      "\" but that file has no such tensor");
      }
    }
  }
  Checkpoint ckpt(std::move(files), std::move(tensors), index_path);
  internal::HeldFiles::Set(&ckpt, std::move(open_files));
  return ckpt;
}

StatusOr<Checkpoint> OpenIndex(Env& env, const std::string& index_path) {
  WL_ASSIGN_OR_RETURN(std::vector<std::byte> bytes,
                      env.ReadSmallFile(index_path, kMaxHeaderBytes,
                                        FormatError::kIndexTooLarge));
  WL_ASSIGN_OR_RETURN(ParsedIndex index,
                      internal::ParseIndex(bytes, index_path));
  std::vector<std::string> names;
  for (const auto& [tensor, shard] : index.weight_map) names.push_back(shard);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  // Shards are relative to the index's own directory (not its realpath: the
  // HF cache links the index and the shards separately into blobs/).
  const std::string dir = env.Parent(index_path);
  std::vector<std::string> paths;
  for (const std::string& n : names) paths.push_back(env.Join(dir, n));
  return OpenFiles(env, paths, names, &index, index_path);
}

StatusOr<Checkpoint> OpenDirectory(Env& env, const std::string& dir) {
  WL_ASSIGN_OR_RETURN(std::vector<std::string> names, env.ListDirectory(dir));
  std::vector<std::string> safetensors;
  std::vector<std::string> indexes;
  for (const std::string& name : names) {
    if (EndsWith(name, ".safetensors.index.json")) {
      indexes.push_back(name);
    } else if (EndsWith(name, ".safetensors")) {
      // Follows symlinks; dangling links and subdirectories are skipped.
      StatusOr<internal::FileStat> st = env.Stat(env.Join(dir, name));
      if (st.ok() && !st->is_directory) safetensors.push_back(name);
    }
  }
  if (std::find(indexes.begin(), indexes.end(), kIndexName) != indexes.end()) {
    return OpenIndex(env, env.Join(dir, std::string(kIndexName)));
  }
  if (indexes.size() == 1) return OpenIndex(env, env.Join(dir, indexes[0]));
  if (indexes.size() > 1) {
    return Status::InvalidArgument(
        dir + ": several *.safetensors.index.json files and no " +
        std::string(kIndexName) + "; open one of them by path");
  }
  if (safetensors.empty()) {
    return Status::NotFound(dir + ": no *.safetensors files and no " +
                            std::string(kIndexName) + " in this directory");
  }
  std::sort(safetensors.begin(), safetensors.end());
  std::vector<std::string> paths;
  for (const std::string& n : safetensors) paths.push_back(env.Join(dir, n));
  return OpenFiles(env, paths, {}, nullptr, {});
}

}  // namespace

namespace internal {

StatusOr<Checkpoint> OpenCheckpoint(Env& env, const std::string& location) {
  WL_ASSIGN_OR_RETURN(FileStat st, env.Stat(location));
  if (st.is_directory) return OpenDirectory(env, location);
  if (EndsWith(location, ".json")) return OpenIndex(env, location);
  return OpenFiles(env, {location}, {}, nullptr, {}, &st);
}

}  // namespace internal

uint64_t TensorInfo::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // validated: cannot overflow
  return n;
}

StatusOr<Checkpoint> Checkpoint::Open(const std::string& path) {
  if (const size_t nul = path.find('\0'); nul != std::string::npos) {
    // The system calls would see only the part before it: another file.
    return Status::InvalidArgument("checkpoint path '" + path.substr(0, nul) +
                                   "\\0...' contains a NUL byte at " +
                                   std::to_string(nul));
  }
  WL_ASSIGN_OR_RETURN(Env * env, internal::EnvForLocation(path));
  return internal::OpenCheckpoint(*env, path);
}

Checkpoint::Checkpoint(std::vector<FileInfo> files,
                       std::vector<TensorInfo> tensors, std::string index_path)
    : files_(std::move(files)),
      tensors_(std::move(tensors)),
      index_path_(std::move(index_path)),
      warm_(std::make_shared<internal::WarmMappings>()),
      prepared_(std::make_shared<internal::PreparedPagesSlot>()) {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    by_name_.emplace(tensors_[i].name, static_cast<uint32_t>(i));
    total_bytes_ += tensors_[i].size;
  }
}

const TensorInfo* Checkpoint::Find(std::string_view name) const {
  const int64_t i = IndexOf(name);
  return i < 0 ? nullptr : &tensors_[static_cast<size_t>(i)];
}

int64_t Checkpoint::IndexOf(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : static_cast<int64_t>(it->second);
}

const std::map<std::string, std::string>& Checkpoint::metadata() const {
  static const std::map<std::string, std::string> kEmpty;
  return files_.empty() ? kEmpty : files_.front().metadata;
}

}  // namespace weightlift
