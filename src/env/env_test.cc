// The Env and what every File offers beyond reads: identity, Stat, Reopen
// through another backend, Map; the scheme registry; writable files. On real
// files in a temporary directory (a real disk, so O_DIRECT runs for real).
#include "env/env.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "env/cold_file.h"
#include "env/fault_file.h"
#include "env/mapped_rows_file.h"
#include "env/memory_file.h"
#include "env/testing/temp_dir.h"

namespace weightlift::internal {
namespace {

using testing::RandomBytes;
using testing::ReadFileOrDie;
using testing::TempDir;
using testing::WriteFileOrDie;

constexpr Backend kAllBackends[] = {Backend::kPread, Backend::kDirect,
                                    Backend::kUring, Backend::kMmap};

// Opens PATH with BACKEND; skips the caller when this build or kernel has
// no io_uring (the only backend that may be missing here).
StatusOr<std::unique_ptr<File>> Open(const std::string& path, Backend backend) {
  return Env::Default()->OpenForRead(path, backend);
}

bool Unavailable(const Status& s) {
  return s.code() == StatusCode::kUnsupported;
}

std::vector<std::byte> ReadAll(File& f) {
  // Room for the direct backends' rounded tail, aligned for O_DIRECT.
  const size_t room = (f.size() + 8191) / 4096 * 4096;
  std::unique_ptr<std::byte[], void (*)(void*)> buf(
      static_cast<std::byte*>(std::aligned_alloc(4096, room)), std::free);
  Status s = f.ReadAt(0, std::span<std::byte>(buf.get(), f.size()));
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::vector<std::byte>(buf.get(), buf.get() + f.size());
}

TEST(EnvTest, OpenForReadRecordsTheFilesIdentity) {
  TempDir dir;
  const std::string p = dir.File("a");
  WriteFileOrDie(p, RandomBytes(10000, 1));
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  for (Backend b : kAllBackends) {
    auto f = Open(p, b);
    if (!f.ok() && Unavailable(f.status())) continue;
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const FileIdentity& id = (*f)->identity();
    EXPECT_EQ(id.device, static_cast<uint64_t>(st.st_dev));
    EXPECT_EQ(id.inode, static_cast<uint64_t>(st.st_ino));
    EXPECT_EQ(id.size, 10000u);
    EXPECT_EQ((*f)->size(), 10000u);
    EXPECT_EQ(id.mtime_ns,
              st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec);
    EXPECT_GE((*f)->native_fd(), 0);
    EXPECT_EQ((*f)->backend_name(), BackendName(b));
    EXPECT_TRUE(CheckUnchanged(**f).ok());
  }
}

TEST(EnvTest, OpenErrorsSayWhatAndWhere) {
  TempDir dir;
  auto missing = Open(dir.File("nope"), Backend::kPread);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir.File("nope")),
            std::string::npos);
  auto directory = Open(dir.path(), Backend::kPread);
  EXPECT_EQ(directory.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(directory.status().message().find("not a regular file"),
            std::string::npos);
}

// Backend is one enum for the loader and the storage layer; auto is the
// loader's to resolve, so opening or reopening a file with it is refused,
// naming the file, rather than silently picking a backend.
TEST(EnvTest, AutoIsNotABackendAFileIsReadThrough) {
  TempDir dir;
  const std::string p = dir.File("a");
  WriteFileOrDie(p, RandomBytes(100, 1));
  auto f = Open(p, Backend::kAuto);
  ASSERT_EQ(f.status().code(), StatusCode::kInvalidArgument)
      << f.status().ToString();
  EXPECT_NE(f.status().message().find(p), std::string::npos);
  EXPECT_NE(f.status().message().find("auto"), std::string::npos);
  auto g = Open(p, Backend::kPread);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto r = (*g)->Reopen(Backend::kAuto, {});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument)
      << r.status().ToString();
}

TEST(EnvTest, StatListAndIsDirectory) {
  TempDir dir;
  Env* env = Env::Default();
  WriteFileOrDie(dir.File("b.safetensors"), RandomBytes(7, 1));
  WriteFileOrDie(dir.File("a.json"), RandomBytes(3, 2));
  ASSERT_EQ(::mkdir(dir.File("sub").c_str(), 0755), 0);
  auto names = env->ListDirectory(dir.path());
  ASSERT_TRUE(names.ok()) << names.status().ToString();
  EXPECT_EQ(*names,
            (std::vector<std::string>{"a.json", "b.safetensors", "sub"}));
  EXPECT_TRUE(*env->IsDirectory(dir.File("sub")));
  EXPECT_FALSE(*env->IsDirectory(dir.File("a.json")));
  auto st = env->Stat(dir.File("b.safetensors"));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->identity.size, 7u);
  EXPECT_EQ(env->Stat(dir.File("x")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(env->ListDirectory(dir.File("x")).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(env->Join(dir.path(), "a.json"), dir.File("a.json"));
  EXPECT_EQ(env->Join("d/", "x"), "d/x");
  EXPECT_EQ(env->Parent("d/e/x"), "d/e");
  EXPECT_EQ(env->Parent("x"), ".");
}

TEST(EnvTest, ReadSmallFileRefusesLargeFiles) {
  TempDir dir;
  const auto bytes = RandomBytes(100, 3);
  WriteFileOrDie(dir.File("i.json"), bytes);
  auto ok = Env::Default()->ReadSmallFile(dir.File("i.json"), 100,
                                          FormatError::kIndexTooLarge);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, bytes);
  auto big = Env::Default()->ReadSmallFile(dir.File("i.json"), 99,
                                           FormatError::kIndexTooLarge);
  EXPECT_EQ(big.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(big.status().rule(), FormatError::kIndexTooLarge);
}

// A file changed in place (new size) or replaced (renamed over) after open
// is noticed: in place by Stat, replaced by comparing the path's identity.
TEST(EnvTest, ChangesAfterOpenAreDetected) {
  TempDir dir;
  const std::string p = dir.File("a");
  WriteFileOrDie(p, RandomBytes(8192, 1));
  auto f = Open(p, Backend::kPread);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(::truncate(p.c_str(), 4096), 0);
  Status s = CheckUnchanged(**f);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("size 8192 -> 4096"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find(p), std::string::npos);

  WriteFileOrDie(dir.File("b"), RandomBytes(8192, 2));
  auto g = Open(dir.File("b"), Backend::kPread);
  ASSERT_TRUE(g.ok());
  WriteFileOrDie(dir.File("c"), RandomBytes(8192, 3));
  ASSERT_EQ(std::rename(dir.File("c").c_str(), dir.File("b").c_str()), 0);
  auto now = Env::Default()->Stat(dir.File("b"));
  ASSERT_TRUE(now.ok());
  const std::string change =
      DescribeIdentityChange((*g)->identity(), now->identity);
  EXPECT_NE(change.find("replaced by another file"), std::string::npos)
      << change;
  // The open File still reads the file it opened.
  EXPECT_TRUE(CheckUnchanged(**g).ok());
  EXPECT_EQ(ReadAll(**g), RandomBytes(8192, 2));
}

// Reopen gives a view through every backend of the very file that was
// opened, even after another file was renamed over its path.
TEST(EnvTest, ReopenReadsTheOpenedFileThroughEveryBackend) {
  TempDir dir;
  const std::string p = dir.File("a");
  const auto bytes = RandomBytes(3 * 4096 + 100, 7);
  WriteFileOrDie(p, bytes);
  for (Backend first : kAllBackends) {
    auto f = Open(p, first);
    if (!f.ok() && Unavailable(f.status())) continue;
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    WriteFileOrDie(dir.File("other"), RandomBytes(bytes.size(), 8));
    ASSERT_EQ(std::rename(dir.File("other").c_str(), p.c_str()), 0);
    for (Backend b : kAllBackends) {
      auto g = (*f)->Reopen(b, {});
      if (!g.ok() && Unavailable(g.status())) continue;
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      EXPECT_EQ((*g)->backend_name(), BackendName(b));
      EXPECT_EQ((*g)->identity(), (*f)->identity());
      EXPECT_EQ(ReadAll(**g), bytes)
          << BackendName(first) << " -> " << BackendName(b);
    }
    WriteFileOrDie(p, bytes);  // a fresh inode with the bytes again
  }
}

TEST(EnvTest, MapSharedAndPrivate) {
  TempDir dir;
  const std::string p = dir.File("a");
  const auto bytes = RandomBytes(3 * 4096 + 11, 9);
  WriteFileOrDie(p, bytes);
  auto f = Open(p, Backend::kPread);
  ASSERT_TRUE(f.ok());
  // An offset that is not page aligned maps the page below it.
  auto m = (*f)->Map(4097, 5000, MapAccess::kReadShared);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 5000u);
  EXPECT_EQ(std::memcmp(m->data(), bytes.data() + 4097, 5000), 0);
  auto w = (*f)->Map(0, bytes.size(), MapAccess::kPrivateWritable);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  w->data()[0] = ~bytes[0];  // copy-on-write: the file keeps its byte
  EXPECT_EQ(ReadFileOrDie(p), bytes);
  auto empty = (*f)->Map(0, 0, MapAccess::kReadShared);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  MemoryFile mem("m", bytes);
  EXPECT_EQ(mem.Map(0, 1, MapAccess::kReadShared).status().code(),
            StatusCode::kUnsupported);
}

TEST(MappingTest, AnonymousIsZeroedAndNamesItsPurposeOnFailure) {
  auto m = Mapping::Anonymous(10000, "test memory");
  ASSERT_TRUE(m.ok());
  EXPECT_GE(m->size(), 10000u);
  EXPECT_EQ(m->size() % 4096, 0u);
  for (uint64_t i = 0; i < m->size(); i += 512)
    EXPECT_EQ(m->data()[i], std::byte{0});
  Mapping moved = std::move(*m);
  EXPECT_TRUE(m->empty());
  EXPECT_FALSE(moved.empty());
  auto huge = Mapping::Anonymous(uint64_t{1} << 62, "test memory");
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("test memory"), std::string::npos);
  EXPECT_NE(huge.status().message().find("ENOMEM"), std::string::npos)
      << huge.status().ToString();
}

// Whether every page of [P, P + LENGTH) is mapped: mincore fails with
// ENOMEM on a range with unmapped pages.
bool Mapped(const void* p, uint64_t length) {
  std::vector<unsigned char> vec((length + 4095) / 4096);
  return ::mincore(const_cast<void*>(p), length, vec.data()) == 0;
}

TEST(MappingTest, ResetInBackgroundEmptiesNowAndUnmapsSoon) {
  TempDir dir;
  const std::string path = dir.File("f");
  const auto bytes = RandomBytes(1 << 20, 5);
  WriteFileOrDie(path, bytes);
  auto f = Open(path, Backend::kPread);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto m = (*f)->Map(0, bytes.size(), MapAccess::kReadShared);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::byte* p = m->data();
  ASSERT_EQ(std::memcmp(p, bytes.data(), bytes.size()), 0);
  ASSERT_TRUE(Mapped(p, bytes.size()));
  m->ResetInBackground();
  EXPECT_TRUE(m->empty());
  EXPECT_EQ(m->data(), nullptr);
  m->ResetInBackground();  // idempotent, like Reset
  bool unmapped = false;
  for (int i = 0; i < 2000 && !unmapped; ++i) {
    unmapped = !Mapped(p, bytes.size());
    if (!unmapped) ::usleep(1000);
  }
  EXPECT_TRUE(unmapped) << "still mapped 2 s after ResetInBackground";
}

TEST(EnvTest, WritableFileAppearsOnlyOnClose) {
  TempDir dir;
  const std::string p = dir.File("w");
  const auto a = RandomBytes(5000, 1);
  const auto b = RandomBytes(300, 2);
  {
    auto w = Env::Default()->OpenForWrite(p);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->Append(a).ok());
    ASSERT_TRUE((*w)->Append(b).ok());
    EXPECT_FALSE(std::filesystem::exists(p));
    ASSERT_TRUE((*w)->Close().ok());
  }
  std::vector<std::byte> both = a;
  both.insert(both.end(), b.begin(), b.end());
  EXPECT_EQ(ReadFileOrDie(p), both);
  {
    auto w = Env::Default()->OpenForWrite(dir.File("abandoned"));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(a).ok());
  }  // never closed: nothing appears, no temporary is left
  EXPECT_EQ(*Env::Default()->ListDirectory(dir.path()),
            std::vector<std::string>{"w"});
  auto bad = Env::Default()->OpenForWrite(dir.File("no/such/dir/x"));
  EXPECT_EQ(bad.status().code(), StatusCode::kIoError);
}

// An Env that serves a scheme from memory: what an object-storage Env
// plugs into.
class MemoryEnv final : public Env {
 public:
  StatusOr<std::unique_ptr<File>> OpenForRead(const std::string& location,
                                              Backend,
                                              const IoOptions&) override {
    return std::unique_ptr<File>(new MemoryFile(location, RandomBytes(64, 5)));
  }
  StatusOr<FileStat> Stat(const std::string&) override {
    FileStat st;
    st.identity.size = 64;
    return st;
  }
  StatusOr<std::vector<std::string>> ListDirectory(
      const std::string&) override {
    return std::vector<std::string>{"x"};
  }
  StatusOr<std::unique_ptr<WritableFile>> OpenForWrite(
      const std::string& location) override {
    return Status::Unsupported(location + ": read-only");
  }
};

TEST(EnvRegistryTest, SchemesSelectTheirEnv) {
  EXPECT_EQ(*EnvForLocation("/tmp/x.safetensors"), Env::Default());
  EXPECT_EQ(*EnvForLocation("relative/dir"), Env::Default());
  EXPECT_EQ(*EnvForLocation("odd:name"), Env::Default());
  auto none = EnvForLocation("envtest-unregistered://b/k");
  EXPECT_EQ(none.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(none.status().message().find("envtest-unregistered"),
            std::string::npos);
  int made = 0;
  RegisterEnv("envtest", [&made]() -> StatusOr<std::unique_ptr<Env>> {
    ++made;
    return std::unique_ptr<Env>(new MemoryEnv());
  });
  auto env = EnvForLocation("envtest://bucket/model.safetensors");
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_NE(*env, Env::Default());
  EXPECT_EQ(*EnvForLocation("envtest://other"), *env);  // made once
  EXPECT_EQ(made, 1);
  auto f = (*env)->OpenForRead("envtest://bucket/model.safetensors",
                               Backend::kUring);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(ReadAll(**f), RandomBytes(64, 5));
}

TEST(FaultInjectingFileTest, FaultsSurviveReopenAndHookRuns) {
  TempDir dir;
  const std::string p = dir.File("a");
  WriteFileOrDie(p, RandomBytes(8192, 1));
  auto f = Open(p, Backend::kPread);
  ASSERT_TRUE(f.ok());
  std::vector<uint64_t> seen;
  FileFaults faults;
  faults.eio_offset = 5000;
  faults.before_read = [&seen](uint64_t n) { seen.push_back(n); };
  FaultInjectingFile wrapped(std::move(*f), faults);
  auto mm = wrapped.Reopen(Backend::kMmap, {});
  ASSERT_TRUE(mm.ok());
  EXPECT_EQ((*mm)->backend_name(), "mmap");
  std::vector<std::byte> buf(4096);
  EXPECT_TRUE((*mm)->ReadAt(0, buf).ok());
  Status s = (*mm)->ReadAt(4096, buf);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("EIO"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset 4096"), std::string::npos);
  EXPECT_EQ(seen, (std::vector<uint64_t>{0, 1}));
}

// What one more read costs the slice planner (File::read_cost_bytes): 0
// where reads are page-cache copies, kDirectReadCostBytes under O_DIRECT
// (direct, uring), the same through a fault-injecting wrapper, 0 again for
// row runs copied out of a mapping.
TEST(EnvTest, ReadCostIsZeroForThePageCacheAndMoreForODirect) {
  TempDir dir;
  const std::string p = dir.File("a");
  WriteFileOrDie(p, RandomBytes(4 * 4096, 4));
  for (Backend b : kAllBackends) {
    auto f = Open(p, b);
    if (!f.ok() && Unavailable(f.status())) continue;
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const bool direct = b == Backend::kDirect || b == Backend::kUring;
    EXPECT_EQ((*f)->read_cost_bytes(), direct ? kDirectReadCostBytes : 0u)
        << BackendName(b);
    FaultInjectingFile wrapped(std::move(*f), FileFaults{});
    EXPECT_EQ(wrapped.read_cost_bytes(), direct ? kDirectReadCostBytes : 0u)
        << BackendName(b) << " wrapped";
  }
  auto buffered = Open(p, Backend::kPread);
  ASSERT_TRUE(buffered.ok());
  EXPECT_EQ(WithRowsFromMapping(std::move(*buffered))->read_cost_bytes(), 0u);
  EXPECT_EQ(MemoryFile("m", RandomBytes(8, 1)).read_cost_bytes(), 0u);
  EXPECT_EQ(MemoryFile("m", RandomBytes(8, 1), 4096).read_cost_bytes(),
            kDirectReadCostBytes);
}

// A buffered file whose pages are not resident (cold_file.h) weighs a read
// as O_DIRECT does; everything else is the file's own: its reads (bytes,
// row runs, errors past the end), path, identity, alignment and backend.
TEST(EnvTest, ColdBufferedFileWeighsReadsAndIsOtherwiseItsBase) {
  TempDir dir;
  const std::string p = dir.File("a");
  const std::vector<std::byte> bytes = RandomBytes(5 * 4096 + 7, 11);
  WriteFileOrDie(p, bytes);
  auto base = Open(p, Backend::kPread);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  const File* raw = base->get();
  const std::string path = raw->path();
  const uint64_t size = raw->size();
  std::unique_ptr<File> cold = WithColdReads(std::move(*base));
  EXPECT_EQ(cold->read_cost_bytes(), kDirectReadCostBytes);
  EXPECT_EQ(cold->path(), path);
  EXPECT_EQ(cold->size(), size);
  EXPECT_EQ(cold->alignment(), 1u);
  EXPECT_EQ(cold->backend_name(), BackendName(Backend::kPread));
  EXPECT_GE(cold->native_fd(), 0);
  std::vector<std::byte> got(100);
  ASSERT_TRUE(cold->ReadAt(4090, got).ok());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes.begin() + 4090));
  // Row runs: 3 runs of 10 bytes, 4096 apart, packed.
  std::vector<std::byte> rows(30);
  ASSERT_TRUE(cold->ReadRows(5, 4096, 10, 3, rows.data()).ok());
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(std::equal(rows.begin() + r * 10, rows.begin() + r * 10 + 10,
                           bytes.begin() + 5 + r * 4096))
        << "row " << r;
  }
  Status past = cold->ReadAt(size - 3, got);
  EXPECT_EQ(past.code(), StatusCode::kInvalidArgument) << past.ToString();
  EXPECT_NE(past.message().find(path), std::string::npos) << past.ToString();
}

// Both O_DIRECT backends take their alignment from one question
// (DirectIoAlignmentOrRefuse): what statx STATX_DIOALIGN reports for the
// file (the larger of offset and memory alignment), 4096 where the kernel
// does not say. The refusal (the kernel reporting no direct I/O for the
// file) cannot be met on this machine's ext4 or tmpfs.
TEST(EnvTest, DirectBackendsTakeTheAlignmentTheKernelReports) {
  TempDir dir;
  const std::string p = dir.File("a");
  WriteFileOrDie(p, RandomBytes(4 * 4096, 3));
  size_t want = 4096;
#ifdef STATX_DIOALIGN
  {
    const int fd = ::open(p.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    struct statx stx {};
    ASSERT_EQ(::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx), 0);
    ::close(fd);
    if ((stx.stx_mask & STATX_DIOALIGN) != 0) {
      ASSERT_GT(stx.stx_dio_offset_align, 0u) << p << ": no direct I/O";
      want = std::max(stx.stx_dio_offset_align, stx.stx_dio_mem_align);
    }
  }
#endif
  int checked = 0;
  for (Backend b : {Backend::kDirect, Backend::kUring}) {
    auto f = Open(p, b);
    if (!f.ok() && Unavailable(f.status()) && b == Backend::kUring) continue;
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ((*f)->alignment(), want) << BackendName(b);
    auto g = (*f)->Reopen(b, {});  // made again from the descriptor
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ((*g)->alignment(), want) << BackendName(b) << " reopened";
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

}  // namespace
}  // namespace weightlift::internal
