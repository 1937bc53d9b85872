#pragma once
// Shared helpers of the device tests: a fixture that skips without a device, and uploads and
// downloads of whole buffers.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backends/cuda/device.hpp"

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

}  // namespace syncopate::cuda
