// `weightlift load --tp-size N --tp-rank R [--tp-plan plan.json]`: load
// only rank R's parts (include/weightlift/tensor_parallel.h) and report the
// bytes read and the rate for that rank.
#pragma once

#include <cstdint>
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
  int size = 0;           // 0: not given
  int rank = -1;          // -1: not given
  std::string plan_path;  // JSON object: glob pattern -> colwise|rowwise|...
  bool requested() const {
    return size != 0 || rank != -1 || !plan_path.empty();
  }
};

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
