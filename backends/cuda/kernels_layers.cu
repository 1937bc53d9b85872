// CUDA kernels of the smooth activations, LayerNorm/RMSNorm, the embedding and the residual
// sum: grid-stride loops over the per-element math of ops_math_layers.hpp (tested on the CPU).
#include "backends/cuda/kernel_launch.cuh"
#include "backends/cuda/kernels.hpp"

namespace syncopate::cuda {
namespace {

__global__ void activation_kernel(Activation f, const float* x, float* y, int64_t n) {
  SYNC_GRID_LOOP(i, n) {
    switch (f) {
      case Activation::kSigmoid:
        y[i] = math::sigmoid_at(x, i);
        break;
      case Activation::kTanh:
        y[i] = math::tanh_at(x, i);
        break;
      case Activation::kGelu:
        y[i] = math::gelu_at(x, i);
        break;
    }
  }
}

__global__ void activation_backward_kernel(Activation f, const float* x, const float* y,
                                           const float* dy, float* dx, int64_t n) {
  SYNC_GRID_LOOP(i, n) {
    switch (f) {
      case Activation::kSigmoid:
        dx[i] = math::sigmoid_backward_at(y, dy, i);
        break;
      case Activation::kTanh:
        dx[i] = math::tanh_backward_at(y, dy, i);
        break;
      case Activation::kGelu:
        dx[i] = math::gelu_backward_at(x, dy, i);
        break;
    }
  }
}

// One thread per row: the row's sums in index order, as the CPU layer.
__global__ void norm_stats_kernel(const float* x, float* stats, int64_t features, bool centre,
                                  int64_t rows) {
  SYNC_GRID_LOOP(r, rows) { math::norm_stats_row(x, features, centre, r, stats); }
}

__global__ void norm_kernel(const float* x, const float* stats, const float* params, float* y,
                            int64_t features, bool centre, int64_t n) {
  SYNC_GRID_LOOP(i, n) { y[i] = math::norm_at(x, stats, params, features, centre, i); }
}

__global__ void norm_backward_kernel(const float* x, const float* stats, const float* params,
                                     const float* dy, float* dx, int64_t features, bool centre,
                                     int64_t rows) {
  SYNC_GRID_LOOP(r, rows) {
    math::norm_backward_row(x, stats, params, dy, features, centre, r, dx);
  }
}

// One thread per parameter: its sum over the rows in row order.
__global__ void norm_param_grad_kernel(const float* x, const float* stats, const float* dy,
                                       float* grads, int64_t rows, int64_t features, int64_t n) {
  SYNC_GRID_LOOP(j, n) {
    grads[j] = math::norm_param_grad_at(x, stats, dy, grads, rows, features, j);
  }
}

__global__ void embedding_kernel(const float* ids, const float* params, float* y,
                                 math::EmbeddingGeometry g, int64_t n) {
  SYNC_GRID_LOOP(i, n) { y[i] = math::embedding_at(ids, params, g, i); }
}

__global__ void embedding_backward_kernel(const float* dy, const int32_t* offsets,
                                          const int32_t* rows, float* grads,
                                          math::EmbeddingGeometry g, int64_t n) {
  SYNC_GRID_LOOP(j, n) { grads[j] = math::embedding_grad_at(dy, offsets, rows, grads, g, j); }
}

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  SYNC_GRID_LOOP(i, n) { out[i] = a[i] + b[i]; }
}

}  // namespace

void activation_forward(Activation f, const float* x, float* y, int64_t n, cudaStream_t stream) {
  SYNC_LAUNCH(activation_kernel, n, stream, f, x, y, n);
}

void activation_backward(Activation f, const float* x, const float* y, const float* dy, float* dx,
                         int64_t n, cudaStream_t stream) {
  SYNC_LAUNCH(activation_backward_kernel, n, stream, f, x, y, dy, dx, n);
}

void norm_forward(const float* x, const float* params, float* y, float* stats, int64_t rows,
                  int64_t features, bool centre, cudaStream_t stream) {
  SYNC_LAUNCH(norm_stats_kernel, rows, stream, x, stats, features, centre, rows);
  SYNC_LAUNCH(norm_kernel, rows * features, stream, x, stats, params, y, features, centre,
              rows * features);
}

void norm_backward(const float* x, const float* params, const float* stats, const float* dy,
                   float* grads, float* dx, int64_t rows, int64_t features, bool centre,
                   cudaStream_t stream) {
  const int64_t n = centre ? 2 * features : features;
  SYNC_LAUNCH(norm_param_grad_kernel, n, stream, x, stats, dy, grads, rows, features, n);
  if (dx) {
    SYNC_LAUNCH(norm_backward_kernel, rows, stream, x, stats, params, dy, dx, features, centre,
                rows);
  }
}

void embedding_forward(const float* ids, const float* params, float* y,
                       const math::EmbeddingGeometry& g, cudaStream_t stream) {
  SYNC_LAUNCH(embedding_kernel, g.tokens * g.width, stream, ids, params, y, g, g.tokens * g.width);
}

void embedding_backward(const float* dy, const int32_t* offsets, const int32_t* rows, float* grads,
                        const math::EmbeddingGeometry& g, cudaStream_t stream) {
  const int64_t n = (g.vocabulary + g.positions) * g.width;
  SYNC_LAUNCH(embedding_backward_kernel, n, stream, dy, offsets, rows, grads, g, n);
}

void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  SYNC_LAUNCH(add_kernel, n, stream, a, b, out, n);
}

}  // namespace syncopate::cuda
