#pragma once
// CUDA kernels and cuBLAS calls for every layer op, loss and optimizer. Plain C++ declarations
// (includable from .cpp files); the definitions are in kernels.cu.
//
// Every pointer argument is a DEVICE pointer, with its shape in a comment; all tensors are
// row-major and images NCHW. Every call is queued on `stream` (cuBLAS calls on the handle's
// stream) and returns without waiting; launch errors are thrown as CudaError at once.
// Parameter-gradient outputs accumulate (+=) like the CPU layers; everything else overwrites.
#include <cstdint>

#include "backends/cuda/device.hpp"
#include "backends/cuda/ops_math.hpp"
#include "backends/cuda/ops_math_layers.hpp"

namespace syncopate::cuda {

using math::ConvGeometry;
using math::PoolGeometry;

enum class Trans { kNo, kYes };

// Row-major c (m,n) = alpha * op(a) (m,k) * op(b) (k,n) + beta * c, where op(a) = a^T when
// trans_a == kYes (a is then stored (k,m)), and likewise for b (stored (n,k) when transposed).
void gemm(cublasHandle_t handle, Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, const float* b, float beta, float* c);

// ---- dense: y = x w^T + b; w is (out, in), b is (out) ------------------------------------
// x (batch, in), y (batch, out)
void dense_forward(cublasHandle_t handle, const float* x, const float* w, const float* b, float* y,
                   int64_t batch, int64_t in, int64_t out, cudaStream_t stream);
// dw (out, in) += dy^T x; db (out) += column sums of dy; dx (batch, in) = dy w unless null.
// ones: at least `batch` ones (see fill).
void dense_backward(cublasHandle_t handle, const float* x, const float* w, const float* dy,
                    float* dw, float* db, float* dx, const float* ones, int64_t batch, int64_t in,
                    int64_t out);

// ---- convolution via im2col + GEMM; w is (oc, c, k, k), b is (oc) -------------------------
// col: (c*k*k, n*oh*ow) scratch.
void im2col(const float* x, float* col, const ConvGeometry& g, cudaStream_t stream);
void col2im(const float* dcol, float* dx, const ConvGeometry& g, cudaStream_t stream);
// x (n, c, h, w), y (n, oc, oh, ow); col (c*k*k, n*oh*ow) and scratch (oc * n*oh*ow) are
// scratch space.
void conv2d_forward(cublasHandle_t handle, const float* x, const float* w, const float* b, float* y,
                    float* col, float* scratch, const ConvGeometry& g, int64_t oc,
                    cudaStream_t stream);
// dw += dL/dw, db += dL/db, dx = dL/dx unless null; col and scratch as above (col is
// recomputed from x); ones: at least n*oh*ow ones.
void conv2d_backward(cublasHandle_t handle, const float* x, const float* w, const float* dy,
                     float* dw, float* db, float* dx, float* col, float* scratch, const float* ones,
                     const ConvGeometry& g, int64_t oc, cudaStream_t stream);

// ---- pooling ----------------------------------------------------------------------------
// x (n, c, h, w), y and argmax (n, c, oh, ow); argmax holds the winner's index in its plane.
void maxpool_forward(const float* x, float* y, int32_t* argmax, const PoolGeometry& g,
                     cudaStream_t stream);
void maxpool_backward(const float* dy, const int32_t* argmax, float* dx, const PoolGeometry& g,
                      cudaStream_t stream);
void avgpool_forward(const float* x, float* y, const PoolGeometry& g, cudaStream_t stream);
void avgpool_backward(const float* dy, float* dx, const PoolGeometry& g, cudaStream_t stream);
// x (planes, hw) -> y (planes)
void global_avgpool_forward(const float* x, float* y, int64_t planes, int64_t hw,
                            cudaStream_t stream);
void global_avgpool_backward(const float* dy, float* dx, int64_t planes, int64_t hw,
                             cudaStream_t stream);

// ---- elementwise ------------------------------------------------------------------------
// y (outer, channels, inner) += b (channels)
void bias_add(float* y, const float* b, int64_t outer, int64_t channels, int64_t inner,
              cudaStream_t stream);
void relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream);
void relu_backward(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t stream);
// (a, b, inner) -> (b, a, inner)
void swap_axes01(const float* in, float* out, int64_t a, int64_t b, int64_t inner,
                 cudaStream_t stream);
// Inverted dropout with the CPU Dropout layer's mask, bit for bit (math::dropout_stream):
// mask (n) receives 0 or 1 / (1 - rate), y = x * mask.
void dropout_forward(const float* x, float* y, float* mask, const math::PhiloxStream& stream_key,
                     float rate, int64_t n, cudaStream_t stream);
// out = a * b elementwise (dropout backward: dx = dy * mask).
void multiply(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
void fill(float* x, float value, int64_t n, cudaStream_t stream);
// y += alpha x
void axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream);
// x *= alpha
void scale(float alpha, float* x, int64_t n, cudaStream_t stream);

// ---- collectives: one schedule step's reduction and kAvg's division --------------------
// dst (n) = dst (op) src elementwise, exactly as core's apply_action (math::collective_*_at);
// max selects the commutative max, otherwise addition (sum, avg).
void collective_reduce(float* dst, const float* src, int64_t n, bool max, cudaStream_t stream);
// x (n) /= divisor, correctly rounded (IEEE division, as core's finish()).
void divide(float* x, float divisor, int64_t n, cudaStream_t stream);

// ---- collectives in a 16-bit wire format (core/comm/compression.hpp) -----------------------
// Rounded with core's own converters (core/comm/wire_bits.hpp): the host's bits. `bf16`
// selects bfloat16, else IEEE binary16.
// x (n) = round(x / divisor) (divisor 1: rounded only), as core's prepare().
void wire_prepare(float* x, float divisor, int64_t n, bool bf16, cudaStream_t stream);
// out (n) = x encoded; exact, x being representable (rounded by wire_prepare or a reduction).
void wire_encode(const float* x, uint16_t* out, int64_t n, bool bf16, cudaStream_t stream);
enum class WireAction { kCopy, kAdd, kMax };
// dst (n) = decode(src), round(dst + decode(src)) or the commutative max of the two: core's
// apply_action in the format.
void wire_apply(float* dst, const uint16_t* src, int64_t n, WireAction action, bool bf16,
                cudaStream_t stream);

// ---- losses: per-row / per-element terms; the caller sums them (in double, on the host) ----
// logits, dlogits (batch, classes); labels (batch) class indices stored as floats (checked
// by the caller); loss and correct (batch). dlogits is the gradient of the MEAN loss.
void softmax_xent(const float* logits, const float* labels, float* dlogits, float* loss,
                  float* correct, int64_t batch, int64_t classes, cudaStream_t stream);
// y, target, dy, loss (n): loss = (y - t)^2 per element, dy the gradient of the mean.
void mse(const float* y, const float* target, float* dy, float* loss, int64_t n,
         cudaStream_t stream);

// ---- optimizers: one step over n parameters, PyTorch semantics (as core/optim/optim.cpp) -------
struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};
enum class AdamVariant { kAdam, kAdamW };
struct AdamOptions {
  float lr = 1e-3f;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  AdamVariant variant = AdamVariant::kAdam;
};
// momentum_buffer (n) starts at zero; unused (may be null) when momentum == 0.
void sgd_step(float* params, const float* grads, float* momentum_buffer, int64_t n,
              const SgdOptions& options, cudaStream_t stream);
// The scalars of step `step` (from 1), formed in double as torch.optim does.
math::AdamScalars adam_scalars(const AdamOptions& options, int64_t step);
// m, v (n) start at zero; step counts from 1.
void adam_step(float* params, const float* grads, float* m, float* v, int64_t n,
               const AdamOptions& options, int64_t step, cudaStream_t stream);

// ---- smooth activations, normalisations, embedding (kernels_layers.cu) -----------------
enum class Activation { kSigmoid, kTanh, kGelu };
// y (n) = f(x); dx (n) = dy * f'(x) (sigmoid and tanh read the forward output y, GELU x).
void activation_forward(Activation f, const float* x, float* y, int64_t n, cudaStream_t stream);
void activation_backward(Activation f, const float* x, const float* y, const float* dy, float* dx,
                         int64_t n, cudaStream_t stream);
// LayerNorm (centre) or RMSNorm over rows of `features`: x, y (rows, features); params gamma
// then beta (LayerNorm); stats (rows, 2) receives each row's (mean, inv) for backward.
void norm_forward(const float* x, const float* params, float* y, float* stats, int64_t rows,
                  int64_t features, bool centre, cudaStream_t stream);
// grads (gamma, beta) += the parameter gradients; dx = the input gradient unless null.
void norm_backward(const float* x, const float* params, const float* stats, const float* dy,
                   float* grads, float* dx, int64_t rows, int64_t features, bool centre,
                   cudaStream_t stream);
// ids (tokens) are token ids stored as floats, checked by the caller; y (tokens, width).
void embedding_forward(const float* ids, const float* params, float* y,
                       const math::EmbeddingGeometry& g, cudaStream_t stream);
// grads (vocabulary + positions, width) += the scatter-add of dy (tokens, width), done as a
// gather over (offsets, rows) (math::token_rows): no atomics, the same bits every run.
void embedding_backward(const float* dy, const int32_t* offsets, const int32_t* rows, float* grads,
                        const math::EmbeddingGeometry& g, cudaStream_t stream);
// out (n) = a + b (a residual block's sum).
void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);

}  // namespace syncopate::cuda
