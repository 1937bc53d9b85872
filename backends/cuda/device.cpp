// CUDA devices, streams, events and device buffers (RAII over the runtime API).
#include "backends/cuda/device.hpp"

#include <sstream>

namespace syncopate::cuda {

namespace detail {

void throw_cuda_error(const char* file, int line, const char* expr, cudaError_t error) {
  std::ostringstream message;
  message << file << ":" << line << ": " << expr << ": " << cudaGetErrorName(error) << ": "
          << cudaGetErrorString(error);
  throw CudaError(message.str());
}

void throw_cublas_error(const char* file, int line, const char* expr, cublasStatus_t status) {
  std::ostringstream message;
  message << file << ":" << line << ": " << expr << ": " << cublasGetStatusName(status) << ": "
          << cublasGetStatusString(status);
  throw CudaError(message.str());
}

void* device_malloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* pointer = nullptr;
  SYNC_CUDA_CHECK(cudaMalloc(&pointer, bytes));
  return pointer;
}

void device_free(void* pointer) noexcept {
  // cudaFree can only fail for an invalid pointer or a dead context (e.g. at process exit
  // after a fatal kernel error); a destructor has nobody to report that to.
  if (pointer != nullptr) static_cast<void>(cudaFree(pointer));
}

void copy_bytes(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                cudaStream_t stream) {
  if (bytes == 0) return;
  if (stream == nullptr) {
    SYNC_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
  } else {
    SYNC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
  }
}

}  // namespace detail

int device_count() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  static_cast<void>(cudaGetLastError());  // clear the error of a machine without a driver
  return error == cudaSuccess ? count : 0;
}

bool cuda_available() { return device_count() > 0; }

void synchronize() { SYNC_CUDA_CHECK(cudaDeviceSynchronize()); }

void copy_to_device(std::span<const float> host, float* device, cudaStream_t stream) {
  detail::copy_bytes(device, host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream);
}

void copy_to_host(const float* device, std::span<float> host, cudaStream_t stream) {
  detail::copy_bytes(host.data(), device, host.size_bytes(), cudaMemcpyDeviceToHost, stream);
}

PageLock::PageLock(const void* host, size_t bytes) {
  if (host == nullptr || bytes == 0) return;
  void* region = const_cast<void*>(host);  // registering reads nothing and writes nothing
  if (cudaHostRegister(region, bytes, cudaHostRegisterDefault) == cudaSuccess) {
    host_ = region;
  } else {
    static_cast<void>(cudaGetLastError());  // not sticky: clear it for the next call's check
  }
}

PageLock::~PageLock() {
  if (host_ != nullptr) static_cast<void>(cudaHostUnregister(host_));
}

void copy_device_to_device(const float* src, float* dst, size_t count, cudaStream_t stream) {
  detail::copy_bytes(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, stream);
}

void zero(float* device, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  SYNC_CUDA_CHECK(cudaMemsetAsync(device, 0, count * sizeof(float), stream));
}

Stream::Stream() { SYNC_CUDA_CHECK(cudaStreamCreate(&stream_)); }

Stream::~Stream() {
  if (stream_ != nullptr) static_cast<void>(cudaStreamDestroy(stream_));
}

void Stream::synchronize() const { SYNC_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

CublasHandle::CublasHandle(cudaStream_t stream, MathMode mode) {
  SYNC_CUBLAS_CHECK(cublasCreate(&handle_));
  try {
    SYNC_CUBLAS_CHECK(cublasSetStream(handle_, stream));
    SYNC_CUBLAS_CHECK(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
    SYNC_CUBLAS_CHECK(cublasSetMathMode(
        handle_, mode == MathMode::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  } catch (...) {
    static_cast<void>(cublasDestroy(handle_));
    throw;
  }
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) static_cast<void>(cublasDestroy(handle_));
}

}  // namespace syncopate::cuda
