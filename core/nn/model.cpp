// The sequential model over one flat parameter buffer: construction, passes and costs.
#include "core/nn/model.hpp"

#include <algorithm>
#include <cstring>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

std::vector<std::unique_ptr<Layer>> make_layers(const ModelSpec& spec) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.reserve(spec.layers.size());
  for (const LayerSpec& layer : spec.layers) layers.push_back(make_layer(layer));
  return layers;
}

}  // namespace

Model::Model(const ModelSpec& spec, Storage storage)
    : Model(spec.name, spec.sample_shape, make_layers(spec), storage) {
  spec_ = spec;
}

Model::Model(std::string name, Shape sample_shape, std::vector<std::unique_ptr<Layer>> layers,
             Storage storage)
    : name_(std::move(name)),
      sample_shape_(std::move(sample_shape)),
      layers_(std::move(layers)),
      storage_(storage) {
  SYNC_CHECK(!layers_.empty(), "model " << name_ << " has no layers");
  output_shape(1);  // validates every layer's input shape (throws UserError on a mismatch)
  ranges_.reserve(layers_.size());
  size_t offset = 0;
  for (const auto& layer : layers_) {
    const size_t count = static_cast<size_t>(layer->num_params());
    ranges_.push_back({offset, count});
    offset += count;
  }
  num_params_ = static_cast<int64_t>(offset);
  if (storage_ == Storage::kReal) {
    param_storage_.assign(offset, 0.0f);
    grad_storage_.assign(offset, 0.0f);
    params_ = param_storage_;
    grads_ = grad_storage_;
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (storage_ == Storage::kReal) {
      layers_[i]->bind(params_.subspan(ranges_[i].offset, ranges_[i].count),
                       grads_.subspan(ranges_[i].offset, ranges_[i].count));
    } else {
      layers_[i]->bind({}, {});
    }
  }
  // Input gradients are needed only behind the first layer with parameters.
  first_param_layer_ = num_layers();
  for (int i = 0; i < num_layers(); ++i) {
    if (layers_[static_cast<size_t>(i)]->num_params() > 0) {
      first_param_layer_ = i;
      break;
    }
  }
  relu_absorbed_.assign(layers_.size(), 0);
  streams_from_.assign(layers_.size(), -1);
  streams_to_.assign(layers_.size(), -1);
  if (storage_ == Storage::kReal) {
    for (size_t i = 0; i + 1 < layers_.size(); ++i)
      relu_absorbed_[i] = layers_[i]->kind() == "relu" && layers_[i + 1]->absorbs_relu();
    // Streaming pairs: layer i and the layer after it (after an absorbed ReLU, if any). Whether a
    // layer takes a streamed gradient depends on its input's shape beyond the batch.
    Shape shape{1};
    shape.insert(shape.end(), sample_shape_.begin(), sample_shape_.end());
    for (size_t i = 0; i < layers_.size(); shape = layers_[i]->output_shape(shape), ++i) {
      const size_t next = i + 1 < layers_.size() && relu_absorbed_[i + 1] ? i + 2 : i + 1;
      if (next < layers_.size() && layers_[i]->num_params() > 0 &&
          layers_[i]->takes_streamed_grad(shape) && layers_[next]->streams_input_grad()) {
        streams_from_[i] = static_cast<int>(next);
        streams_to_[next] = static_cast<int>(i);
      }
    }
  }
  set_batch(1);
}

Shape Model::output_shape(int64_t batch) const {
  Shape shape{batch};
  shape.insert(shape.end(), sample_shape_.begin(), sample_shape_.end());
  for (const auto& layer : layers_) shape = layer->output_shape(shape);
  return shape;
}

void Model::init(uint64_t seed) {
  if (storage_ != Storage::kReal) return;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i]->num_params() == 0) continue;
    // He when a ReLU follows (possibly behind a BatchNorm, as in ResNets), Xavier otherwise.
    size_t next = i + 1;
    if (next < layers_.size() && layers_[next]->kind() == "batchnorm2d") ++next;
    const bool before_relu = next < layers_.size() && layers_[next]->kind() == "relu";
    Rng rng({seed, 0, 0, RngPurpose::kInit, static_cast<uint32_t>(i)});
    layers_[i]->init_params(rng, before_relu ? InitScheme::kHe : InitScheme::kXavier);
  }
}

void Model::zero_grads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void Model::set_batch(int64_t batch) {
  SYNC_CHECK(batch > 0, "batch " << batch);
  if (batch == batch_) return;
  batch_ = batch;
  const size_t n = layers_.size();
  activations_.resize(n + 1);
  grads_of_activations_.resize(n + 1);
  forward_costs_.assign(n, std::nullopt);
  backward_costs_.assign(n, std::nullopt);
  Shape shape{batch};
  shape.insert(shape.end(), sample_shape_.begin(), sample_shape_.end());
  for (size_t i = 0; i <= n; ++i) {
    if (i > 0) shape = layers_[i - 1]->output_shape(shape);
    // No gradient is ever written for the inputs of layers up to the first one with parameters.
    const bool needs_grad = static_cast<int>(i) > first_param_layer_;
    // An absorbed ReLU's output and its gradient are never stored, nor a streamed gradient.
    const bool absorbed = i > 0 && relu_absorbed_[i - 1] != 0;
    const bool streamed = i > 0 && streams_from_[i - 1] >= 0;
    if (storage_ == Storage::kShapeOnly || absorbed) {
      activations_[i] = Tensor::shape_only(shape);
      grads_of_activations_[i] = Tensor::shape_only(needs_grad ? shape : Shape{0});
    } else {
      activations_[i].resize(shape);
      if (streamed)
        grads_of_activations_[i] = Tensor::shape_only(needs_grad ? shape : Shape{0});
      else
        grads_of_activations_[i].resize(needs_grad ? shape : Shape{0});
    }
  }
}

bool Model::needs_input_grad(int i) const { return i > first_param_layer_; }

int Model::backward_runs_in(int i) const {
  SYNC_CHECK(i >= 0 && i < num_layers(), "layer " << i << " of " << num_layers());
  size_t u = static_cast<size_t>(i);
  if (relu_absorbed_[u]) ++u;
  return streams_to_[u] >= 0 ? streams_to_[u] : static_cast<int>(u);
}

void Model::forward_layer(int i, const StepContext& ctx) {
  SYNC_CHECK(i >= 0 && i < num_layers(), "layer " << i << " of " << num_layers());
  if (storage_ == Storage::kShapeOnly) return;
  StepContext layer_ctx = ctx;
  layer_ctx.layer = static_cast<uint32_t>(i);
  const size_t u = static_cast<size_t>(i);
  if (relu_absorbed_[u]) return;  // layer i + 1 applies it
  if (u > 0 && relu_absorbed_[u - 1]) {
    layers_[u]->forward_after_relu(activations_[u - 1], activations_[u + 1], layer_ctx);
  } else {
    layers_[u]->forward(activations_[u], activations_[u + 1], layer_ctx);
  }
}

void Model::backward_layer(int i) {
  SYNC_CHECK(i >= 0 && i < num_layers(), "layer " << i << " of " << num_layers());
  if (storage_ == Storage::kShapeOnly || i < first_param_layer_) return;
  const size_t u = static_cast<size_t>(i);
  if (relu_absorbed_[u]) return;    // layer i + 1 applied its gradient
  if (streams_to_[u] >= 0) return;  // the layer that takes its input gradient runs it
  if (streams_from_[u] >= 0) {
    // Layer v's input is this layer's output (an absorbed ReLU's input, if one is between).
    const size_t v = static_cast<size_t>(streams_from_[u]);
    const bool after_relu = v == u + 2;
    const Layer& next = *layers_[v];
    const Tensor &x = activations_[u + 1], &y = activations_[v + 1];
    const Tensor& dy = grads_of_activations_[v + 1];
    layers_[u]->backward_streamed(
        activations_[u],
        [&](int64_t image, std::span<float> d) {
          next.input_grad_of_image(x, y, dy, after_relu, image, d);
        },
        needs_input_grad(i) ? &grads_of_activations_[u] : nullptr);
    return;
  }
  if (u > 0 && relu_absorbed_[u - 1]) {
    layers_[u]->backward_after_relu(
        activations_[u - 1], activations_[u + 1], grads_of_activations_[u + 1],
        needs_input_grad(i - 1) ? &grads_of_activations_[u - 1] : nullptr);
  } else {
    layers_[u]->backward(activations_[u], activations_[u + 1], grads_of_activations_[u + 1],
                         needs_input_grad(i) ? &grads_of_activations_[u] : nullptr);
  }
}

Cost Model::forward_cost(int i) const {
  SYNC_CHECK(i >= 0 && i < num_layers() && batch_ > 0,
             "layer " << i << " of " << num_layers() << ", batch " << batch_);
  const size_t u = static_cast<size_t>(i);
  std::optional<Cost>& known = forward_costs_[u];
  if (known) return *known;
  const bool keep = storage_ == Storage::kShapeOnly;
  Cost cost = layers_[u]->forward_cost(activations_[u].shape());
  cost.layer = {Pass::kForward, layers_[u]->kind(), activations_[u].shape(),
                activations_[u + 1].shape()};
  if (keep) known = cost;
  return cost;
}

Cost Model::backward_cost(int i) const {
  SYNC_CHECK(i >= 0 && i < num_layers() && batch_ > 0,
             "layer " << i << " of " << num_layers() << ", batch " << batch_);
  const size_t u = static_cast<size_t>(i);
  std::optional<Cost>& known = backward_costs_[u];
  if (known) return *known;
  const bool keep = storage_ == Storage::kShapeOnly;
  Cost cost = layers_[u]->backward_cost(activations_[u].shape(), needs_input_grad(i));
  if (i < first_param_layer_) {
    cost.flops = cost.bytes = 0;  // backward_layer skips it
  } else {
    cost.layer = {Pass::kBackward, layers_[u]->kind(), activations_[u].shape(),
                  activations_[u + 1].shape()};
  }
  if (keep) known = cost;
  return cost;
}

const Tensor& Model::forward(const Tensor& x, const StepContext& ctx) {
  SYNC_CHECK(x.rank() == static_cast<int>(sample_shape_.size()) + 1,
             "input " << to_string(x.shape()) << " for samples " << to_string(sample_shape_));
  set_batch(x.dim(0));
  SYNC_CHECK(x.shape() == input().shape(),
             "input " << to_string(x.shape()) << " for samples " << to_string(sample_shape_));
  if (storage_ == Storage::kReal) {
    std::memcpy(input().data(), x.data(), static_cast<size_t>(x.numel()) * sizeof(float));
  }
  for (int i = 0; i < num_layers(); ++i) forward_layer(i, ctx);
  return output();
}

double Model::forward_flops(int64_t batch) const {
  Shape shape{batch};
  shape.insert(shape.end(), sample_shape_.begin(), sample_shape_.end());
  double flops = 0;
  for (const auto& layer : layers_) {
    flops += layer->forward_cost(shape).flops;
    shape = layer->output_shape(shape);
  }
  return flops;
}

double Model::backward_flops(int64_t batch) const {
  Shape shape{batch};
  shape.insert(shape.end(), sample_shape_.begin(), sample_shape_.end());
  double flops = 0;
  for (int i = 0; i < num_layers(); ++i) {
    const Layer& layer = *layers_[static_cast<size_t>(i)];
    if (i >= first_param_layer_) flops += layer.backward_cost(shape, needs_input_grad(i)).flops;
    shape = layer.output_shape(shape);
  }
  return flops;
}

}  // namespace syncopate
