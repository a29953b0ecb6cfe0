#include "tp_flags.h"

#include <CLI/CLI.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

namespace weightlift::cli {

void AddTpFlags(CLI::App* app, TpFlags* flags) {
  app->add_option("--tp-size", flags->size,
                  "tensor parallelism: number of ranks (load one rank's "
                  "parts)");
  app->add_option("--tp-rank", flags->rank,
                  "tensor parallelism: this rank, 0 .. tp-size - 1");
  app->add_option("--tp-plan", flags->plan_path,
                  "JSON object of glob pattern -> colwise|rowwise|replicate "
                  "(first match wins; unmatched tensors are replicated)");
}

StatusOr<TensorParallel> MakeTensorParallel(const TpFlags& flags) {
  if (flags.size == TpFlags::kNotGiven || flags.rank == TpFlags::kNotGiven) {
    return Status::InvalidArgument(
        std::string(flags.size == TpFlags::kNotGiven ? "--tp-size"
                                                     : "--tp-rank") +
        " is required with --tp-size / --tp-rank / --tp-plan");
  }
  TensorParallel tp;
  tp.size = flags.size;
  tp.rank = flags.rank;
  if (!flags.plan_path.empty()) {
    std::ifstream in(flags.plan_path, std::ios::binary);
    if (!in) {
      return Status::NotFound("--tp-plan " + flags.plan_path + ": cannot open");
    }
    std::string text(kMaxTpPlanBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxTpPlanBytes) {
      return Status::InvalidArgument(
          "--tp-plan " + flags.plan_path + ": longer than " +
          std::to_string(kMaxTpPlanBytes) + " bytes (a plan is a few lines)");
    }
    // First match wins, so the order of the keys is the plan: an ordered
    // object, and a repeated key (which would silently replace the first)
    // refused.
    std::string repeated;
    std::vector<std::set<std::string>> keys;  // per open object
    auto no_repeats = [&](int, nlohmann::ordered_json::parse_event_t event,
                          nlohmann::ordered_json& value) {
      using Event = nlohmann::ordered_json::parse_event_t;
      if (event == Event::object_start) keys.emplace_back();
      if (event == Event::object_end && !keys.empty()) keys.pop_back();
      if (event == Event::key && !keys.empty() && repeated.empty() &&
          !keys.back().insert(value.get<std::string>()).second) {
        repeated = value.get<std::string>();
      }
      return true;
    };
    nlohmann::ordered_json plan = nlohmann::ordered_json::parse(
        text, no_repeats, /*allow_exceptions=*/false);
    if (!repeated.empty()) {
      return Status::InvalidArgument("--tp-plan " + flags.plan_path +
                                     ": pattern '" + repeated +
                                     "' appears twice (first match wins, so "
                                     "say which one you mean)");
    }
    if (plan.is_object() && plan.contains("tp_plan") &&
        plan["tp_plan"].is_object()) {
      plan = plan["tp_plan"];
    }
    if (plan.is_discarded() || !plan.is_object()) {
      return Status::InvalidArgument(
          "--tp-plan " + flags.plan_path +
          ": expected a JSON object of pattern -> colwise|rowwise|replicate");
    }
    for (const auto& [pattern, word] : plan.items()) {
      if (!word.is_string()) {
        return Status::InvalidArgument("--tp-plan " + flags.plan_path +
                                       ": the value of '" + pattern +
                                       "' is not a string");
      }
      StatusOr<ShardStyle> style = ParseShardStyle(word.get<std::string>());
      if (!style.ok()) {
        return Status::InvalidArgument("--tp-plan " + flags.plan_path + ": " +
                                       style.status().message() +
                                       " for pattern '" + pattern + "'");
      }
      tp.plan.push_back({pattern, *style});
    }
  }
  WL_RETURN_IF_ERROR(tp.Validate());
  return tp;
}

StatusOr<std::vector<TensorRequest>> TpRequests(const Checkpoint& ckpt,
                                                const TensorParallel& tp,
                                                std::string* summary) {
  WL_ASSIGN_OR_RETURN(ShardedTensors sharded, ShardTensors(ckpt.tensors(), tp));
  if (summary) {
    *summary = "tensor parallel: rank " + std::to_string(tp.rank) + " of " +
               std::to_string(tp.size) + ": " +
               std::to_string(sharded.split_bytes) +
               " bytes of split tensors, " +
               std::to_string(sharded.replicated_bytes) + " replicated";
    for (const std::string& w : sharded.warnings) *summary += "\nwarning: " + w;
  }
  return ShardRequests(ckpt.tensors(), sharded);
}

}  // namespace weightlift::cli
