// Where a call's time went, phase by phase: the marks a loader sets as it
// goes, and the report note they make ("loader phases: ...").
#pragma once

#include <string>
#include <vector>

#include "util/clock.h"

namespace weightlift::internal {

class PhaseMarks {
 public:
  // The phases start at START (the call's own clock: its seconds are from
  // there too, so the note's phases add up to them).
  explicit PhaseMarks(Clock::time_point start) : last_(start) {}

  // Ends the phase NAME now (a string literal: kept by pointer).
  void End(const char* name) { End(name, Clock::now()); }
  void End(const char* name, Clock::time_point at) {
    phases_.push_back({name, Seconds(at - last_)});
    last_ = at;
  }

  // "HEADING: name 0.12 ms, name 3.40 ms, ..." in the order they ended.
  std::string Note(const char* heading) const;

 private:
  struct Phase {
    const char* name;
    double seconds;
  };
  std::vector<Phase> phases_;
  Clock::time_point last_;
};

}  // namespace weightlift::internal
