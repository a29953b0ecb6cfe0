#include "nccl_id_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace weightlift::cli {
namespace {

using Clock = std::chrono::steady_clock;

// What SIGTERM / SIGINT remove while rank 0's file lives (one at a time:
// the command has one group). A fixed buffer: the handler may only make
// async-signal-safe calls.
char g_signal_path[4096];
struct sigaction g_old_term, g_old_int;

void RemoveAndRaise(int sig) {
  ::unlink(g_signal_path);
  ::sigaction(sig, sig == SIGTERM ? &g_old_term : &g_old_int, nullptr);
  ::raise(sig);
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// The seconds since ST's file was last modified (negative: in this
// clock's future, as a file server's clock may be).
double AgeSeconds(const struct stat& st) {
  const auto mtime = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) +
          std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  return std::chrono::duration<double>(std::chrono::system_clock::now() - mtime)
      .count();
}

// The id in PATH if this launch's live rank 0 wrote it. The text and the
// owner and age come from one open file (rank 0 may rename a new one over
// the path meanwhile: an earlier run's text must not pass on the new
// file's age).
StatusOr<NcclId> ReadId(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("not there yet");
  struct stat st;
  char buf[1024];
  ssize_t got = 0;
  if (::fstat(fd, &st) == 0) got = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (got <= 0) return Status::NotFound("empty or unreadable");
  std::istringstream in(std::string(buf, static_cast<size_t>(got)));
  std::string hex, launch;
  std::getline(in, hex);
  std::getline(in, launch);
  if (!hex.empty() && hex.back() == '\r') hex.pop_back();
  WL_ASSIGN_OR_RETURN(NcclId id, NcclIdFromHex(hex));
  if (launch != LaunchToken()) {
    return Status::InvalidArgument("it is launch '" + launch +
                                   "''s (an earlier run's?), this is '" +
                                   LaunchToken() + "'");
  }
  if (st.st_uid != ::geteuid()) {
    // Whoever wrote it would receive this rank's weights: only our own.
    return Status::InvalidArgument(
        "it belongs to uid " + std::to_string(st.st_uid) +
        ", not to this user (uid " + std::to_string(::geteuid()) + ")");
  }
  const double age = AgeSeconds(st);
  if (age > kIdFileStaleSeconds) {
    char text[96];
    std::snprintf(text, sizeof text,
                  "it was last touched %.0f s ago (a live rank 0 touches it "
                  "every second)",
                  age);
    return Status::InvalidArgument(
        std::string(text) +
        ": an earlier run's rank 0 left it; remove it, or give each run a "
        "fresh --nccl-id path");
  }
  return id;
}

}  // namespace

std::string LaunchToken() {
  return "run " + Env("TORCHELASTIC_RUN_ID") + " restart " +
         Env("TORCHELASTIC_RESTART_COUNT");
}

NcclIdFile::NcclIdFile(std::string path) : path_(std::move(path)) {}

StatusOr<std::unique_ptr<NcclIdFile>> NcclIdFile::Write(const std::string& path,
                                                        const NcclId& id) {
  if (path.size() >= sizeof g_signal_path) {
    return Status::InvalidArgument("--nccl-id " + path + ": path too long");
  }
  // Made first: from here a SIGTERM removes PATH, whatever is there (a
  // stale id too), and a failure below does when FILE goes.
  std::unique_ptr<NcclIdFile> file(new NcclIdFile(path));
  std::memcpy(g_signal_path, path.c_str(), path.size() + 1);
  struct sigaction sa {};
  sa.sa_handler = RemoveAndRaise;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &g_old_term);
  ::sigaction(SIGINT, &sa, &g_old_int);

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    // Readable by this user only: the id lets whoever holds it join. (A
    // leftover of that name could carry another mode: made anew.)
    const std::string text = NcclIdToHex(id) + "\n" + LaunchToken() + "\n";
    ::unlink(tmp.c_str());
    const int fd =
        ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int err = fd >= 0 ? 0 : errno;
    if (err == 0 && ::write(fd, text.data(), text.size()) !=
                        static_cast<ssize_t>(text.size())) {
      err = errno != 0 ? errno : EIO;
    }
    if (fd >= 0 && ::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return Status::IoError("--nccl-id " + path + ": cannot write " + tmp +
                             ": " + std::strerror(err));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status::IoError("--nccl-id " + path + ": rename from " + tmp + ": " +
                           ec.message());
  }
  file->toucher_ = std::thread([f = file.get()] { f->KeepFresh(); });
  return file;
}

void NcclIdFile::KeepFresh() {
  std::unique_lock<std::mutex> lock(mu_);
  while (
      !cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) {
    ::utimensat(AT_FDCWD, path_.c_str(), nullptr, 0);  // now
  }
}

NcclIdFile::~NcclIdFile() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (toucher_.joinable()) toucher_.join();
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaction(SIGINT, &g_old_int, nullptr);
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

StatusOr<NcclId> WaitForNcclIdFile(const std::string& path, int rank,
                                   double timeout_s) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_s));
  Status last;
  while (true) {
    StatusOr<NcclId> id = ReadId(path);
    if (id.ok()) return id;
    last = id.status();
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  char waited[32];
  std::snprintf(waited, sizeof waited, "%g", timeout_s);
  return Status::IoError(
      "rank " + std::to_string(rank) + ": no NCCL id in --nccl-id " + path +
      " after " + waited + " s (is rank 0 running with the same --nccl-id?)" +
      (last.code() == StatusCode::kNotFound ? "" : "; " + last.ToString()));
}

}  // namespace weightlift::cli
