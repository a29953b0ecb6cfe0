// Runs a test's body in a forked child and reports how it ended, so that a
// test can assert what an object inherited across fork() does there
// (util/fork_epoch.h) without the child's hang hanging the suite.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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

// Forks; the child runs BODY and leaves with its return value through
// _exit (no atexit handlers, no gtest teardown: the parent's state is not
// the child's to tear down). The parent waits at most TIMEOUT and returns
// "exit N", "signal N", or "hung" (the child was killed after TIMEOUT),
// or "fork failed".
inline std::string RunForked(const std::function<int()>& body,
                             std::chrono::seconds timeout) {
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
