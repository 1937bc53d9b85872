// The CUDA model: construction from a description, passes, losses, and the device optimizers.
#include "backends/cuda/cuda_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/base/check.hpp"
#include "core/nn/model.hpp"

namespace syncopate::cuda {

namespace {

// Why `layer` cannot run on this backend; empty if it can. `first`: the model's first layer.
std::string cuda_problem(const LayerSpec& layer, bool first) {
  switch (layer.kind) {
    case LayerKind::kBatchNorm2d:
    case LayerKind::kBottleneck:
    case LayerKind::kUnusedConv2d:
    case LayerKind::kAttention:
    case LayerKind::kSwiglu:
    case LayerKind::kTiedDense:
      return "has no CUDA kernels";
    case LayerKind::kConv2d:
    case LayerKind::kDense:
      return layer.bias == Bias::kNo ? "without bias has no CUDA kernels" : "";
    case LayerKind::kMaxPool2d:
      return layer.padding != 0 ? "with padding has no CUDA kernels" : "";
    case LayerKind::kEmbedding:
      return first ? "" : "has CUDA kernels only as the model's first layer (ids from the host)";
    default:
      return "";
  }
}

// prefix: "" at the top level, "3." inside the residual block at layer 3.
void check_layers(const ModelSpec& spec, const std::vector<LayerSpec>& layers,
                  const std::string& prefix) {
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& layer = layers[i];
    const std::string problem = cuda_problem(layer, prefix.empty() && i == 0);
    const std::string where = prefix + std::to_string(i);
    if (!problem.empty()) {
      throw UserError("model '" + spec.name + "': layer " + where + " (" +
                      std::string(to_string(layer.kind)) + ") " + problem +
                      "; the CUDA backend runs dense, conv2d, maxpool2d, avgpool2d, "
                      "global_avgpool, relu, flatten, dropout, sigmoid, tanh, gelu, layernorm, "
                      "rmsnorm, embedding (first) and residual");
    }
    if (layer.kind == LayerKind::kResidual) check_layers(spec, layer.layers, where + ".");
  }
}

// The run of `layer` and, for a residual block, of its layers; its parameters start at offset.
LayerRun make_run(const LayerSpec& layer, size_t offset) {
  LayerRun run;
  run.spec = &layer;
  run.offset = offset;
  for (const LayerSpec& inner : layer.layers) {
    run.inner.push_back(make_run(inner, offset));
    offset += static_cast<size_t>(syncopate::num_params(inner));
  }
  run.acts.resize(run.inner.size());
  run.grads.resize(run.inner.size());
  return run;
}

}  // namespace

void check_runs_on_cuda(const ModelSpec& spec) { check_layers(spec, spec.layers, ""); }

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
    runs_.push_back(make_run(layer, offset));
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
  col_size_ = scratch_size_ = 0;
  ones_size_ = batch;
  for (size_t i = 0; i < runs_.size(); ++i) prepare(runs_[i], shapes_[i]);
  for (size_t i = 0; i < shapes_.size(); ++i) {
    activations_[i].resize(static_cast<size_t>(numel(shapes_[i])));
    activation_grads_[i].resize(static_cast<size_t>(numel(shapes_[i])));
  }
  col_.resize(static_cast<size_t>(col_size_));
  scratch_.resize(static_cast<size_t>(scratch_size_));
  ones_.resize(static_cast<size_t>(ones_size_));
  fill(ones_.data(), 1.0f, ones_size_, stream());
  const auto out = static_cast<size_t>(numel(shapes_.back()));
  labels_.resize(static_cast<size_t>(batch));
  correct_.resize(static_cast<size_t>(batch));
  loss_terms_.resize(std::max(out, static_cast<size_t>(batch)));
}

void CudaModel::prepare(LayerRun& run, const Shape& in) {
  const LayerSpec& layer = *run.spec;
  run.in = in;
  run.out = syncopate::output_shape(layer, in);
  const int64_t n_out = numel(run.out);
  switch (layer.kind) {
    case LayerKind::kConv2d: {
      const int64_t cols = in[0] * run.out[2] * run.out[3];
      col_size_ = std::max(col_size_, layer.in * layer.kernel * layer.kernel * cols);
      scratch_size_ = std::max(scratch_size_, layer.out * cols);
      ones_size_ = std::max(ones_size_, cols);
      break;
    }
    case LayerKind::kDense:
      ones_size_ = std::max(ones_size_, numel(in) / layer.in);  // its rows
      break;
    case LayerKind::kMaxPool2d:
      run.argmax.resize(static_cast<size_t>(n_out));
      break;
    case LayerKind::kDropout:
      run.mask.resize(static_cast<size_t>(n_out));
      break;
    case LayerKind::kLayerNorm:
    case LayerKind::kRmsNorm:
      run.stats.resize(static_cast<size_t>(2 * (numel(in) / layer.in)));
      break;
    case LayerKind::kResidual: {
      Shape shape = in;
      for (size_t j = 0; j < run.inner.size(); ++j) {
        prepare(run.inner[j], shape);
        run.grads[j].resize(static_cast<size_t>(numel(shape)));
        shape = run.inner[j].out;
        run.acts[j].resize(static_cast<size_t>(numel(shape)));
      }
      break;
    }
    default:
      break;
  }
}

void CudaModel::set_input(std::span<const float> host) {
  SYNC_CHECK(static_cast<int64_t>(host.size()) == numel(shapes_.front()),
             host.size() << " vs " << syncopate::to_string(shapes_.front()));
  const LayerSpec& first = spec_.layers.front();
  if (first.kind == LayerKind::kEmbedding) {
    for (const float value : host) {
      const auto id = static_cast<int64_t>(value);
      if (!(value >= 0.0f && static_cast<float>(id) == value && id < first.in)) {
        throw UserError("embedding: token id " + std::to_string(value) +
                        " is not an integer in [0, " + std::to_string(first.in) + ")");
      }
    }
    const math::TokenRows rows =
        math::token_rows(host.data(), static_cast<int64_t>(host.size()), first.in);
    token_offsets_.resize(rows.offsets.size());
    token_rows_.resize(rows.rows.size());
    copy_to_device(std::span<const int32_t>(rows.offsets), token_offsets_, stream());
    copy_to_device(std::span<const int32_t>(rows.rows), token_rows_, stream());
    stream_.synchronize();  // the host vectors go out of scope
  }
  copy_to_device(host, activations_.front().data(), stream());
}

void CudaModel::forward_layer(int i, const StepContext& ctx) {
  const auto u = static_cast<size_t>(i);
  StepContext layer_ctx = ctx;
  layer_ctx.layer = static_cast<uint32_t>(i);
  layer_ctx.sublayer = 0;
  forward_run(runs_[u], activations_[u].data(), activations_[u + 1].data(), layer_ctx);
}

void CudaModel::backward_layer(int i) {
  const auto u = static_cast<size_t>(i);
  if (i < first_param_layer_) return;  // nothing upstream needs a gradient
  float* dx = i > first_param_layer_ ? activation_grads_[u].data() : nullptr;
  backward_run(runs_[u], activations_[u].data(), activations_[u + 1].data(),
               activation_grads_[u + 1].data(), dx);
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
