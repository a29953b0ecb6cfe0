#include "env/fault_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "env/io_util.h"

namespace weightlift::internal {

int64_t FaultInjector::Decide(uint64_t off, uint64_t n) {
  const uint64_t call = calls_.fetch_add(1) + 1;
  if (spec_.eintr_every > 0 &&
      call % static_cast<uint64_t>(spec_.eintr_every) == 0) {
    eintr_.fetch_add(1);
    return -EINTR;
  }
  if (spec_.eio_offset != FaultSpec::kNever && off <= spec_.eio_offset &&
      spec_.eio_offset - off < n) {
    return -EIO;
  }
  uint64_t allowed = n;
  if (spec_.truncate_at != FaultSpec::kNever) {
    allowed = off >= spec_.truncate_at
                  ? 0
                  : std::min<uint64_t>(allowed, spec_.truncate_at - off);
  }
  if (spec_.max_bytes_per_call > 0 && allowed > spec_.max_bytes_per_call) {
    allowed = spec_.max_bytes_per_call;
    short_.fetch_add(1);
  }
  return static_cast<int64_t>(allowed);
}

ssize_t FaultInjector::Pread(int fd, void* buf, size_t n, off_t off) {
  const int64_t allowed = Decide(static_cast<uint64_t>(off), n);
  if (allowed < 0) {
    errno = static_cast<int>(-allowed);
    return -1;
  }
  if (allowed == 0) return 0;
  // Read the full request (an O_DIRECT fd needs the aligned length), then
  // report only ALLOWED bytes, as a short read would.
  ssize_t r = ::pread(fd, buf, n, off);
  if (r < 0) return r;
  return std::min<ssize_t>(r, allowed);
}

int64_t FaultInjector::FilterResult(uint64_t off, uint64_t n, int64_t real) {
  const int64_t allowed = Decide(off, n);
  if (allowed < 0) return allowed;
  if (real < 0) return real;
  return std::min(real, allowed);
}

int FaultInjector::FilterSubmit(int real) {
  const uint64_t call = submits_.fetch_add(1) + 1;
  if (spec_.submit_error_call > 0 &&
      call == static_cast<uint64_t>(spec_.submit_error_call)) {
    return -spec_.submit_errno;
  }
  return real;
}

Status FaultInjectingFile::ReadAt(uint64_t offset, std::span<std::byte> dst) {
  const uint64_t n = reads_.fetch_add(1);
  if (faults_.before_read) faults_.before_read(n);
  const uint64_t len = dst.size();
  if (n == faults_.fail_read_number ||
      (faults_.eio_offset != FileFaults::kNever &&
       offset <= faults_.eio_offset && faults_.eio_offset - offset < len)) {
    return Status::IoErrorFromErrno(
        "read failed (injected): " + DescribeRange(path(), offset, len), EIO);
  }
  if (faults_.truncate_at != FileFaults::kNever &&
      offset + len > faults_.truncate_at) {
    return Status::IoError("file ended early (truncated?, injected): " +
                           DescribeRange(path(), offset, len));
  }
  return inner().ReadAt(offset, dst);
}

StatusOr<std::unique_ptr<File>> FaultInjectingFile::Reopen(
    Backend backend, const IoOptions& options) const {
  WL_ASSIGN_OR_RETURN(std::unique_ptr<File> inner,
                      inner().Reopen(backend, options));
  return std::unique_ptr<File>(
      new FaultInjectingFile(std::move(inner), faults_));
}

StatusOr<std::unique_ptr<File>> ReopenWithFaults(const File& f, Backend backend,
                                                 const FaultSpec& spec) {
  IoOptions io;
  io.faults = std::make_shared<FaultInjector>(spec);
  return f.Reopen(backend, io);
}

std::function<std::unique_ptr<File>(std::unique_ptr<File>, uint32_t)>
ReopeningWithFaults(Backend backend, const FaultSpec& spec,
                    std::string* error) {
  return [backend, spec, error](std::unique_ptr<File> f,
                                uint32_t) -> std::unique_ptr<File> {
    StatusOr<std::unique_ptr<File>> g = ReopenWithFaults(*f, backend, spec);
    if (!g.ok()) {
      if (error->empty()) *error = g.status().ToString();
      return f;
    }
    return std::move(g).value();
  };
}

}  // namespace weightlift::internal
