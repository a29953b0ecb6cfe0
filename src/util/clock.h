// The one clock weightlift times phases with.
#pragma once

#include <chrono>

namespace weightlift::internal {

using Clock = std::chrono::steady_clock;

// D in seconds.
inline double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Seconds from T to now.
inline double SecondsSince(Clock::time_point t) {
  return Seconds(Clock::now() - t);
}

}  // namespace weightlift::internal
