// Checkpoint::Open: finds the files of a checkpoint (one file, an index, or a
// directory), parses every header and cross-checks the index.
#include "weightlift/checkpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <utility>

#include "format/file_util.h"
#include "format/header.h"
#include "format/index.h"

namespace weightlift {
namespace {

namespace fs = std::filesystem;
using internal::ParsedHeader;
using internal::ParsedIndex;

constexpr std::string_view kIndexName = "model.safetensors.index.json";

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.substr(s.size() - suffix.size()) == suffix;
}

StatusOr<std::string> RealPath(const std::string& path) {
  char* r = ::realpath(path.c_str(), nullptr);
  if (r == nullptr) return Status::IoErrorFromErrno(path + ": realpath", errno);
  std::string out(r);
  ::free(r);
  return out;
}

// Parses the files of PATHS (in order). With INDEX, SHARD_NAMES[i] is the
// index's name for PATHS[i] and every tensor is cross-checked against it.
StatusOr<Checkpoint> OpenFiles(const std::vector<std::string>& paths,
                               const std::vector<std::string>& shard_names,
                               const ParsedIndex* index,
                               const std::string& index_path) {
  std::vector<FileInfo> files;
  std::vector<TensorInfo> tensors;
  std::map<std::string, uint32_t, std::less<>> owner;
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    StatusOr<ParsedHeader> parsed = internal::ReadHeaderFile(path);
    if (!parsed.ok()) {
      if (index != nullptr && parsed.status().code() == StatusCode::kNotFound) {
        return Status::Corruption(FormatError::kIndexMissingShard,
                                  index_path + ": shard \"" + shard_names[i] +
                                      "\" (" + path + ") does not exist");
      }
      return parsed.status();
    }
    ParsedHeader& h = *parsed;
    FileInfo f;
    f.path = path;
    WL_ASSIGN_OR_RETURN(f.resolved_path, RealPath(path));
    f.size = h.file_size;
    f.header_size = h.header_size;
    f.data_offset = h.data_offset;
    f.metadata = std::move(h.metadata);
    f.has_metadata = h.has_metadata;
    const uint32_t file_index = static_cast<uint32_t>(files.size());
    files.push_back(std::move(f));
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
  return Checkpoint(std::move(files), std::move(tensors), index_path);
}

StatusOr<Checkpoint> OpenIndex(const std::string& index_path) {
  WL_ASSIGN_OR_RETURN(std::vector<std::byte> bytes,
                      internal::ReadSmallFile(index_path, kMaxHeaderBytes,
                                              FormatError::kIndexTooLarge));
  WL_ASSIGN_OR_RETURN(ParsedIndex index,
                      internal::ParseIndex(bytes, index_path));
  std::vector<std::string> names;
  for (const auto& [tensor, shard] : index.weight_map) names.push_back(shard);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  // Shards are relative to the index's own directory (not its realpath: the
  // HF cache links the index and the shards separately into blobs/).
  const fs::path dir = fs::path(index_path).parent_path();
  std::vector<std::string> paths;
  for (const std::string& n : names) paths.push_back((dir / n).string());
  return OpenFiles(paths, names, &index, index_path);
}

StatusOr<Checkpoint> OpenDirectory(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> safetensors;
  std::vector<std::string> indexes;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (EndsWith(name, ".safetensors.index.json")) {
      indexes.push_back(name);
    } else if (EndsWith(name, ".safetensors")) {
      // Follows symlinks; dangling links and subdirectories are skipped.
      std::error_code ec2;
      if (fs::is_regular_file(it->path(), ec2)) safetensors.push_back(name);
    }
  }
  if (ec) {
    return Status::IoErrorFromErrno(dir + ": listing the directory",
                                    ec.value());
  }
  const fs::path base(dir);
  if (std::find(indexes.begin(), indexes.end(), kIndexName) != indexes.end()) {
    return OpenIndex((base / kIndexName).string());
  }
  if (indexes.size() == 1) return OpenIndex((base / indexes[0]).string());
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
  for (const std::string& n : safetensors) paths.push_back((base / n).string());
  return OpenFiles(paths, {}, nullptr, {});
}

}  // namespace

uint64_t TensorInfo::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // validated: cannot overflow
  return n;
}

StatusOr<Checkpoint> Checkpoint::Open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return Status::NotFound(path + ": no such file or directory");
    }
    return Status::IoErrorFromErrno(path + ": stat", errno);
  }
  if (S_ISDIR(st.st_mode)) return OpenDirectory(path);
  if (EndsWith(path, ".json")) return OpenIndex(path);
  return OpenFiles({path}, {}, nullptr, {});
}

Checkpoint::Checkpoint(std::vector<FileInfo> files,
                       std::vector<TensorInfo> tensors, std::string index_path)
    : files_(std::move(files)),
      tensors_(std::move(tensors)),
      index_path_(std::move(index_path)) {
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
