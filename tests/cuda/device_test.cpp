// The host-side helpers of backends/cuda/device.hpp on a device: page-locking host memory.
#include <gtest/gtest.h>

#include <vector>

#include "backends/cuda/cuda_accelerator.hpp"
#include "core/nn/model.hpp"
#include "tests/cuda/cuda_test_util.hpp"

namespace syncopate::cuda {
namespace {

using CudaPageLock = CudaTest;

// Whether the driver knows `host` as page-locked memory.
bool registered(const void* host) {
  unsigned flags = 0;
  const bool known = cudaHostGetFlags(&flags, const_cast<void*>(host)) == cudaSuccess;
  static_cast<void>(cudaGetLastError());
  return known;
}

TEST_F(CudaPageLock, LocksForItsLifetimeAndCopiesStillMatch) {
  std::vector<float> host(100'003);  // not a whole number of pages
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f;
  {
    const PageLock lock(host.data(), host.size() * sizeof(float));
    ASSERT_TRUE(lock.locked());
    EXPECT_TRUE(registered(host.data()));
    EXPECT_TRUE(registered(host.data() + host.size() - 1));
    EXPECT_EQ(download(upload(host)), host);
  }
  EXPECT_FALSE(registered(host.data()));
}

TEST_F(CudaPageLock, ASecondLockOfTheSameMemoryStaysPageableAndLeavesNoError) {
  std::vector<float> host(4096);
  const PageLock first(host.data(), host.size() * sizeof(float));
  ASSERT_TRUE(first.locked());
  const PageLock second(host.data(), host.size() * sizeof(float));
  EXPECT_FALSE(second.locked());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  const PageLock empty(nullptr, 0);
  EXPECT_FALSE(empty.locked());
}

// The accelerator locks the CPU model's parameters and gradients, the buffers the trainer passes
// it every step, and lets go of them with its end.
TEST_F(CudaPageLock, TheAcceleratorLocksTheModelsParametersAndGradients) {
  const std::unique_ptr<Model> model = make_model("mlp");
  {
    const std::unique_ptr<Accelerator> accelerator = make_cuda_accelerator(*model);
    EXPECT_TRUE(registered(model->params().data()));
    EXPECT_TRUE(registered(model->grads().data()));
  }
  EXPECT_FALSE(registered(model->params().data()));
  EXPECT_FALSE(registered(model->grads().data()));
}

}  // namespace
}  // namespace syncopate::cuda
