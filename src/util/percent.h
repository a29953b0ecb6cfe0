// Formatting a fraction for reports: 0.973 -> "97%".
#pragma once

#include <cmath>
#include <string>

namespace weightlift::internal {

inline std::string Percent(double fraction) {
  return std::to_string(static_cast<int>(std::lround(fraction * 100))) + "%";
}

}  // namespace weightlift::internal
