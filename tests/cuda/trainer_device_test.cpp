// The Trainer with model.device = "cuda": the same scenario trains on the device and on the
// host to the same numbers (up to float rounding), through every strategy hook.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/cuda_accelerator.hpp"
#include "core/comm/local_backend.hpp"
#include "core/train/trainer.hpp"
#include "tests/common/serial_defaults.hpp"
#include "tests/cuda/cuda_test_util.hpp"

namespace syncopate::cuda {
namespace {

class CudaTrainer : public CudaTest {};

TEST_F(CudaTrainer, DeviceTrainingMatchesHostTraining) {
  for (const char* model : {"mlp", "cnn"}) {
    const Scenario s = parse_scenario(
        default_scenario_text(), "<test>",
        serial_defaults({"data.dataset=synthetic", "data.train_samples=256", "data.test_samples=64",
                         "epochs=2", "batch_size=32", "schedule.lr=0.01",
                         std::string("model.name=") + model, "strategy.name=ddp"}));
    const TrainData data = prepare_data(s, false);
    LocalCommunicator comm;
    WallClockExecutor exec;
    const WorkerReport host = train_worker(s, data, comm, exec);
    const WorkerReport device =
        train_worker(s, data, comm, exec, [](const Model& m) { return make_cuda_accelerator(m); });
    ASSERT_EQ(device.final_params.size(), host.final_params.size());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < host.final_params.size(); ++i) {
      const double d = device.final_params[i] - host.final_params[i];
      diff += d * d;
      norm += static_cast<double>(host.final_params[i]) * host.final_params[i];
    }
    EXPECT_LT(std::sqrt(diff / norm), 1e-4) << model;
    for (size_t e = 0; e < host.epochs.size(); ++e)
      EXPECT_NEAR(device.epochs[e].train_loss, host.epochs[e].train_loss,
                  1e-4 * std::abs(host.epochs[e].train_loss))
          << model << " epoch " << e;
  }
}

}  // namespace
}  // namespace syncopate::cuda
