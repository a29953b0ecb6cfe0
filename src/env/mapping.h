// Mapping: the one owner of mmap'd memory in the library.
//
// A file's pages (File::Map) or fresh anonymous memory (Mapping::Anonymous),
// unmapped exactly once when the owner goes. Every mmap and munmap of the
// library is in mapping.cc, so a failure always names what was mapped and
// errno the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "weightlift/status.h"

namespace weightlift::internal {

class Mapping {
 public:
  Mapping() = default;
  Mapping(Mapping&& o) noexcept;
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { Reset(); }

  // New private anonymous memory of at least BYTES (rounded up to whole
  // pages), zero-filled and not touched yet. WHAT says what it is for in
  // the error: ResourceExhausted "cannot allocate N bytes of WHAT: mmap:
  // ENOMEM ...". HUGE asks for transparent huge pages (advisory).
  static StatusOr<Mapping> Anonymous(uint64_t bytes, std::string_view what,
                                     bool huge = false);

  // Maps [OFFSET, OFFSET + LENGTH) of the open descriptor FD (used by the
  // POSIX Files' Map; callers go through File::Map). WRITABLE_PRIVATE: copy-
  // on-write pages (PROT_READ|PROT_WRITE, MAP_PRIVATE); else shared
  // read-only. OFFSET need not be page aligned. PATH names the file in
  // errors; Unsupported when the file system cannot map (ENODEV).
  static StatusOr<Mapping> OfDescriptor(int fd, const std::string& path,
                                        uint64_t offset, uint64_t length,
                                        bool writable_private);

  // The first requested byte (not the page boundary below it); null when
  // empty.
  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Maps every page of [OFFSET, OFFSET + LENGTH) of data() into the page
  // tables now, reading in any that are not in the page cache
  // (MADV_POPULATE_READ, Linux 5.14+): later copies out of the range take
  // no page faults. 0 when done; else the errno: EINVAL where the kernel
  // does not know the advice (the caller falls back to reads), EFAULT when
  // a page lies past the end of the file (it shrank: touching the range
  // would raise SIGBUS), ENOMEM, EIO, EHWPOISON. EINTR is retried.
  // REQUIRES: the range lies within [0, size()).
  int PopulateRead(uint64_t offset, uint64_t length) const;

  // Advisory hints on the whole mapping; failures are ignored.
  void AdviseSequential() const;
  void AdviseWillNeed() const;

  // Unmaps now (idempotent).
  void Reset();

  // Unmaps on a thread of its own, so that the owner does not wait while
  // the kernel tears down the page tables of a large, well-populated
  // mapping (a tensor-parallel rank's row-run mapping of a Llama-2-7B
  // shard: 1.3-2.5 ms of each load on the H200, session 13 call B). The
  // range stays mapped, unused, until that thread is done; nothing else
  // is placed there meanwhile. Unmaps now when no thread can be started.
  void ResetInBackground();

 private:
  void* base_ = nullptr;  // page-aligned start of the mapping
  uint64_t length_ = 0;   // mapped bytes from base_
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace weightlift::internal
