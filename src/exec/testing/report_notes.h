// Tests: looking for a note in a load report.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace weightlift::internal::testing {

// True when one note of NOTES contains every one of PARTS.
inline bool AnyNoteHas(const std::vector<std::string>& notes,
                       std::initializer_list<std::string_view> parts) {
  for (const std::string& n : notes) {
    bool all = true;
    for (std::string_view p : parts) all = all && n.find(p) != n.npos;
    if (all) return true;
  }
  return false;
}

}  // namespace weightlift::internal::testing
