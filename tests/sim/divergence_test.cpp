// A diverging loss on the simulator stops the run with a UserError naming the worker, the epoch
// and the step.
#include <gtest/gtest.h>

#include <regex>

#include "backends/sim/sim_backend.hpp"
#include "core/train/trainer.hpp"
#include "tests/common/serial_defaults.hpp"
#include "tests/sim/sim_test_util.hpp"

namespace syncopate {
namespace {

std::string diverge(const std::vector<std::string>& extra) {
  std::vector<std::string> sets = {"data.dataset=synthetic", "data.train_samples=512",
                                   "data.test_samples=64",   "data.normalize=false",
                                   "schedule.lr=1000",       "schedule.kind=constant",
                                   "batch_size=16",          "workers=2",
                                   "sim.platform=mn5-acc",   "sim.platform_params.nodes=1",
                                   "sim.fidelity=flow",      "strategy.name=epoch_sync"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  const Scenario s = parse_scenario(default_scenario_text(), "<test>", serial_defaults(sets));
  return sim::testing::run_in_child([&] {
           sim::SimOptions options;
           options.platform = s.sim.platform;
           options.platform_overrides = s.sim.platform_params;
           options.workers = s.workers;
           options.fidelity = sim::Fidelity::kFlow;
           options.slowdown = s.sim.slowdown;
           const TrainData data = prepare_data(s, false);
           sim::run_simulation(options, [&](Communicator& comm, Executor& exec) {
             train_worker(s, data, comm, exec);
           });
           return std::string("completed");
         })
      .output;
}

// Both workers diverge at step 3 of their own blocks. (Compute time is charged lazily, at the
// next communication, so the first to throw is the first actor SimGrid runs, not the first in
// simulated time.)
TEST(SimDivergence, NamesTheWorkerItsEpochAndStep) {
  const std::string output = diverge({});
  const std::regex named(
      "UserError: worker ([01]), epoch 0, step ([0-9]+): the training loss is -?(nan|inf); "
      "stopping");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(output, match, named)) << output;
  EXPECT_LT(std::stoi(match[2].str()), 512 / 2 / 16) << output;  // within the worker's epoch
}

}  // namespace
}  // namespace syncopate
