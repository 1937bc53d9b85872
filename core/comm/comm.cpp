// Names of the reduction ops and algorithms, the merge rule, the contract's shared checks.
#include "core/comm/comm.hpp"

#include <array>
#include <cmath>
#include <string>
#include <utility>

namespace syncopate {
namespace {
constexpr std::array<std::pair<ReduceOp, std::string_view>, 3> kOps{
    {{ReduceOp::kSum, "sum"}, {ReduceOp::kAvg, "avg"}, {ReduceOp::kMax, "max"}}};
constexpr std::array<std::pair<Algorithm, std::string_view>, 7> kAlgorithms{{
    {Algorithm::kAuto, "auto"},
    {Algorithm::kRing, "ring"},
    {Algorithm::kRabenseifner, "rabenseifner"},
    {Algorithm::kRecursiveDoubling, "recursive_doubling"},
    {Algorithm::kBinomialTree, "binomial_tree"},
    {Algorithm::kHierarchical, "hierarchical"},
    {Algorithm::kMaster, "master"},
}};
}  // namespace

void apply_merge_rule(const MergeRule& rule, std::span<float> global,
                      std::span<const float> local) {
  for (size_t i = 0; i < global.size(); ++i)
    global[i] = std::fma(rule.global_weight, global[i], rule.local_weight * local[i]);
}

void check_merge_size(size_t local, size_t global, const char* backend, int rank) {
  if (local != global)
    throw UserError(std::string(backend) + ": shared model merge: rank " + std::to_string(rank) +
                    " merges " + std::to_string(local) + " floats into a model of " +
                    std::to_string(global) + "; allowed: the size given to create_shared_model");
}

std::string_view to_string(ReduceOp op) {
  for (const auto& [value, name] : kOps)
    if (value == op) return name;
  return "?";
}
std::string_view to_string(Algorithm algorithm) {
  for (const auto& [value, name] : kAlgorithms)
    if (value == algorithm) return name;
  return "?";
}
std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (const auto& [value, n] : kOps)
    if (n == name) return value;
  return std::nullopt;
}
std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (const auto& [value, n] : kAlgorithms)
    if (n == name) return value;
  return std::nullopt;
}

}  // namespace syncopate
