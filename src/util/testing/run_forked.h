// Runs a test's body in a forked child and reports how it ended, so that a
// test can assert what an object inherited across fork() does there
// (util/fork_epoch.h) without the child's hang hanging the suite.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

namespace weightlift::internal::testing {

// ThreadSanitizer does not model fork() of a threaded process: it kills a
// child that starts a thread ("starting new threads after multi-threaded
// fork is not supported"), and reports a parent's thread that had finished
// but was not joined as leaked when the child exits. Tests run less of
// their child under it.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kUnderThreadSanitizer = true;
#else
inline constexpr bool kUnderThreadSanitizer = false;
#endif
#else
inline constexpr bool kUnderThreadSanitizer = false;
#endif

// AddressSanitizer's allocator as gcc 12 ships it does not take its locks
// across fork(), as glibc's malloc does: a parent thread inside malloc or
// free (a quarantine recycle holds a size class's lock for long) when the
// process forks leaves that lock held for good in the child, whose next
// allocation of that class then waits forever. A test forking while a
// load's workers ran hung that way in 13 of 500 runs; forking once they all
// slept, in none of 500, 200 of them beside two busy loops (session 27).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

// Whether every thread of this process but the caller is asleep (state S
// in /proc/self/task/TID/stat) right now.
inline bool OtherThreadsAsleep() {
  const long self = syscall(SYS_gettid);
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return false;
  bool asleep = true;
  while (dirent* e = readdir(tasks)) {
    if (e->d_name[0] == '.' || std::atol(e->d_name) == self) continue;
    const std::string path =
        std::string("/proc/self/task/") + e->d_name + "/stat";
    FILE* f = std::fopen(path.c_str(), "r");
    if (!f) continue;  // the thread has ended
    char line[512] = {};
    const bool read = std::fgets(line, sizeof line, f) != nullptr;
    std::fclose(f);
    // "TID (COMM) STATE ...": COMM may hold spaces and parentheses.
    const char* close = read ? std::strrchr(line, ')') : nullptr;
    if (!close || close[1] != ' ' || close[2] != 'S') asleep = false;
  }
  closedir(tasks);
  return asleep;
}

// Waits at most TIMEOUT until every other thread has been asleep in five
// samples 2 ms apart, so that none is inside the allocator when the caller
// forks (RunForked does, under ASan). false if they did not settle.
inline bool WaitUntilOtherThreadsSleep(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int settled = 0;
  while (settled < 5) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    settled = OtherThreadsAsleep() ? settled + 1 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// Forks; the child runs BODY and leaves with its return value through
// _exit (no atexit handlers, no gtest teardown: the parent's state is not
// the child's to tear down). The parent waits at most TIMEOUT and returns
// "exit N", "signal N", or "hung" (the child was killed after TIMEOUT),
// or "fork failed". Under ASan it forks only once every other thread of
// the process sleeps (the hazard above), or returns "not forked: ..." when
// they do not within TIMEOUT: the test's threads still run and wait (a
// load held in a callback), just not inside the allocator.
inline std::string RunForked(const std::function<int()>& body,
                             std::chrono::seconds timeout) {
  if (kUnderAddressSanitizer && !WaitUntilOtherThreadsSleep(timeout)) {
    return "not forked: the other threads never all slept";
  }
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) _exit(body());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return "hung";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

}  // namespace weightlift::internal::testing
