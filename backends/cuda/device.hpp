#pragma once
// CUDA device basics: error checks, RAII device buffers, streams and cuBLAS handles, and
// host <-> device copies. Plain C++: includable from .cpp files compiled by the host compiler.
//
// Host staging: Debian's Open MPI is not CUDA-aware, so the MPI path copies a device buffer to
// host memory (copy_to_host), communicates there, and copies it back (copy_to_device).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/base/check.hpp"

namespace syncopate::cuda {

// A failed CUDA runtime or cuBLAS call. The message names the call's file:line and the error.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] void throw_cuda_error(const char* file, int line, const char* expr, cudaError_t error);
[[noreturn]] void throw_cublas_error(const char* file, int line, const char* expr,
                                     cublasStatus_t status);
}  // namespace detail

// The number of usable CUDA devices; 0 without a driver. Never throws.
int device_count();
// True iff at least one CUDA device can be used. Never throws (no driver -> false).
bool cuda_available();

// Blocks until every operation queued on the current device has finished.
void synchronize();

}  // namespace syncopate::cuda

// Throws CudaError("file:line: expr: cudaErrorName: description") unless expr is cudaSuccess.
#define SYNC_CUDA_CHECK(expr)                                                                   \
  do {                                                                                          \
    const cudaError_t sync_cuda_error_ = (expr);                                                \
    if (sync_cuda_error_ != cudaSuccess) [[unlikely]] {                                         \
      ::syncopate::cuda::detail::throw_cuda_error(__FILE__, __LINE__, #expr, sync_cuda_error_); \
    }                                                                                           \
  } while (false)

#define SYNC_CUBLAS_CHECK(expr)                                                \
  do {                                                                         \
    const cublasStatus_t sync_cublas_status_ = (expr);                         \
    if (sync_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {           \
      ::syncopate::cuda::detail::throw_cublas_error(__FILE__, __LINE__, #expr, \
                                                    sync_cublas_status_);      \
    }                                                                          \
  } while (false)

namespace syncopate::cuda {

namespace detail {
void* device_malloc(size_t bytes);  // nullptr for 0 bytes
void device_free(void* pointer) noexcept;
void copy_bytes(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);
}  // namespace detail

// An owning, move-only array of T in device memory (cudaMalloc / cudaFree). Contents are
// uninitialised after construction and after a growing resize.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) { resize(count); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      detail::device_free(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { detail::device_free(data_); }

  // Reallocates only when count exceeds the capacity (the contents are then lost).
  void resize(size_t count) {
    if (count > capacity_) {
      detail::device_free(std::exchange(data_, nullptr));
      capacity_ = 0;
      data_ = static_cast<T*>(detail::device_malloc(count * sizeof(T)));
      capacity_ = count;
    }
    size_ = count;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Copies host -> device / device -> host. Synchronous with respect to the host when stream is
// the default (nullptr); with a stream, call synchronize or Stream::synchronize before reading
// host data. Sizes must match the buffer's size().
template <typename T>
void copy_to_device(std::span<const T> host, DeviceBuffer<T>& device,
                    cudaStream_t stream = nullptr) {
  SYNC_CHECK(host.size() == device.size(), host.size() << " vs " << device.size());
  detail::copy_bytes(device.data(), host.data(), device.bytes(), cudaMemcpyHostToDevice, stream);
}
template <typename T>
void copy_to_host(const DeviceBuffer<T>& device, std::span<T> host, cudaStream_t stream = nullptr) {
  SYNC_CHECK(host.size() == device.size(), host.size() << " vs " << device.size());
  detail::copy_bytes(host.data(), device.data(), device.bytes(), cudaMemcpyDeviceToHost, stream);
}
// Raw-pointer forms, for slices of a buffer: `device` points at count elements on the device.
void copy_to_device(std::span<const float> host, float* device, cudaStream_t stream = nullptr);
void copy_to_host(const float* device, std::span<float> host, cudaStream_t stream = nullptr);
void copy_device_to_device(const float* src, float* dst, size_t count, cudaStream_t stream);

// Sets count floats at `device` to zero.
void zero(float* device, size_t count, cudaStream_t stream);

// A CUDA stream (created with default flags, so it also orders against the legacy default
// stream that the synchronous copies above use), destroyed with its owner.
class Stream {
 public:
  Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// Page-locks host memory that outlives it (cudaHostRegister), so that copies from and to it run
// at the link's speed instead of through the driver's staging buffer: on an H200, 0.94 MB each
// way took 191 us pageable and 48 us page-locked (README, "CUDA"). A region the driver refuses
// (already registered, or no memory to lock) stays pageable: copies still work, only slower.
class PageLock {
 public:
  PageLock(const void* host, size_t bytes);
  PageLock(const PageLock&) = delete;
  PageLock& operator=(const PageLock&) = delete;
  ~PageLock();
  bool locked() const { return host_ != nullptr; }

 private:
  void* host_ = nullptr;
};

// Whether cuBLAS may use TF32 tensor cores for SGEMM (faster, ~1e-3 relative error).
enum class MathMode { kFp32, kTf32 };

// A cuBLAS handle bound to one stream. Pointer mode is host (alpha/beta are host scalars).
class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t stream, MathMode mode = MathMode::kFp32);
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle();
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace syncopate::cuda
