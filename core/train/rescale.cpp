// Resuming at another worker count: the strategies that allow it and the carried-over state.
#include "core/train/rescale.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/base/check.hpp"
#include "core/train/run_files.hpp"

namespace syncopate {
namespace {

// Why a strategy does not resume at another worker count ("" where it does).
std::string why_not_resizable(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kEpochSync:
    case StrategyKind::kEpochAsync:
    case StrategyKind::kLocalSgd:
      return "";
    case StrategyKind::kSerial:
      return "serial runs one worker";
    case StrategyKind::kDdp:
      return "ddp averages gradients over a global batch of workers x batch_size samples, so at "
             "another worker count it trains with another batch and learning-rate relation";
    case StrategyKind::kHierarchical:
      return "hierarchical's groups are the workers of each node, and its gradient steps a "
             "node's batch";
    case StrategyKind::kDiloco:
      return "diloco's outer state (global model and outer momentum per fragment) is not "
             "re-dealt";
    case StrategyKind::kZero:
      return "zero shards its optimizer state over the workers (it would need re-sharding)";
  }
  SYNC_CHECK(false, "unknown strategy " << static_cast<int>(kind));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// The checkpoint with the latest clock: for epoch_async the one after the last merge.
const WorkerCheckpoint& latest_of(const std::vector<WorkerCheckpoint>& set) {
  const WorkerCheckpoint* latest = &set.front();
  for (const WorkerCheckpoint& c : set)
    if (c.clock.at(0) > latest->clock.at(0)) latest = &c;
  return *latest;
}

// Worker 0's report with the epochs of the workers that are gone (from set[first_gone] on).
std::string report_with_gone_workers(const std::vector<WorkerCheckpoint>& set, size_t first_gone) {
  WorkerReport report = deserialize_report(set.front().report);
  for (size_t w = first_gone; w < set.size(); ++w) {
    const WorkerReport gone = deserialize_report(set[w].report);
    report.epochs.insert(report.epochs.end(), gone.epochs.begin(), gone.epochs.end());
  }
  return serialize_report(report);
}

WorkerReport empty_report(int worker) {
  WorkerReport report;
  report.worker = worker;
  return report;
}

}  // namespace

void check_resizable(const Scenario& s, int from) {
  if (from == s.workers) return;
  const std::string what = s.source + ": workers: resuming checkpoints of " + std::to_string(from) +
                           " worker(s) at " + std::to_string(s.workers);
  if (const std::string why = why_not_resizable(s.strategy.kind); !why.empty())
    throw UserError(what + " is possible for epoch_sync, epoch_async and local_sgd only: " + why);
  if (s.data.partition != DataPartition::kIid)
    throw UserError(what + " needs data.partition = \"iid\": data.partition = \"" +
                    std::string(to_string(s.data.partition)) +
                    "\" draws each worker's own samples for the worker count");
}

std::vector<float> mean_of(const std::vector<const std::vector<float>*>& values) {
  SYNC_CHECK(!values.empty(), "no values to average");
  const std::vector<float>& first = *values.front();
  bool equal = true;
  for (const auto* v : values) {
    SYNC_CHECK(v->size() == first.size(), v->size() << " vs " << first.size());
    equal = equal && same_bits(*v, first);
  }
  if (equal) return first;
  std::vector<float> mean(first.size());
  const auto n = static_cast<double>(values.size());
  for (size_t i = 0; i < mean.size(); ++i) {
    double sum = 0;
    for (const auto* v : values) sum += static_cast<double>((*v)[i]);
    mean[i] = static_cast<float>(sum / n);
  }
  return mean;
}

std::vector<float> resized_params(const std::vector<WorkerCheckpoint>& set, const Scenario& s) {
  if (s.strategy.kind == StrategyKind::kEpochAsync) return latest_of(set).params;
  std::vector<const std::vector<float>*> replicas;
  for (const WorkerCheckpoint& c : set) replicas.push_back(&c.params);
  return mean_of(replicas);
}

WorkerCheckpoint resized_checkpoint(const std::vector<WorkerCheckpoint>& set, const Scenario& s,
                                    int worker) {
  check_resizable(s, static_cast<int>(set.size()));
  const WorkerCheckpoint& first = set.front();
  if (first.next_step != 0)
    throw UserError(s.source +
                    ": workers: resuming at another worker count needs a checkpoint at "
                    "an epoch boundary; the latest one is inside epoch " +
                    std::to_string(first.next_epoch) + " (after step " +
                    std::to_string(first.next_step) + "): resume it at " +
                    std::to_string(set.size()) + " workers first");
  WorkerCheckpoint c;
  c.worker = worker;
  c.workers = s.workers;
  c.next_epoch = first.next_epoch;
  c.global_step = first.global_step;
  std::vector<const std::vector<float>*> states;
  for (const WorkerCheckpoint& w : set) {
    c.optimizer_steps = std::max(c.optimizer_steps, w.optimizer_steps);
    states.push_back(&w.optimizer_state);
  }
  c.optimizer_state = mean_of(states);
  c.params = resized_params(set, s);
  c.clock = latest_of(set).clock;
  const auto w = static_cast<size_t>(worker);
  if (w < set.size()) c.phases = set[w].phases;
  if (worker == 0)
    c.report = report_with_gone_workers(set, static_cast<size_t>(s.workers));
  else if (w < set.size())
    c.report = set[w].report;
  else
    c.report = serialize_report(empty_report(worker));
  c.resizes = first.resizes;
  c.resizes.push_back(
      {.from = static_cast<int>(set.size()), .to = s.workers, .at_epoch = first.next_epoch});
  return c;
}

}  // namespace syncopate
