#include "util/phase_marks.h"

#include <gtest/gtest.h>

#include <chrono>

namespace weightlift::internal {
namespace {

TEST(PhaseMarksTest, PhasesAreTheGapsBetweenMarksInOrder) {
  const Clock::time_point t0 = Clock::now();
  PhaseMarks marks(t0);
  marks.End("opening", t0 + std::chrono::microseconds(1500));
  marks.End("running", t0 + std::chrono::microseconds(41500));
  marks.End("ending", t0 + std::chrono::microseconds(41520));
  EXPECT_EQ(marks.Note("loader phases"),
            "loader phases: opening 1.50 ms, running 40.00 ms, ending 0.02 ms");
}

TEST(PhaseMarksTest, NoPhasesIsAHeadingAlone) {
  EXPECT_EQ(PhaseMarks(Clock::now()).Note("loader phases"), "loader phases: ");
}

}  // namespace
}  // namespace weightlift::internal
