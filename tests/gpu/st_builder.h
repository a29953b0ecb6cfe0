// A tiny safetensors writer for the GPU tests and bench/gpu_sweep.cc: tensor
// bytes come from a deterministic pattern (so any reader can recompute what
// must arrive), the header may be left unpadded so data offsets are odd, and
// files can be sparse (declared sizes beyond what is written).
// Independent of src/format on purpose: the tests check the loaders against
// bytes produced here.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace weightlift::testing {

struct TensorSpec {
  std::string name;
  std::string dtype;  // the spec's spelling, e.g. "BF16"
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;  // byte size (computed by the caller from dtype/shape)
};

// Byte size of NUMEL elements of DTYPE (bits per element rounded up to
// whole bytes over the tensor).
inline uint64_t DTypeBytes(const std::string& dtype, uint64_t numel) {
  int bits = 8;
  if (dtype == "F4")
    bits = 4;
  else if (dtype == "F6_E2M3" || dtype == "F6_E3M2")
    bits = 6;
  else if (dtype == "I16" || dtype == "U16" || dtype == "F16" ||
           dtype == "BF16")
    bits = 16;
  else if (dtype == "I32" || dtype == "U32" || dtype == "F32")
    bits = 32;
  else if (dtype == "C64" || dtype == "F64" || dtype == "I64" || dtype == "U64")
    bits = 64;
  return (numel * bits + 7) / 8;
}

inline TensorSpec Spec(std::string name, std::string dtype,
                       std::vector<uint64_t> shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  TensorSpec s{std::move(name), dtype, std::move(shape), 0};
  s.bytes = DTypeBytes(dtype, n);
  return s;
}

// The pattern byte at data-buffer position P of a file with SEED.
inline uint64_t PatternWord(uint64_t seed, uint64_t w) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + w * 0xBF58476D1CE4E5B9ull + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline void FillPattern(uint64_t seed, uint64_t pos, uint8_t* out, uint64_t n) {
  uint64_t i = 0;
  while (i < n) {
    uint64_t p = pos + i;
    uint64_t w = PatternWord(seed, p / 8);
    uint64_t k = p % 8;
    if (k == 0 && n - i >= 8) {
      std::memcpy(out + i, &w, 8);
      i += 8;
    } else {
      out[i++] = static_cast<uint8_t>(w >> (8 * k));
    }
  }
}

struct WrittenFile {
  std::string path;
  uint64_t data_offset = 0;      // 8 + N
  std::vector<uint64_t> begins;  // per spec, relative to the data buffer
};

// Writes PATH. When PAD_HEADER is false the header is not padded to 8 bytes
// (odd data offsets). With SPARSE, only the header is written and the file is
// extended with ftruncate (the data reads back as zeros). Returns an empty
// path on failure and sets *ERROR.
inline WrittenFile WriteSafetensors(const std::string& path,
                                    const std::vector<TensorSpec>& specs,
                                    uint64_t seed, bool pad_header,
                                    std::string* error, bool sparse = false) {
  WrittenFile out;
  std::string h = "{";
  uint64_t off = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    if (i) h += ",";
    h += "\"" + s.name + "\":{\"dtype\":\"" + s.dtype + "\",\"shape\":[";
    for (size_t d = 0; d < s.shape.size(); ++d) {
      if (d) h += ",";
      h += std::to_string(s.shape[d]);
    }
    h += "],\"data_offsets\":[" + std::to_string(off) + "," +
         std::to_string(off + s.bytes) + "]}";
    out.begins.push_back(off);
    off += s.bytes;
  }
  h += "}";
  if (pad_header) {
    while (h.size() % 8) h += ' ';
  } else if (h.size() % 2 == 0) {
    h += ' ';  // odd N: every tensor starts at an odd file offset
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = "open " + path + ": " + std::strerror(errno);
    return {};
  }
  auto write_all = [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n) {
      ssize_t k = ::write(fd, c, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      c += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  };
  uint64_t n = h.size();
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  bool ok = write_all(len, 8) && write_all(h.data(), h.size());
  out.data_offset = 8 + n;
  if (ok && sparse) {
    ok = ::ftruncate(fd, static_cast<off_t>(out.data_offset + off)) == 0;
  } else if (ok) {
    std::vector<uint8_t> buf(8u << 20);
    for (uint64_t p = 0; p < off && ok; p += buf.size()) {
      uint64_t k = std::min<uint64_t>(buf.size(), off - p);
      FillPattern(seed, p, buf.data(), k);
      ok = write_all(buf.data(), k);
    }
  }
  if (!ok) *error = "write " + path + ": " + std::strerror(errno);
  if (::close(fd) != 0 && ok) {
    ok = false;
    *error = "close " + path + ": " + std::strerror(errno);
  }
  if (!ok) return {};
  out.path = path;
  return out;
}

// The Llama-2-7B layout (bf16, 6.74 B parameters, 13.48 GB), split into two
// shards at about 10 GB like the published checkpoint.
inline std::vector<std::vector<TensorSpec>> Llama2_7bShards() {
  std::vector<TensorSpec> all;
  const uint64_t d = 4096, ff = 11008, vocab = 32000;
  all.push_back(Spec("model.embed_tokens.weight", "BF16", {vocab, d}));
  for (int l = 0; l < 32; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      all.push_back(Spec(p + "self_attn." + n + ".weight", "BF16", {d, d}));
    }
    all.push_back(Spec(p + "mlp.gate_proj.weight", "BF16", {ff, d}));
    all.push_back(Spec(p + "mlp.up_proj.weight", "BF16", {ff, d}));
    all.push_back(Spec(p + "mlp.down_proj.weight", "BF16", {d, ff}));
    all.push_back(Spec(p + "input_layernorm.weight", "BF16", {d}));
    all.push_back(Spec(p + "post_attention_layernorm.weight", "BF16", {d}));
  }
  all.push_back(Spec("model.norm.weight", "BF16", {d}));
  all.push_back(Spec("lm_head.weight", "BF16", {vocab, d}));
  std::vector<std::vector<TensorSpec>> shards(1);
  uint64_t in_shard = 0;
  for (auto& s : all) {
    if (in_shard + s.bytes > 10'000'000'000ull && !shards.back().empty()) {
      shards.emplace_back();
      in_shard = 0;
    }
    in_shard += s.bytes;
    shards.back().push_back(s);
  }
  return shards;
}

// Writes DIR/model-0000K-of-0000N.safetensors and the index. Returns false
// and sets *ERROR on failure.
inline bool WriteShardedCheckpoint(
    const std::string& dir, const std::vector<std::vector<TensorSpec>>& shards,
    uint64_t seed, std::string* error) {
  std::string index = "{\"metadata\":{},\"weight_map\":{";
  bool first = true;
  for (size_t k = 0; k < shards.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1,
                  shards.size());
    WrittenFile f = WriteSafetensors(dir + "/" + name, shards[k], seed + k,
                                     /*pad_header=*/true, error);
    if (f.path.empty()) return false;
    for (const auto& s : shards[k]) {
      index +=
          std::string(first ? "" : ",") + "\"" + s.name + "\":\"" + name + "\"";
      first = false;
    }
  }
  index += "}}";
  std::string ipath = dir + "/model.safetensors.index.json";
  int fd =
      ::open(ipath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, index.data(), index.size()) !=
                    static_cast<ssize_t>(index.size())) {
    *error = "write " + ipath + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

}  // namespace weightlift::testing
