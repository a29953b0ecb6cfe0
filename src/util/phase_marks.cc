#include "util/phase_marks.h"

#include <cstdio>

namespace weightlift::internal {

std::string PhaseMarks::Note(const char* heading) const {
  std::string s = heading;
  s += ": ";
  for (size_t i = 0; i < phases_.size(); ++i) {
    char ms[32];
    std::snprintf(ms, sizeof ms, " %.2f ms", phases_[i].seconds * 1e3);
    if (i > 0) s += ", ";
    s += phases_[i].name;
    s += ms;
  }
  return s;
}

}  // namespace weightlift::internal
