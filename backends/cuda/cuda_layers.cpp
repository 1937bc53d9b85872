// The CUDA model's layer passes: one forward and one backward per layer kind, a residual
// block recursing into its layers.
#include <string>

#include "backends/cuda/cuda_model.hpp"
#include "core/base/check.hpp"

namespace syncopate::cuda {
namespace {

ConvGeometry conv_geometry(const LayerRun& run) {
  return {.n = run.in[0],
          .c = run.in[1],
          .h = run.in[2],
          .w = run.in[3],
          .k = run.spec->kernel,
          .stride = run.spec->stride,
          .pad = run.spec->padding,
          .oh = run.out[2],
          .ow = run.out[3]};
}

PoolGeometry pool_geometry(const LayerRun& run) {
  return {.n = run.in[0],
          .c = run.in[1],
          .h = run.in[2],
          .w = run.in[3],
          .k = run.spec->kernel,
          .stride = run.spec->stride,
          .oh = run.out[2],
          .ow = run.out[3]};
}

Activation activation_of(LayerKind kind) {
  if (kind == LayerKind::kSigmoid) return Activation::kSigmoid;
  return kind == LayerKind::kTanh ? Activation::kTanh : Activation::kGelu;
}

math::EmbeddingGeometry embedding_geometry(const LayerRun& run) {
  return {.vocabulary = run.spec->in,
          .width = run.spec->out,
          .positions = run.spec->positions,
          .tokens = numel(run.in),
          .steps = run.in[1]};
}

}  // namespace

void CudaModel::forward_run(LayerRun& run, const float* x, float* y, const StepContext& ctx) {
  const LayerSpec& layer = *run.spec;
  const float* p = params_.data() + run.offset;
  const int64_t n_in = numel(run.in), n_out = numel(run.out);
  run.last_mode = ctx.mode;
  switch (layer.kind) {
    case LayerKind::kDense:
      return forward_dense(run, x, y);
    case LayerKind::kConv2d:
      return forward_conv(run, x, y);
    case LayerKind::kMaxPool2d:
      return maxpool_forward(x, y, run.argmax.data(), pool_geometry(run), stream());
    case LayerKind::kAvgPool2d:
      return avgpool_forward(x, y, pool_geometry(run), stream());
    case LayerKind::kGlobalAvgPool:
      return global_avgpool_forward(x, y, n_out, n_in / n_out, stream());
    case LayerKind::kRelu:
      return relu_forward(x, y, n_in, stream());
    case LayerKind::kSigmoid:
    case LayerKind::kTanh:
    case LayerKind::kGelu:
      return activation_forward(activation_of(layer.kind), x, y, n_in, stream());
    case LayerKind::kLayerNorm:
    case LayerKind::kRmsNorm:
      return norm_forward(x, p, y, run.stats.data(), n_in / layer.in, layer.in,
                          layer.kind == LayerKind::kLayerNorm, stream());
    case LayerKind::kEmbedding:
      return embedding_forward(x, p, y, embedding_geometry(run), stream());
    case LayerKind::kResidual:
      return forward_residual(run, x, y, ctx);
    case LayerKind::kFlatten:
      return copy_device_to_device(x, y, static_cast<size_t>(n_in), stream());
    case LayerKind::kDropout:
      if (ctx.mode == Mode::kTrain && layer.rate > 0.0f) {
        // The CPU layer's stream: epoch + 2^20 sublayer (core/nn/layers_basic.cpp).
        const math::PhiloxStream key = math::dropout_stream(
            ctx.seed, ctx.worker, ctx.epoch + (ctx.sublayer << 20), ctx.step, ctx.layer);
        return dropout_forward(x, y, run.mask.data(), key, layer.rate, n_in, stream());
      }
      run.last_mode = Mode::kEval;  // identity
      return copy_device_to_device(x, y, static_cast<size_t>(n_in), stream());
    default:  // refused by check_runs_on_cuda
      SYNC_CHECK(false, "refused by check_runs_on_cuda: " << to_string(layer.kind));
  }
}

void CudaModel::backward_run(LayerRun& run, const float* x, const float* y, const float* dy,
                             float* dx) {
  const LayerSpec& layer = *run.spec;
  float* g = grads_.data() + run.offset;
  const float* p = params_.data() + run.offset;
  const int64_t n_in = numel(run.in), n_out = numel(run.out);
  switch (layer.kind) {
    case LayerKind::kDense:
      return backward_dense(run, x, dy, dx);
    case LayerKind::kConv2d:
      return backward_conv(run, x, dy, dx);
    case LayerKind::kLayerNorm:
    case LayerKind::kRmsNorm:
      return norm_backward(x, p, run.stats.data(), dy, g, dx, n_in / layer.in, layer.in,
                           layer.kind == LayerKind::kLayerNorm, stream());
    case LayerKind::kEmbedding:  // no input gradient (the ids are not differentiable)
      if (dx) zero(dx, static_cast<size_t>(n_in), stream());
      return embedding_backward(dy, token_offsets_.data(), token_rows_.data(), g,
                                embedding_geometry(run), stream());
    case LayerKind::kResidual:
      return backward_residual(run, x, dy, dx);
    default:
      break;
  }
  if (!dx) return;  // the layers below have no parameters
  switch (layer.kind) {
    case LayerKind::kMaxPool2d:
      return maxpool_backward(dy, run.argmax.data(), dx, pool_geometry(run), stream());
    case LayerKind::kAvgPool2d:
      return avgpool_backward(dy, dx, pool_geometry(run), stream());
    case LayerKind::kGlobalAvgPool:
      return global_avgpool_backward(dy, dx, n_out, n_in / n_out, stream());
    case LayerKind::kRelu:
      return relu_backward(x, dy, dx, n_in, stream());
    case LayerKind::kSigmoid:
    case LayerKind::kTanh:
    case LayerKind::kGelu:
      return activation_backward(activation_of(layer.kind), x, y, dy, dx, n_in, stream());
    case LayerKind::kDropout:
      if (run.last_mode == Mode::kTrain) return multiply(dy, run.mask.data(), dx, n_in, stream());
      [[fallthrough]];
    case LayerKind::kFlatten:
      return copy_device_to_device(dy, dx, static_cast<size_t>(n_in), stream());
    default:  // refused by check_runs_on_cuda
      SYNC_CHECK(false, "refused by check_runs_on_cuda: " << to_string(layer.kind));
  }
}

// y = layers(x) + x; sub-layer j runs as sublayer 1 + j (dropout keys its mask by it).
void CudaModel::forward_residual(LayerRun& run, const float* x, float* y, const StepContext& ctx) {
  StepContext sub = ctx;
  for (size_t j = 0; j < run.inner.size(); ++j) {
    sub.sublayer = static_cast<uint32_t>(1 + j);
    forward_run(run.inner[j], j == 0 ? x : run.acts[j - 1].data(), run.acts[j].data(), sub);
  }
  add(run.acts.back().data(), x, y, numel(run.out), stream());
}

// Back through the layers from dy (the sum's gradient), the first layer's input gradient
// into dx, then dx += dy (the skip), as the CPU block.
void CudaModel::backward_residual(LayerRun& run, const float* x, const float* dy, float* dx) {
  for (size_t j = run.inner.size(); j-- > 0;) {
    const float* in = j == 0 ? x : run.acts[j - 1].data();
    const float* grad_out = j + 1 == run.inner.size() ? dy : run.grads[j + 1].data();
    float* target = j == 0 ? dx : run.grads[j].data();
    backward_run(run.inner[j], in, run.acts[j].data(), grad_out, target);
  }
  if (dx) axpy(1.0f, dy, dx, numel(run.in), stream());
}

void CudaModel::forward_dense(const LayerRun& run, const float* x, float* y) {
  const LayerSpec& layer = *run.spec;
  const float* w = params_.data() + run.offset;
  const float* b = w + layer.in * layer.out;
  dense_forward(cublas(), x, w, b, y, numel(run.in) / layer.in, layer.in, layer.out, stream());
}

void CudaModel::forward_conv(const LayerRun& run, const float* x, float* y) {
  const LayerSpec& layer = *run.spec;
  const float* w = params_.data() + run.offset;
  const float* b = w + layer.out * layer.in * layer.kernel * layer.kernel;
  conv2d_forward(cublas(), x, w, b, y, col_.data(), scratch_.data(), conv_geometry(run), layer.out,
                 stream());
}

void CudaModel::backward_dense(const LayerRun& run, const float* x, const float* dy, float* dx) {
  const LayerSpec& layer = *run.spec;
  const float* w = params_.data() + run.offset;
  float* dw = grads_.data() + run.offset;
  float* db = dw + layer.in * layer.out;
  dense_backward(cublas(), x, w, dy, dw, db, dx, ones_.data(), numel(run.in) / layer.in, layer.in,
                 layer.out);
}

void CudaModel::backward_conv(const LayerRun& run, const float* x, const float* dy, float* dx) {
  const LayerSpec& layer = *run.spec;
  const float* w = params_.data() + run.offset;
  float* dw = grads_.data() + run.offset;
  float* db = dw + layer.out * layer.in * layer.kernel * layer.kernel;
  conv2d_backward(cublas(), x, w, dy, dw, db, dx, col_.data(), scratch_.data(), ones_.data(),
                  conv_geometry(run), layer.out, stream());
}

}  // namespace syncopate::cuda
