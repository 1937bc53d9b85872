// CUDA kernels: each is a grid-stride loop over output elements that calls the per-element
// math of ops_math.hpp (tested on the CPU), plus cuBLAS SGEMM for the matrix products.
#include <algorithm>
#include <cmath>

#include "backends/cuda/kernel_launch.cuh"
#include "backends/cuda/kernels.hpp"
#include "core/base/check.hpp"
#include "core/comm/wire_bits.hpp"

namespace syncopate::cuda {
namespace {

__global__ void bias_add_kernel(float* y, const float* b, int64_t channels, int64_t inner,
                                int64_t n) {
  SYNC_GRID_LOOP(i, n) { y[i] = math::bias_add_at(y, b, channels, inner, i); }
}

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  SYNC_GRID_LOOP(i, n) { y[i] = math::relu_at(x, i); }
}

__global__ void relu_backward_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  SYNC_GRID_LOOP(i, n) { dx[i] = math::relu_backward_at(x, dy, i); }
}

__global__ void swap_axes01_kernel(const float* in, float* out, int64_t a, int64_t b, int64_t inner,
                                   int64_t n) {
  SYNC_GRID_LOOP(i, n) { out[i] = math::swap_axes01_at(in, a, b, inner, i); }
}

__global__ void dropout_kernel(const float* x, float* y, float* mask, math::PhiloxStream key,
                               uint32_t threshold, float scale, int64_t n) {
  SYNC_GRID_LOOP(i, n) {
    const float m = math::dropout_mask_at(key, threshold, scale, i);
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void multiply_kernel(const float* a, const float* b, float* out, int64_t n) {
  SYNC_GRID_LOOP(i, n) { out[i] = a[i] * b[i]; }
}

__global__ void fill_kernel(float* x, float value, int64_t n) {
  SYNC_GRID_LOOP(i, n) { x[i] = value; }
}

__global__ void axpy_kernel(float alpha, const float* x, float* y, int64_t n) {
  SYNC_GRID_LOOP(i, n) { y[i] += alpha * x[i]; }
}

__global__ void scale_kernel(float alpha, float* x, int64_t n) {
  SYNC_GRID_LOOP(i, n) { x[i] *= alpha; }
}

__global__ void collective_add_kernel(float* dst, const float* src, int64_t n) {
  SYNC_GRID_LOOP(i, n) { dst[i] = math::collective_add_at(dst, src, i); }
}

__global__ void collective_max_kernel(float* dst, const float* src, int64_t n) {
  SYNC_GRID_LOOP(i, n) { dst[i] = math::collective_max_at(dst, src, i); }
}

// __fdiv_rn: IEEE round-to-nearest whatever -prec-div says.
__global__ void divide_kernel(float* x, float divisor, int64_t n) {
  SYNC_GRID_LOOP(i, n) { x[i] = __fdiv_rn(x[i], divisor); }
}

__global__ void wire_prepare_kernel(float* x, float divisor, int64_t n, bool bf16) {
  SYNC_GRID_LOOP(i, n) {
    const float v = divisor != 1.0f ? __fdiv_rn(x[i], divisor) : x[i];
    x[i] = wire_bits::decode16(wire_bits::encode16(v, bf16), bf16);
  }
}

__global__ void wire_encode_kernel(const float* x, uint16_t* out, int64_t n, bool bf16) {
  SYNC_GRID_LOOP(i, n) { out[i] = wire_bits::encode16(x[i], bf16); }
}

// The sum in fp32 (__fadd_rn: never contracted into anything), then rounded to the format.
__global__ void wire_apply_kernel(float* dst, const uint16_t* src, int64_t n, WireAction action,
                                  bool bf16) {
  SYNC_GRID_LOOP(i, n) {
    const float v = wire_bits::decode16(src[i], bf16);
    if (action == WireAction::kCopy) {
      dst[i] = v;
    } else if (action == WireAction::kAdd) {
      dst[i] = wire_bits::decode16(wire_bits::encode16(__fadd_rn(dst[i], v), bf16), bf16);
    } else {
      dst[i] = math::collective_max(dst[i], v);
    }
  }
}

__global__ void im2col_kernel(const float* x, float* col, ConvGeometry g, int64_t n) {
  SYNC_GRID_LOOP(i, n) { col[i] = math::im2col_at(x, g, i); }
}

__global__ void col2im_kernel(const float* dcol, float* dx, ConvGeometry g, int64_t n) {
  SYNC_GRID_LOOP(i, n) { dx[i] = math::col2im_at(dcol, g, i); }
}

__global__ void maxpool_kernel(const float* x, float* y, int32_t* argmax, PoolGeometry g,
                               int64_t n) {
  SYNC_GRID_LOOP(i, n) { y[i] = math::maxpool_at(x, g, i, argmax); }
}

__global__ void maxpool_backward_kernel(const float* dy, const int32_t* argmax, float* dx,
                                        PoolGeometry g, int64_t n) {
  SYNC_GRID_LOOP(i, n) { dx[i] = math::maxpool_backward_at(dy, argmax, g, i); }
}

__global__ void avgpool_kernel(const float* x, float* y, PoolGeometry g, int64_t n) {
  SYNC_GRID_LOOP(i, n) { y[i] = math::avgpool_at(x, g, i); }
}

__global__ void avgpool_backward_kernel(const float* dy, float* dx, PoolGeometry g, int64_t n) {
  SYNC_GRID_LOOP(i, n) { dx[i] = math::avgpool_backward_at(dy, g, i); }
}

__global__ void global_avgpool_kernel(const float* x, float* y, int64_t hw, int64_t n) {
  SYNC_GRID_LOOP(i, n) { y[i] = math::global_avgpool_at(x, hw, i); }
}

__global__ void global_avgpool_backward_kernel(const float* dy, float* dx, int64_t hw, int64_t n) {
  SYNC_GRID_LOOP(i, n) { dx[i] = math::global_avgpool_backward_at(dy, hw, i); }
}

__global__ void softmax_xent_kernel(const float* logits, const float* labels, float* dlogits,
                                    float* loss, float* correct, int64_t classes, float grad_scale,
                                    int64_t batch) {
  SYNC_GRID_LOOP(row, batch) {
    math::softmax_xent_row(logits, labels, classes, grad_scale, row, dlogits, loss, correct);
  }
}

__global__ void mse_kernel(const float* y, const float* target, float* dy, float* loss,
                           float grad_scale, int64_t n) {
  SYNC_GRID_LOOP(i, n) { math::mse_at(y, target, grad_scale, i, dy, loss); }
}

__global__ void sgd_kernel(float* p, const float* g, float* buf, float lr, float momentum,
                           float weight_decay, bool nesterov, int64_t n) {
  SYNC_GRID_LOOP(i, n) { math::sgd_at(p, g, buf, lr, momentum, weight_decay, nesterov, i); }
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, math::AdamScalars a,
                            int64_t n) {
  SYNC_GRID_LOOP(i, n) { math::adam_at(p, g, m, v, a, i); }
}

// The layer functions mix cuBLAS calls (on the handle's stream) with kernels on `stream`:
// they are ordered only if both are the same stream.
void check_same_stream(cublasHandle_t handle, cudaStream_t stream) {
  cudaStream_t handle_stream = nullptr;
  SYNC_CUBLAS_CHECK(cublasGetStream(handle, &handle_stream));
  SYNC_CHECK(handle_stream == stream, "the cuBLAS handle runs on another stream");
}

int to_int(int64_t value) {
  SYNC_CHECK(value >= 0 && value <= INT32_MAX, "cuBLAS dimension out of int range: " << value);
  return static_cast<int>(value);
}

}  // namespace

void gemm(cublasHandle_t handle, Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  const math::ColumnMajorGemm g =
      math::row_major_gemm(trans_a == Trans::kYes, trans_b == Trans::kYes, m, n, k);
  SYNC_CUBLAS_CHECK(cublasSgemm(handle, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                                g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, to_int(g.m),
                                to_int(g.n), to_int(g.k), &alpha, b, to_int(g.ld_first), a,
                                to_int(g.ld_second), &beta, c, to_int(g.ldc)));
}

void dense_forward(cublasHandle_t handle, const float* x, const float* w, const float* b, float* y,
                   int64_t batch, int64_t in, int64_t out, cudaStream_t stream) {
  check_same_stream(handle, stream);
  gemm(handle, Trans::kNo, Trans::kYes, batch, out, in, 1.0f, x, w, 0.0f, y);  // x w^T
  bias_add(y, b, batch, out, 1, stream);
}

void dense_backward(cublasHandle_t handle, const float* x, const float* w, const float* dy,
                    float* dw, float* db, float* dx, const float* ones, int64_t batch, int64_t in,
                    int64_t out) {
  gemm(handle, Trans::kYes, Trans::kNo, out, in, batch, 1.0f, dy, x, 1.0f, dw);   // dy^T x
  gemm(handle, Trans::kNo, Trans::kNo, 1, out, batch, 1.0f, ones, dy, 1.0f, db);  // 1^T dy
  if (dx != nullptr) {
    gemm(handle, Trans::kNo, Trans::kNo, batch, in, out, 1.0f, dy, w, 0.0f, dx);  // dy w
  }
}

void im2col(const float* x, float* col, const ConvGeometry& g, cudaStream_t stream) {
  const int64_t n = g.c * g.k * g.k * g.n * g.oh * g.ow;
  SYNC_LAUNCH(im2col_kernel, n, stream, x, col, g, n);
}

void col2im(const float* dcol, float* dx, const ConvGeometry& g, cudaStream_t stream) {
  const int64_t n = g.n * g.c * g.h * g.w;
  SYNC_LAUNCH(col2im_kernel, n, stream, dcol, dx, g, n);
}

void conv2d_forward(cublasHandle_t handle, const float* x, const float* w, const float* b, float* y,
                    float* col, float* scratch, const ConvGeometry& g, int64_t oc,
                    cudaStream_t stream) {
  check_same_stream(handle, stream);
  const int64_t ckk = g.c * g.k * g.k, plane = g.oh * g.ow, cols = g.n * plane;
  im2col(x, col, g, stream);
  // scratch (oc, n*plane) = w (oc, ckk) col (ckk, n*plane)
  gemm(handle, Trans::kNo, Trans::kNo, oc, cols, ckk, 1.0f, w, col, 0.0f, scratch);
  swap_axes01(scratch, y, oc, g.n, plane, stream);  // (oc, n, plane) -> (n, oc, plane)
  bias_add(y, b, g.n, oc, plane, stream);
}

void conv2d_backward(cublasHandle_t handle, const float* x, const float* w, const float* dy,
                     float* dw, float* db, float* dx, float* col, float* scratch, const float* ones,
                     const ConvGeometry& g, int64_t oc, cudaStream_t stream) {
  check_same_stream(handle, stream);
  const int64_t ckk = g.c * g.k * g.k, plane = g.oh * g.ow, cols = g.n * plane;
  swap_axes01(dy, scratch, g.n, oc, plane, stream);  // (n, oc, plane) -> (oc, n, plane)
  im2col(x, col, g, stream);
  // dw (oc, ckk) += scratch (oc, cols) col^T (cols, ckk); db (oc) += scratch 1
  gemm(handle, Trans::kNo, Trans::kYes, oc, ckk, cols, 1.0f, scratch, col, 1.0f, dw);
  gemm(handle, Trans::kNo, Trans::kNo, oc, 1, cols, 1.0f, scratch, ones, 1.0f, db);
  if (dx != nullptr) {
    // col (ckk, cols) = w^T (ckk, oc) scratch (oc, cols); col is free again after dw.
    gemm(handle, Trans::kYes, Trans::kNo, ckk, cols, oc, 1.0f, w, scratch, 0.0f, col);
    col2im(col, dx, g, stream);
  }
}

void maxpool_forward(const float* x, float* y, int32_t* argmax, const PoolGeometry& g,
                     cudaStream_t stream) {
  const int64_t n = g.n * g.c * g.oh * g.ow;
  SYNC_LAUNCH(maxpool_kernel, n, stream, x, y, argmax, g, n);
}

void maxpool_backward(const float* dy, const int32_t* argmax, float* dx, const PoolGeometry& g,
                      cudaStream_t stream) {
  const int64_t n = g.n * g.c * g.h * g.w;
  SYNC_LAUNCH(maxpool_backward_kernel, n, stream, dy, argmax, dx, g, n);
}

void avgpool_forward(const float* x, float* y, const PoolGeometry& g, cudaStream_t stream) {
  const int64_t n = g.n * g.c * g.oh * g.ow;
  SYNC_LAUNCH(avgpool_kernel, n, stream, x, y, g, n);
}

void avgpool_backward(const float* dy, float* dx, const PoolGeometry& g, cudaStream_t stream) {
  const int64_t n = g.n * g.c * g.h * g.w;
  SYNC_LAUNCH(avgpool_backward_kernel, n, stream, dy, dx, g, n);
}

void global_avgpool_forward(const float* x, float* y, int64_t planes, int64_t hw,
                            cudaStream_t stream) {
  SYNC_LAUNCH(global_avgpool_kernel, planes, stream, x, y, hw, planes);
}

void global_avgpool_backward(const float* dy, float* dx, int64_t planes, int64_t hw,
                             cudaStream_t stream) {
  const int64_t n = planes * hw;
  SYNC_LAUNCH(global_avgpool_backward_kernel, n, stream, dy, dx, hw, n);
}

void bias_add(float* y, const float* b, int64_t outer, int64_t channels, int64_t inner,
              cudaStream_t stream) {
  const int64_t n = outer * channels * inner;
  SYNC_LAUNCH(bias_add_kernel, n, stream, y, b, channels, inner, n);
}

void relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  SYNC_LAUNCH(relu_kernel, n, stream, x, y, n);
}

void relu_backward(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  SYNC_LAUNCH(relu_backward_kernel, n, stream, x, dy, dx, n);
}

void swap_axes01(const float* in, float* out, int64_t a, int64_t b, int64_t inner,
                 cudaStream_t stream) {
  const int64_t n = a * b * inner;
  SYNC_LAUNCH(swap_axes01_kernel, n, stream, in, out, a, b, inner, n);
}

void dropout_forward(const float* x, float* y, float* mask, const math::PhiloxStream& stream_key,
                     float rate, int64_t n, cudaStream_t stream) {
  SYNC_CHECK(rate >= 0.0f && rate < 1.0f, "dropout rate " << rate);
  const float scale = 1.0f / (1.0f - rate);
  SYNC_LAUNCH(dropout_kernel, n, stream, x, y, mask, stream_key, math::dropout_threshold(rate),
              scale, n);
}

void multiply(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  SYNC_LAUNCH(multiply_kernel, n, stream, a, b, out, n);
}

void fill(float* x, float value, int64_t n, cudaStream_t stream) {
  SYNC_LAUNCH(fill_kernel, n, stream, x, value, n);
}

void axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream) {
  SYNC_LAUNCH(axpy_kernel, n, stream, alpha, x, y, n);
}

void scale(float alpha, float* x, int64_t n, cudaStream_t stream) {
  SYNC_LAUNCH(scale_kernel, n, stream, alpha, x, n);
}

void softmax_xent(const float* logits, const float* labels, float* dlogits, float* loss,
                  float* correct, int64_t batch, int64_t classes, cudaStream_t stream) {
  SYNC_CHECK(classes > 0, "classes " << classes);
  const float grad_scale = batch > 0 ? 1.0f / static_cast<float>(batch) : 0.0f;
  SYNC_LAUNCH(softmax_xent_kernel, batch, stream, logits, labels, dlogits, loss, correct, classes,
              grad_scale, batch);
}

void mse(const float* y, const float* target, float* dy, float* loss, int64_t n,
         cudaStream_t stream) {
  const float grad_scale = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;
  SYNC_LAUNCH(mse_kernel, n, stream, y, target, dy, loss, grad_scale, n);
}

void sgd_step(float* params, const float* grads, float* momentum_buffer, int64_t n,
              const SgdOptions& o, cudaStream_t stream) {
  SYNC_CHECK(o.momentum == 0.0f || momentum_buffer != nullptr, "momentum needs a buffer");
  SYNC_LAUNCH(sgd_kernel, n, stream, params, grads, momentum_buffer, o.lr, o.momentum,
              o.weight_decay, o.nesterov, n);
}

math::AdamScalars adam_scalars(const AdamOptions& o, int64_t step) {
  SYNC_CHECK(step >= 1, "Adam step counts from 1, got " << step);
  const double t = static_cast<double>(step);
  const bool decoupled = o.variant == AdamVariant::kAdamW;
  return {.beta1 = static_cast<float>(o.beta1),
          .beta2 = static_cast<float>(o.beta2),
          .c1 = static_cast<float>(1.0 - o.beta1),
          .c2 = static_cast<float>(1.0 - o.beta2),
          .eps = static_cast<float>(o.eps),
          .coupled_wd = decoupled ? 0.0f : static_cast<float>(o.weight_decay),
          .shrink = decoupled ? static_cast<float>(1.0 - o.lr * o.weight_decay) : 1.0f,
          .step_size = static_cast<float>(o.lr / (1.0 - std::pow(o.beta1, t))),
          .bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(o.beta2, t)))};
}

void adam_step(float* params, const float* grads, float* m, float* v, int64_t n,
               const AdamOptions& o, int64_t step, cudaStream_t stream) {
  SYNC_LAUNCH(adam_kernel, n, stream, params, grads, m, v, adam_scalars(o, step), n);
}

void collective_reduce(float* dst, const float* src, int64_t n, bool max, cudaStream_t stream) {
  if (max) {
    SYNC_LAUNCH(collective_max_kernel, n, stream, dst, src, n);
  } else {
    SYNC_LAUNCH(collective_add_kernel, n, stream, dst, src, n);
  }
}

void divide(float* x, float divisor, int64_t n, cudaStream_t stream) {
  SYNC_LAUNCH(divide_kernel, n, stream, x, divisor, n);
}

void wire_prepare(float* x, float divisor, int64_t n, bool bf16, cudaStream_t stream) {
  SYNC_LAUNCH(wire_prepare_kernel, n, stream, x, divisor, n, bf16);
}

void wire_encode(const float* x, uint16_t* out, int64_t n, bool bf16, cudaStream_t stream) {
  SYNC_LAUNCH(wire_encode_kernel, n, stream, x, out, n, bf16);
}

void wire_apply(float* dst, const uint16_t* src, int64_t n, WireAction action, bool bf16,
                cudaStream_t stream) {
  SYNC_LAUNCH(wire_apply_kernel, n, stream, dst, src, n, action, bf16);
}

}  // namespace syncopate::cuda
