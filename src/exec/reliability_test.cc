// Reliability of a host load under every backend (pread, O_DIRECT,
// io_uring, mmap): EIO, EINTR, short reads, a file that shrinks, is
// modified or is replaced during the load, and host memory running out.
//
// Faults are injected on real files: the fault-injecting File wraps the
// File each loader opens (any backend), or sits below a backend's retry
// loop (EINTR, short reads: the system calls of pread, O_DIRECT and
// io_uring; mmap has no system call per read, so those two cases do not
// apply to it). A shrink or a replacement is done to the real file by a
// hook the wrapper runs before the Nth read, so it lands mid-load.
//
// Each failure must: be an error (never a result), name the file, the tensor
// and an offset; leave no descriptor or mapping of the file behind once the
// loader is gone; and leave the same loader able to load again.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "env/fault_file.h"
#include "env/testing/temp_dir.h"
#include "exec/host_loader.h"
#include "exec/testing/u8_tensors.h"
#include "format/writer.h"
#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"

namespace weightlift::internal {
namespace {

using testing::RandomBytes;
using testing::ReadFileOrDie;
using testing::TempDir;

// Descriptors of this process open on PATH.
int OpenDescriptorsOf(const std::string& path) {
  const std::string real = std::filesystem::canonical(path).string();
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (const dirent* e = ::readdir(d)) {
    char target[4096];
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t len = ::readlink(link.c_str(), target, sizeof target - 1);
    if (len <= 0) continue;
    target[len] = '\0';
    if (std::string(target).rfind(real, 0) == 0) ++n;  // also "(deleted)"
  }
  ::closedir(d);
  return n;
}

// Mappings of this process of the file at PATH (by inode, so a file renamed
// away still counts).
int MappingsOf(ino_t inode) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset, dev;
    uint64_t ino = 0;
    in >> range >> perms >> offset >> dev >> ino;
    if (ino == static_cast<uint64_t>(inode)) ++n;
  }
  return n;
}

struct Case {
  Backend backend;
  const char* name;
};

class ReliabilityTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    path_ = dir_.File("model.safetensors");
    std::mt19937_64 rng(5);
    for (int i = 0; i < 12; ++i) {
      // Odd sizes, a few MiB in all: many chunks, offsets anywhere.
      data_.push_back(RandomBytes(300000 + 4097 * i, rng()));
    }
    Write(path_);
    Reopen();
  }

  void Write(const std::string& path) {
    ASSERT_TRUE(WriteSafetensors(path, testing::U8Tensors("w", data_)).ok());
  }

  void Reopen() {
    auto c = Checkpoint::Open(path_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ckpt_ = std::make_unique<Checkpoint>(std::move(*c));
  }

  LoadOptions Options() const {
    LoadOptions o;
    o.backend = GetParam().backend;
    o.chunk_bytes = 128 << 10;
    o.staging_bytes = 1 << 20;
    o.direct_min_bytes = 64 << 10;
    // mmap: one thread, so no copy is in flight while a hook truncates the
    // file (a copy racing a truncation is SIGBUS: see mmap_file.cc).
    o.threads = GetParam().backend == Backend::kMmap ? 1 : 3;
    return o;
  }

  // A loader whose files go through WRAP while *ARMED is true.
  std::unique_ptr<Loader> MakeLoader(
      std::function<std::unique_ptr<File>(std::unique_ptr<File>)> wrap) {
    auto loader = CreateHostLoader(
        Options(), [this, wrap](std::unique_ptr<File> f, uint32_t) {
          return armed_.load() ? wrap(std::move(f)) : std::move(f);
        });
    EXPECT_TRUE(loader.ok()) << loader.status().ToString();
    return loader.ok() ? std::move(*loader) : nullptr;
  }

  void ExpectBitExact(const LoadResult& r) {
    ASSERT_EQ(r.tensors.size(), data_.size());
    for (const LoadedTensor& t : r.tensors) {
      const size_t i = std::stoul(t.name.substr(1));
      ASSERT_EQ(t.size, data_[i].size()) << t.name;
      EXPECT_EQ(std::memcmp(t.data, data_[i].data(), t.size), 0) << t.name;
    }
  }

  // The failure contract: an IoError naming the file, a tensor and an
  // offset, no result; LoadInto fails the same way; then, faults off, the
  // same loader loads everything bit-exact.
  void ExpectCleanFailureThenRecovery(Loader& loader,
                                      const std::string& must_mention) {
    auto r = loader.Load(*ckpt_);
    if (!r.ok() && r.status().code() == StatusCode::kUnsupported) {
      GTEST_SKIP() << "backend unavailable here: " << r.status().ToString();
    }
    ASSERT_FALSE(r.ok()) << "a faulty load reported success";
    const std::string m = r.status().message();
    EXPECT_EQ(r.status().code(), StatusCode::kIoError) << m;
    EXPECT_NE(m.find(path_), std::string::npos) << "no file in: " << m;
    EXPECT_NE(m.find("tensor '"), std::string::npos) << "no tensor in: " << m;
    EXPECT_NE(m.find("offset "), std::string::npos) << "no offset in: " << m;
    EXPECT_NE(m.find(must_mention), std::string::npos) << m;
    armed_ = false;
    RestoreFile();
    auto again = loader.Load(*ckpt_);
    ASSERT_TRUE(again.ok())
        << "the loader did not recover: " << again.status().ToString();
    ExpectBitExact(*again);
  }

  // Puts the original bytes back at path_ (a fresh file) and reopens the
  // checkpoint, when a case changed the file.
  void RestoreFile() {
    if (!file_changed_) return;
    Write(path_);
    Reopen();
  }

  TempDir dir_;
  std::string path_;
  std::vector<std::vector<std::byte>> data_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::atomic<bool> armed_{true};
  bool file_changed_ = false;
};

TEST_P(ReliabilityTest, EioMidLoad) {
  const uint64_t bad = ckpt_->Find("w7")->offset + 12345;
  {
    auto loader = MakeLoader([bad](std::unique_ptr<File> f) {
      FileFaults ff;
      ff.eio_offset = bad;
      return std::make_unique<FaultInjectingFile>(std::move(f), ff);
    });
    ASSERT_NE(loader, nullptr);
    ExpectCleanFailureThenRecovery(*loader, "EIO");
    std::vector<std::byte> buf(ckpt_->Find("w7")->size);
    armed_ = true;
    std::vector<Destination> d = {{"w7", buf.data(), buf.size()}};
    Status s = loader->LoadInto(*ckpt_, d);
    EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
    EXPECT_NE(s.message().find("w7"), std::string::npos) << s.ToString();
  }
  // The loader is gone: only the checkpoint's own descriptor is left, and
  // no mapping of the file.
  EXPECT_EQ(OpenDescriptorsOf(path_), 1);
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(MappingsOf(st.st_ino), 0);
}

// EINTR on every 3rd system call and reads cut to 64 KiB: retried, so the
// load succeeds bit-exact (the backends' loops are what run). The backends
// that make a system call per read only: mmap copies from a mapping.
class RetryTest : public ReliabilityTest {};

TEST_P(RetryTest, EintrAndShortReadsAreRetried) {
  FaultSpec spec;
  spec.eintr_every = 3;
  spec.max_bytes_per_call = 64 << 10;
  const Backend io = GetParam().backend;  // pread, direct or uring
  std::string reopen_error;
  auto loader =
      CreateHostLoader(Options(), ReopeningWithFaults(io, spec, &reopen_error));
  ASSERT_TRUE(loader.ok());
  auto r = (*loader)->Load(*ckpt_);
  if (!r.ok() && r.status().code() == StatusCode::kUnsupported) {
    GTEST_SKIP() << "backend unavailable here: " << r.status().ToString();
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(reopen_error, "");
  ExpectBitExact(*r);
}

// The real file is truncated to half its size before the 5th read.
TEST_P(ReliabilityTest, FileShrinksDuringTheLoad) {
  const std::string path = path_;
  const uint64_t half = ckpt_->files()[0].size / 2;
  file_changed_ = true;
  auto loader = MakeLoader([path, half](std::unique_ptr<File> f) {
    FileFaults ff;
    ff.before_read = [path, half](uint64_t n) {
      if (n == 4) {
        ASSERT_EQ(::truncate(path.c_str(), half), 0);
      }
    };
    return std::make_unique<FaultInjectingFile>(std::move(f), ff);
  });
  ASSERT_NE(loader, nullptr);
  ExpectCleanFailureThenRecovery(*loader, "");
}

// Another file (same size, other bytes) is renamed over the path before the
// 5th read. The load keeps reading the file it opened, and then refuses to
// report success: the path no longer names what was loaded.
TEST_P(ReliabilityTest, FileReplacedDuringTheLoad) {
  const std::string path = path_;
  const std::string other = dir_.File("other.safetensors");
  {
    std::vector<std::byte> bytes = ReadFileOrDie(path_);
    for (size_t i = bytes.size() / 2; i < bytes.size(); ++i)
      bytes[i] = ~bytes[i];
    testing::WriteFileOrDie(other, bytes);
  }
  file_changed_ = true;
  auto loader = MakeLoader([path, other](std::unique_ptr<File> f) {
    FileFaults ff;
    ff.before_read = [path, other](uint64_t n) {
      if (n == 4) {
        ASSERT_EQ(std::rename(other.c_str(), path.c_str()), 0);
      }
    };
    return std::make_unique<FaultInjectingFile>(std::move(f), ff);
  });
  ASSERT_NE(loader, nullptr);
  ExpectCleanFailureThenRecovery(*loader, "replaced by another file");
}

// The file is rewritten in place (same size, same inode) during the load.
TEST_P(ReliabilityTest, FileModifiedDuringTheLoad) {
  const std::string path = path_;
  file_changed_ = true;
  auto loader = MakeLoader([path](std::unique_ptr<File> f) {
    FileFaults ff;
    ff.before_read = [path](uint64_t n) {
      if (n != 4) return;
      std::FILE* out = std::fopen(path.c_str(), "r+b");
      ASSERT_NE(out, nullptr);
      std::fseek(out, -10, SEEK_END);
      std::fputs("0123456789", out);
      std::fclose(out);
      // Some file systems keep a coarse mtime: make the change visible.
      struct timespec times[2] = {{0, UTIME_OMIT}, {1, 0}};
      ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
    };
    return std::make_unique<FaultInjectingFile>(std::move(f), ff);
  });
  ASSERT_NE(loader, nullptr);
  ExpectCleanFailureThenRecovery(*loader, "modified");
}

// Out of host memory, for real: a child process lowers its address-space
// limit (RLIMIT_AS) just above what it uses, so the load's destination
// cannot be mapped; the load fails cleanly; the limit is lifted and the same
// loader loads everything. The child reports through its exit status.
TEST_P(ReliabilityTest, OutOfHostMemory) {
  {  // the backend works here at all (else the child's failure means nothing)
    auto loader = CreateHostLoader(Options());
    ASSERT_TRUE(loader.ok());
    auto r = (*loader)->Load(*ckpt_);
    if (!r.ok() && r.status().code() == StatusCode::kUnsupported) {
      GTEST_SKIP() << "backend unavailable here: " << r.status().ToString();
    }
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    auto say = [&](const std::string& s) {
      (void)!::write(pipefd[1], s.data(), s.size());
    };
    // The loader is made in the child: fork copies no thread, and the
    // loader's pool threads must exist. One load first, so threads, rings
    // and the bounce buffer exist before the limit.
    // The warm-up loads one tensor only: the loader keeps freed
    // destinations for reuse, and a whole load's must be new memory.
    auto loader = CreateHostLoader(Options());
    std::vector<std::string> one = {"w0"};
    if (!loader.ok() || !(*loader)->Load(*ckpt_, one).ok()) _exit(9);
    // Virtual size now, from /proc/self/statm (pages).
    uint64_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const uint64_t vm = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    struct rlimit old;
    ::getrlimit(RLIMIT_AS, &old);
    struct rlimit low = old;
    low.rlim_cur = vm + (1 << 20);  // 1 MiB of room; the load needs ~4 MiB
    if (::setrlimit(RLIMIT_AS, &low) != 0) _exit(10);
    auto r = (*loader)->Load(*ckpt_);
    if (r.ok()) {
      say("load succeeded under the limit");
      _exit(11);
    }
    say(r.status().ToString());
    if (r.status().code() != StatusCode::kResourceExhausted) _exit(12);
    if (::setrlimit(RLIMIT_AS, &old) != 0) _exit(13);
    auto again = (*loader)->Load(*ckpt_);
    if (!again.ok()) {
      say("\nagain: " + again.status().ToString());
      _exit(14);
    }
    for (const LoadedTensor& t : again->tensors) {
      const size_t i = std::stoul(t.name.substr(1));
      if (std::memcmp(t.data, data_[i].data(), t.size) != 0) _exit(15);
    }
    _exit(0);
  }
  ::close(pipefd[1]);
  std::string said;
  char buf[512];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) {
    said.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  std::cout << "child said: " << said << "\n";
  ASSERT_TRUE(WIFEXITED(status)) << "child died: " << said;
  EXPECT_EQ(WEXITSTATUS(status), 0) << said;
  EXPECT_NE(said.find("ResourceExhausted"), std::string::npos) << said;
  EXPECT_NE(said.find("ENOMEM"), std::string::npos) << said;
}

INSTANTIATE_TEST_SUITE_P(Backends, ReliabilityTest,
                         ::testing::Values(Case{Backend::kPread, "pread"},
                                           Case{Backend::kDirect, "direct"},
                                           Case{Backend::kUring, "uring"},
                                           Case{Backend::kMmap, "mmap"}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return i.param.name;
                         });

INSTANTIATE_TEST_SUITE_P(SystemCallBackends, RetryTest,
                         ::testing::Values(Case{Backend::kPread, "pread"},
                                           Case{Backend::kDirect, "direct"},
                                           Case{Backend::kUring, "uring"}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return i.param.name;
                         });

}  // namespace
}  // namespace weightlift::internal
