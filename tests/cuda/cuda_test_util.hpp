#pragma once
// Shared helpers of the device tests: a fixture that skips without a device, uploads and
// downloads of whole buffers, and a model with every layer kind.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backends/cuda/device.hpp"
#include "core/nn/model_spec.hpp"

namespace syncopate::cuda {

// Every device test derives from this: SetUp skips the test (GTEST_SKIP) when no CUDA device
// is present, before the test body or any CUDA call runs.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    stream_ = std::make_unique<Stream>();
    cublas_ = std::make_unique<CublasHandle>(stream_->get());
  }
  cudaStream_t stream() const { return stream_->get(); }
  cublasHandle_t cublas() const { return cublas_->get(); }

  DeviceBuffer<float> upload(const std::vector<float>& host) const {
    DeviceBuffer<float> device(host.size());
    copy_to_device(std::span<const float>(host), device, stream());
    stream_->synchronize();
    return device;
  }
  template <typename T>
  std::vector<T> download(const DeviceBuffer<T>& device) const {
    stream_->synchronize();
    std::vector<T> host(device.size());
    copy_to_host(device, std::span<T>(host), stream());
    stream_->synchronize();
    return host;
  }
  std::vector<float> download(const float* device, size_t count) const {
    stream_->synchronize();
    std::vector<float> host(count);
    copy_to_host(device, std::span<float>(host), stream());
    stream_->synchronize();
    return host;
  }

 private:
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<CublasHandle> cublas_;
};

// Covers every layer kind, overlapping pooling windows, strided and padded convolutions.
inline ModelSpec mixed_spec() {
  return {"mixed",
          {1, 16, 16},
          {conv2d_spec(1, 4, 3, 1, 1), relu_spec(), maxpool2d_spec(3, 2), avgpool2d_spec(2, 1),
           dropout_spec(0.5f), conv2d_spec(4, 8, 3, 2, 0), relu_spec(), global_avgpool_spec(),
           dense_spec(8, 10)}};
}

}  // namespace syncopate::cuda
