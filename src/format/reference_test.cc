// Cross-check with the reference implementation: files written by the real
// safetensors package parse identically and are byte-identical to the
// writer's output for the same tensors; the package reads the writer's
// files back. The interpreter is the one the build was configured with
// (WL_TEST_PYTHON: `make` passes the project venv's, where `make deps`
// installs safetensors and numpy), so a missing package is a failure here,
// never a skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "format/header.h"
#include "format/test_util.h"
#include "format/writer.h"
#include "weightlift/checkpoint.h"

namespace weightlift::internal {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

#ifndef WL_TEST_PYTHON
#error "WL_TEST_PYTHON (the Python interpreter with safetensors) is not set"
#endif
constexpr const char* kPython = WL_TEST_PYTHON;

// Tensors as (name, dtype, shape); byte i of a tensor is
// (i * 31 + len(name_utf8)) & 0xFF (& 1 for BOOL) in both languages.
constexpr const char* kScript = R"PY(
import sys
import numpy as np
from safetensors.numpy import save_file, load_file

DT = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16,
      "U16": np.uint16, "F16": np.float16, "I32": np.int32, "U32": np.uint32,
      "F32": np.float32, "F64": np.float64, "I64": np.int64, "U64": np.uint64,
      "C64": np.complex64}
SPECS = []
for i, d in enumerate(DT):
    SPECS.append(("t.%s" % d, d, (2, 3)))
SPECS += [("scalar", "F32", ()), ("empty", "F16", (0,)),
          ("empty2", "I64", (3, 0)), ("名前.重み", "BF16_AS_U16", (4,)),
          ("z_last", "U8", (5,)), ("a_first", "U8", (1,))]

def array(name, d, shape):
    np_dtype = np.uint16 if d == "BF16_AS_U16" else DT[d]
    n = int(np.prod(shape)) * np.dtype(np_dtype).itemsize
    k = len(name.encode())
    raw = bytes(((i * 31 + k) & 0xFF) for i in range(n))
    if d == "BOOL":
        raw = bytes(b & 1 for b in raw)
    return np.frombuffer(raw, dtype=np_dtype).reshape(shape)

mode, path = sys.argv[1], sys.argv[2]
if mode == "write":
    save_file({n: array(n, d, s) for n, d, s in SPECS}, path,
              metadata={"format": "np"})
else:
    got = load_file(path)
    assert set(got) == {n for n, _, _ in SPECS}, sorted(got)
    for n, d, s in SPECS:
        want = array(n, d, s)
        assert got[n].shape == want.shape, (n, got[n].shape)
        assert got[n].tobytes() == want.tobytes(), n
print("ok")
)PY";

bool HaveReference() {
  static const bool have =
      std::system((std::string(kPython) +
                   " -c 'import numpy, safetensors.numpy' >/dev/null 2>&1")
                      .c_str()) == 0;
  return have;
}

struct Spec {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
};

std::vector<Spec> Specs() {
  std::vector<Spec> s;
  for (const char* d : {"BOOL", "U8", "I8", "I16", "U16", "F16", "I32", "U32",
                        "F32", "F64", "I64", "U64", "C64"}) {
    s.push_back({std::string("t.") + d, *ParseDType(d), {2, 3}});
  }
  s.push_back({"scalar", DType::kF32, {}});
  s.push_back({"empty", DType::kF16, {0}});
  s.push_back({"empty2", DType::kI64, {3, 0}});
  s.push_back({"名前.重み", DType::kU16, {4}});
  s.push_back({"z_last", DType::kU8, {5}});
  s.push_back({"a_first", DType::kU8, {1}});
  return s;
}

std::vector<std::byte> Data(const Spec& s) {
  const uint64_t n = *TensorBytes(s.shape, s.dtype, s.name);
  std::vector<std::byte> b(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint8_t v = static_cast<uint8_t>((i * 31 + s.name.size()) & 0xFF);
    if (s.dtype == DType::kBool) v &= 1;
    b[i] = static_cast<std::byte>(v);
  }
  return b;
}

class ReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(HaveReference())
        << kPython << " cannot import numpy and safetensors.numpy; `make deps` "
        << "installs them (python/requirements-dev.txt)";
    WriteFile(dir_ / "ref.py", kScript);
  }
  int Python(const std::string& mode, const std::string& path) {
    const std::string cmd = std::string(kPython) + " " + (dir_ / "ref.py") +
                            " " + mode + " " + path;
    return std::system(cmd.c_str());
  }
  TempDir dir_;
};

TEST_F(ReferenceTest, ReferenceFileParsesAndMatchesWriterByteForByte) {
  const std::string ref = dir_ / "ref.safetensors";
  ASSERT_EQ(Python("write", ref), 0);
  StatusOr<ParsedHeader> h = ReadHeaderFile(ref);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->metadata.at("format"), "np");
  const std::string file = ReadFile(ref);

  std::vector<Spec> specs = Specs();
  std::vector<std::vector<std::byte>> data;
  std::vector<TensorToWrite> ts;
  for (const Spec& s : specs) data.push_back(Data(s));
  for (size_t i = 0; i < specs.size(); ++i) {
    ts.push_back({specs[i].name, specs[i].dtype, specs[i].shape, data[i], {}});
  }
  ASSERT_EQ(h->tensors.size(), specs.size());
  for (const ParsedTensor& t : h->tensors) {
    auto it = std::find_if(specs.begin(), specs.end(),
                           [&](const Spec& s) { return s.name == t.name; });
    ASSERT_NE(it, specs.end()) << t.name;
    EXPECT_EQ(t.dtype, it->dtype) << t.name;
    EXPECT_EQ(t.shape, it->shape) << t.name;
    const std::vector<std::byte>& d = data[it - specs.begin()];
    ASSERT_EQ(t.end - t.begin, d.size());
    EXPECT_TRUE(std::equal(d.begin(), d.end(),
                           reinterpret_cast<const std::byte*>(file.data()) +
                               h->data_offset + t.begin))
        << t.name;
  }

  WriteOptions o;
  o.metadata = {{"format", "np"}};
  const std::string mine = dir_ / "mine.safetensors";
  ASSERT_TRUE(WriteSafetensors(mine, ts, o).ok());
  const std::string mine_bytes = ReadFile(mine);
  EXPECT_EQ(mine_bytes.size(), file.size());
  EXPECT_TRUE(mine_bytes == file)
      << "reference header: " << file.substr(8, h->header_size)
      << "\nwriter header:    " << mine_bytes.substr(8, h->header_size);
  // The reference reads the writer's file.
  EXPECT_EQ(Python("verify", mine), 0);
}

}  // namespace
}  // namespace weightlift::internal
