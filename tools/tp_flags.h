// `weightlift load --tp-size N --tp-rank R [--tp-plan plan.json]`: load
// only rank R's parts (include/weightlift/tensor_parallel.h) and report the
// bytes read and the rate for that rank.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/report.h"
#include "weightlift/request.h"
#include "weightlift/status.h"
#include "weightlift/tensor_parallel.h"

namespace CLI {
class App;
}

namespace weightlift::cli {

struct TpFlags {
  // A value no flag can mean, so that "--tp-size 0" is a range error and
  // not a missing flag.
  static constexpr int kNotGiven = std::numeric_limits<int>::min();
  int size = kNotGiven;
  int rank = kNotGiven;
  std::string plan_path;  // JSON object: glob pattern -> colwise|rowwise|...
  bool requested() const {
    return size != kNotGiven || rank != kNotGiven || !plan_path.empty();
  }
};

// The largest plan file read (a plan is a few lines; /dev/zero must not be
// read forever).
inline constexpr size_t kMaxTpPlanBytes = 1u << 20;

void AddTpFlags(CLI::App* app, TpFlags* flags);

// The flags as a TensorParallel: InvalidArgument when --tp-size or
// --tp-rank is missing or out of range, or plan.json is not an object of
// pattern -> word (NotFound when it does not exist).
StatusOr<TensorParallel> MakeTensorParallel(const TpFlags& flags);

// Rank TP.rank's parts of CKPT as the request of Loader::LoadSlices
// (replicated tensors whole). SUMMARY gets the rank's split and replicated
// bytes and the plan's warnings, for the report.
StatusOr<std::vector<TensorRequest>> TpRequests(const Checkpoint& ckpt,
                                                const TensorParallel& tp,
                                                std::string* summary);

}  // namespace weightlift::cli
