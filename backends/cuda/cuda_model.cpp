// The CUDA model: construction from a description, passes, losses, and the device optimizers.
#include "backends/cuda/cuda_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/base/check.hpp"
#include "core/nn/model.hpp"

namespace syncopate::cuda {

void check_runs_on_cuda(const ModelSpec& spec) {
  Shape shape = {1};
  shape.insert(shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& layer = spec.layers[i];
    std::string problem;
    switch (layer.kind) {
      case LayerKind::kBatchNorm2d:
      case LayerKind::kBottleneck:
      case LayerKind::kUnusedConv2d:
      case LayerKind::kSigmoid:
      case LayerKind::kTanh:
      case LayerKind::kGelu:
      case LayerKind::kLayerNorm:
      case LayerKind::kRmsNorm:
      case LayerKind::kEmbedding:
      case LayerKind::kResidual:
      case LayerKind::kAttention:
      case LayerKind::kSwiglu:
      case LayerKind::kTiedDense:
        problem = "has no CUDA kernels";
        break;
      case LayerKind::kConv2d:
        if (layer.bias == Bias::kNo) problem = "without bias has no CUDA kernels";
        break;
      case LayerKind::kDense:
        if (layer.bias == Bias::kNo) problem = "without bias has no CUDA kernels";
        if (shape.size() != 2) problem = "over more than one feature axis has no CUDA kernels";
        break;
      case LayerKind::kMaxPool2d:
        if (layer.padding != 0) problem = "with padding has no CUDA kernels";
        break;
      default:
        break;
    }
    if (!problem.empty()) {
      throw UserError("model '" + spec.name + "': layer " + std::to_string(i) + " (" +
                      std::string(to_string(layer.kind)) + ") " + problem +
                      "; the CUDA backend runs dense, conv2d, maxpool2d, avgpool2d, "
                      "global_avgpool, relu, flatten, dropout");
    }
    shape = syncopate::output_shape(layer, shape);
  }
}

namespace {

ModelSpec runnable_on_cuda(ModelSpec spec) {
  check_runs_on_cuda(spec);
  return spec;
}

}  // namespace

CudaModel::CudaModel(ModelSpec spec, MathMode math)
    : spec_(runnable_on_cuda(std::move(spec))), cublas_(stream_.get(), math) {
  SYNC_CHECK(!spec_.layers.empty(), "model " << spec_.name << " has no layers");
  size_t offset = 0;
  for (const LayerSpec& layer : spec_.layers) {
    const auto count = static_cast<size_t>(syncopate::num_params(layer));
    ranges_.push_back({offset, count});
    offset += count;
  }
  num_params_ = static_cast<int64_t>(offset);
  first_param_layer_ = num_layers();
  for (int i = num_layers() - 1; i >= 0; --i) {
    if (ranges_[static_cast<size_t>(i)].count > 0) first_param_layer_ = i;
  }
  params_.resize(offset);
  grads_.resize(offset);
  zero(params_.data(), offset, stream());
  zero(grads_.data(), offset, stream());
  const size_t layers = spec_.layers.size();
  activations_.resize(layers + 1);
  activation_grads_.resize(layers + 1);
  argmax_.resize(layers);
  masks_.resize(layers);
  last_mode_.assign(layers, Mode::kEval);
  set_batch(1);  // validates the shapes early
  stream_.synchronize();
}

void check_matches(const Model& cpu, const ModelSpec& spec) {
  const auto fail = [&](int layer, const std::string& what) {
    throw UserError(std::string(__FILE__) + ": CUDA layer list of '" + spec.name +
                    "' does not match the CPU model '" + cpu.name() + "' at layer " +
                    std::to_string(layer) + ": " + what);
  };
  if (cpu.sample_shape() != spec.sample_shape) fail(-1, "sample shape");
  if (cpu.num_layers() != static_cast<int>(spec.layers.size())) fail(-1, "layer count");
  Shape shape = {2};
  shape.insert(shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  size_t offset = 0;
  for (int i = 0; i < cpu.num_layers(); ++i) {
    const LayerSpec& mine = spec.layers[static_cast<size_t>(i)];
    const Layer& theirs = cpu.layer(i);
    if (theirs.kind() != to_string(mine.kind)) {
      fail(i, std::string(theirs.kind()) + " vs " + std::string(to_string(mine.kind)));
    }
    if (theirs.num_params() != syncopate::num_params(mine)) fail(i, "parameter count");
    if (cpu.param_range(i).offset != offset) fail(i, "parameter offset");
    offset += static_cast<size_t>(syncopate::num_params(mine));
    const Shape next = syncopate::output_shape(mine, shape);
    if (numel(theirs.output_shape(shape)) != numel(next)) fail(i, "output size");
    shape = next;
  }
}

std::unique_ptr<CudaModel> CudaModel::from_cpu(const Model& cpu, ModelSpec spec, MathMode math) {
  check_matches(cpu, spec);
  if (cpu.storage() != Storage::kReal) {
    throw UserError(std::string(__FILE__) + ": model '" + cpu.name() +
                    "' is cost-only: it has no parameters to copy");
  }
  auto model = std::make_unique<CudaModel>(std::move(spec), math);
  model->set_params(cpu.params());
  return model;
}

void CudaModel::set_params(std::span<const float> host) {
  SYNC_CHECK(static_cast<int64_t>(host.size()) == num_params_, host.size());
  copy_to_device(host, params_.data(), stream());
  stream_.synchronize();
}

void CudaModel::get_params(std::span<float> host) const {
  SYNC_CHECK(static_cast<int64_t>(host.size()) == num_params_, host.size());
  copy_to_host(params_.data(), host, stream());
  stream_.synchronize();
}

void CudaModel::get_grads(std::span<float> host) const {
  SYNC_CHECK(static_cast<int64_t>(host.size()) == num_params_, host.size());
  copy_to_host(grads_.data(), host, stream());
  stream_.synchronize();
}

void CudaModel::get_output(std::span<float> host) const {
  SYNC_CHECK(static_cast<int64_t>(host.size()) == numel(shapes_.back()), host.size());
  copy_to_host(activations_.back().data(), host, stream());
  stream_.synchronize();
}

void CudaModel::set_output_grad(std::span<const float> host) {
  SYNC_CHECK(static_cast<int64_t>(host.size()) == numel(shapes_.back()), host.size());
  copy_to_device(host, activation_grads_.back().data(), stream());
  stream_.synchronize();
}

void CudaModel::zero_grads() { zero(grads_.data(), grads_.size(), stream()); }

void CudaModel::set_batch(int64_t batch) {
  SYNC_CHECK(batch > 0, "batch " << batch);
  if (batch == batch_) return;
  // All shapes first: a layer that does not fit throws before anything changes.
  std::vector<Shape> shapes = {{batch}};
  shapes[0].insert(shapes[0].end(), spec_.sample_shape.begin(), spec_.sample_shape.end());
  for (const LayerSpec& layer : spec_.layers) {
    shapes.push_back(syncopate::output_shape(layer, shapes.back()));
  }
  batch_ = batch;
  shapes_ = std::move(shapes);
  int64_t col = 0, scratch = 0, ones = batch;
  for (int i = 0; i < num_layers(); ++i) {
    const LayerSpec& layer = spec_.layers[static_cast<size_t>(i)];
    const Shape& next = shapes_[static_cast<size_t>(i) + 1];
    if (layer.kind == LayerKind::kConv2d) {
      const int64_t cols = batch * next[2] * next[3];
      col = std::max(col, layer.in * layer.kernel * layer.kernel * cols);
      scratch = std::max(scratch, layer.out * cols);
      ones = std::max(ones, cols);
    }
    if (layer.kind == LayerKind::kMaxPool2d) {
      argmax_[static_cast<size_t>(i)].resize(static_cast<size_t>(numel(next)));
    }
    if (layer.kind == LayerKind::kDropout) {
      masks_[static_cast<size_t>(i)].resize(static_cast<size_t>(numel(next)));
    }
  }
  for (size_t i = 0; i < shapes_.size(); ++i) {
    activations_[i].resize(static_cast<size_t>(numel(shapes_[i])));
    activation_grads_[i].resize(static_cast<size_t>(numel(shapes_[i])));
  }
  col_.resize(static_cast<size_t>(col));
  scratch_.resize(static_cast<size_t>(scratch));
  ones_.resize(static_cast<size_t>(ones));
  fill(ones_.data(), 1.0f, ones, stream());
  const auto out = static_cast<size_t>(numel(shapes_.back()));
  labels_.resize(static_cast<size_t>(batch));
  correct_.resize(static_cast<size_t>(batch));
  loss_terms_.resize(std::max(out, static_cast<size_t>(batch)));
}

void CudaModel::set_input(std::span<const float> host) {
  SYNC_CHECK(static_cast<int64_t>(host.size()) == numel(shapes_.front()),
             host.size() << " vs " << syncopate::to_string(shapes_.front()));
  copy_to_device(host, activations_.front().data(), stream());
}

ConvGeometry CudaModel::conv_geometry(int i) const {
  const LayerSpec& layer = spec_.layers[static_cast<size_t>(i)];
  const Shape& in = shapes_[static_cast<size_t>(i)];
  const Shape& out = shapes_[static_cast<size_t>(i) + 1];
  return {.n = in[0],
          .c = in[1],
          .h = in[2],
          .w = in[3],
          .k = layer.kernel,
          .stride = layer.stride,
          .pad = layer.padding,
          .oh = out[2],
          .ow = out[3]};
}

PoolGeometry CudaModel::pool_geometry(int i) const {
  const LayerSpec& layer = spec_.layers[static_cast<size_t>(i)];
  const Shape& in = shapes_[static_cast<size_t>(i)];
  const Shape& out = shapes_[static_cast<size_t>(i) + 1];
  return {.n = in[0],
          .c = in[1],
          .h = in[2],
          .w = in[3],
          .k = layer.kernel,
          .stride = layer.stride,
          .oh = out[2],
          .ow = out[3]};
}

void CudaModel::forward_layer(int i, const StepContext& ctx) {
  const auto u = static_cast<size_t>(i);
  const LayerSpec& layer = spec_.layers[u];
  const float* x = activations_[u].data();
  float* y = activations_[u + 1].data();
  const int64_t n_in = numel(shapes_[u]), n_out = numel(shapes_[u + 1]);
  last_mode_[u] = ctx.mode;
  switch (layer.kind) {
    case LayerKind::kDense:
      forward_dense(i);
      break;
    case LayerKind::kConv2d:
      forward_conv(i);
      break;
    case LayerKind::kMaxPool2d:
      maxpool_forward(x, y, argmax_[u].data(), pool_geometry(i), stream());
      break;
    case LayerKind::kAvgPool2d:
      avgpool_forward(x, y, pool_geometry(i), stream());
      break;
    case LayerKind::kGlobalAvgPool:
      global_avgpool_forward(x, y, n_out, n_in / n_out, stream());
      break;
    case LayerKind::kRelu:
      relu_forward(x, y, n_in, stream());
      break;
    case LayerKind::kFlatten:
      copy_device_to_device(x, y, static_cast<size_t>(n_in), stream());
      break;
    case LayerKind::kDropout:
      if (ctx.mode == Mode::kTrain && layer.rate > 0.0f) {
        const math::PhiloxStream key = math::dropout_stream(ctx.seed, ctx.worker, ctx.epoch,
                                                            ctx.step, static_cast<uint32_t>(i));
        dropout_forward(x, y, masks_[u].data(), key, layer.rate, n_in, stream());
      } else {
        last_mode_[u] = Mode::kEval;  // identity
        copy_device_to_device(x, y, static_cast<size_t>(n_in), stream());
      }
      break;
    default:  // refused by check_runs_on_cuda
      SYNC_CHECK(false, "refused by check_runs_on_cuda: " << to_string(layer.kind));
  }
}

void CudaModel::forward_dense(int i) {
  const auto u = static_cast<size_t>(i);
  const LayerSpec& layer = spec_.layers[u];
  const float* w = params_.data() + ranges_[u].offset;
  const float* b = w + layer.in * layer.out;
  dense_forward(cublas(), activations_[u].data(), w, b, activations_[u + 1].data(), batch_,
                layer.in, layer.out, stream());
}

void CudaModel::forward_conv(int i) {
  const auto u = static_cast<size_t>(i);
  const LayerSpec& layer = spec_.layers[u];
  const float* w = params_.data() + ranges_[u].offset;
  const float* b = w + layer.out * layer.in * layer.kernel * layer.kernel;
  conv2d_forward(cublas(), activations_[u].data(), w, b, activations_[u + 1].data(), col_.data(),
                 scratch_.data(), conv_geometry(i), layer.out, stream());
}

void CudaModel::backward_layer(int i) {
  const auto u = static_cast<size_t>(i);
  const LayerSpec& layer = spec_.layers[u];
  if (i < first_param_layer_) return;  // nothing upstream needs a gradient
  float* dx = i > first_param_layer_ ? activation_grads_[u].data() : nullptr;
  const float* x = activations_[u].data();
  const float* dy = activation_grads_[u + 1].data();
  const int64_t n_in = numel(shapes_[u]), n_out = numel(shapes_[u + 1]);
  if (layer.kind == LayerKind::kDense) return backward_dense(i, dx);
  if (layer.kind == LayerKind::kConv2d) return backward_conv(i, dx);
  switch (layer.kind) {
    case LayerKind::kMaxPool2d:
      maxpool_backward(dy, argmax_[u].data(), dx, pool_geometry(i), stream());
      break;
    case LayerKind::kAvgPool2d:
      avgpool_backward(dy, dx, pool_geometry(i), stream());
      break;
    case LayerKind::kGlobalAvgPool:
      global_avgpool_backward(dy, dx, n_out, n_in / n_out, stream());
      break;
    case LayerKind::kRelu:
      relu_backward(x, dy, dx, n_in, stream());
      break;
    case LayerKind::kDropout:
      if (last_mode_[u] == Mode::kTrain) {
        multiply(dy, masks_[u].data(), dx, n_in, stream());
        break;
      }
      [[fallthrough]];
    case LayerKind::kFlatten:
      copy_device_to_device(dy, dx, static_cast<size_t>(n_in), stream());
      break;
    case LayerKind::kDense:
    case LayerKind::kConv2d:
      break;  // handled above
    default:  // refused by check_runs_on_cuda
      SYNC_CHECK(false, "refused by check_runs_on_cuda: " << to_string(layer.kind));
  }
}

void CudaModel::backward_dense(int i, float* dx) {
  const auto u = static_cast<size_t>(i);
  const LayerSpec& layer = spec_.layers[u];
  const float* w = params_.data() + ranges_[u].offset;
  float* dw = grads_.data() + ranges_[u].offset;
  float* db = dw + layer.in * layer.out;
  dense_backward(cublas(), activations_[u].data(), w, activation_grads_[u + 1].data(), dw, db, dx,
                 ones_.data(), batch_, layer.in, layer.out);
}

void CudaModel::backward_conv(int i, float* dx) {
  const auto u = static_cast<size_t>(i);
  const LayerSpec& layer = spec_.layers[u];
  const float* w = params_.data() + ranges_[u].offset;
  float* dw = grads_.data() + ranges_[u].offset;
  float* db = dw + layer.out * layer.in * layer.kernel * layer.kernel;
  conv2d_backward(cublas(), activations_[u].data(), w, activation_grads_[u + 1].data(), dw, db, dx,
                  col_.data(), scratch_.data(), ones_.data(), conv_geometry(i), layer.out,
                  stream());
}

void CudaModel::forward(const StepContext& ctx) {
  for (int i = 0; i < num_layers(); ++i) forward_layer(i, ctx);
}

void CudaModel::backward() {
  for (int i = num_layers() - 1; i >= 0; --i) backward_layer(i);
}

LossResult CudaModel::softmax_cross_entropy(std::span<const float> labels) {
  const Shape& out = shapes_.back();
  SYNC_CHECK(out.size() == 2 && static_cast<int64_t>(labels.size()) == batch_,
             syncopate::to_string(out) << " labels " << labels.size());
  for (const float label : labels) {
    if (!(label >= 0.0f && label < static_cast<float>(out[1])) || label != std::floor(label)) {
      throw UserError(std::string(__FILE__) + ": labels: " + std::to_string(label) +
                      " is not a class index in [0, " + std::to_string(out[1]) + ")");
    }
  }
  copy_to_device(labels, labels_.data(), stream());
  cuda::softmax_xent(activations_.back().data(), labels_.data(), activation_grads_.back().data(),
                     loss_terms_.data(), correct_.data(), batch_, out[1], stream());
  return sum_losses(batch_, batch_, true);
}

LossResult CudaModel::mse(std::span<const float> targets) {
  const int64_t n = numel(shapes_.back());
  SYNC_CHECK(static_cast<int64_t>(targets.size()) == n, targets.size() << " vs " << n);
  DeviceBuffer<float> target(static_cast<size_t>(n));
  copy_to_device(targets, target.data(), stream());
  cuda::mse(activations_.back().data(), target.data(), activation_grads_.back().data(),
            loss_terms_.data(), n, stream());
  return sum_losses(n, n, false);
}

LossResult CudaModel::sum_losses(int64_t terms, int64_t divisor, bool with_correct) {
  std::vector<float> loss(static_cast<size_t>(terms)), correct;
  copy_to_host(loss_terms_.data(), loss, stream());
  if (with_correct) {
    correct.resize(static_cast<size_t>(batch_));
    copy_to_host(correct_.data(), correct, stream());
  }
  stream_.synchronize();
  LossResult result;
  for (const float term : loss) result.loss += term;
  result.loss /= static_cast<double>(divisor);
  for (const float hit : correct) result.correct += hit > 0.5f ? 1 : 0;
  return result;
}

CudaOptimizer::CudaOptimizer(const OptimizerConfig& config, int64_t num_params)
    : config_(config), n_(num_params) {
  validate(config_);
  const auto n = static_cast<size_t>(n_);
  if (config_.kind != OptimizerKind::kSgd) {
    state_.resize(2 * n);
  } else if (config_.momentum != 0) {
    state_.resize(n);
  }
  reset(nullptr);
}

void CudaOptimizer::reset(cudaStream_t stream) { zero(state_.data(), state_.size(), stream); }

void CudaOptimizer::step(float* params, const float* grads, float lr, int64_t step,
                         cudaStream_t stream) {
  if (config_.kind == OptimizerKind::kSgd) {
    const SgdOptions options{.lr = lr,
                             .momentum = static_cast<float>(config_.momentum),
                             .weight_decay = static_cast<float>(config_.weight_decay),
                             .nesterov = config_.nesterov};
    sgd_step(params, grads, state_.data(), n_, options, stream);
  } else {
    const AdamOptions options{.lr = lr,
                              .beta1 = config_.beta1,
                              .beta2 = config_.beta2,
                              .eps = config_.eps,
                              .weight_decay = config_.weight_decay,
                              .variant = config_.kind == OptimizerKind::kAdamW
                                             ? AdamVariant::kAdamW
                                             : AdamVariant::kAdam};
    adam_step(params, grads, state_.data(), state_.data() + n_, n_, options, step, stream);
  }
}

LossResult train_step(CudaModel& model, CudaOptimizer& optimizer, std::span<const float> x,
                      std::span<const float> labels, const StepContext& ctx, float lr,
                      int64_t step) {
  model.set_input(x);
  model.forward(ctx);
  const LossResult result = model.softmax_cross_entropy(labels);
  model.zero_grads();
  model.backward();
  optimizer.step(model.params(), model.grads(), lr, step, model.stream());
  return result;
}

}  // namespace syncopate::cuda
