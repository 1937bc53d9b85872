// The Trainer with model.device = "cuda": the same scenario trains on the device and on the
// host to the same numbers (up to float rounding), through every strategy hook, and the test
// set evaluates on the device as on the host.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/cuda_accelerator.hpp"
#include "core/comm/local_backend.hpp"
#include "core/train/evaluate.hpp"
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

// The test set's forward passes on the device give the host's loss and accuracy, over a set
// that ends in a partial batch of the evaluation's 250.
TEST_F(CudaTrainer, TestSetEvaluationOnTheDeviceMatchesTheHost) {
  for (const char* model_name : {"mlp", "cnn"}) {
    const Scenario s = parse_scenario(
        default_scenario_text(), "<test>",
        serial_defaults({"data.dataset=synthetic", "data.train_samples=64", "data.test_samples=300",
                         std::string("model.name=") + model_name}));
    const TrainData data = prepare_data(s, false);
    const std::unique_ptr<Model> model = make_model(s.model.spec());
    model->init(s.seed);
    const std::unique_ptr<Accelerator> accelerator = make_cuda_accelerator(*model);
    const LossChoice loss{s.loss, s.huber_delta};
    const Evaluation host = evaluate(*model, *data.test, loss);
    const Evaluation device = evaluate(*model, *data.test, loss, accelerator.get());
    EXPECT_GT(host.loss, 0.0) << model_name;
    EXPECT_NEAR(device.loss, host.loss, 1e-5 * host.loss) << model_name;
    EXPECT_EQ(device.accuracy, host.accuracy) << model_name;
  }
}

}  // namespace
}  // namespace syncopate::cuda
