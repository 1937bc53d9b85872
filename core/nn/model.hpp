#pragma once
// A sequential model whose parameters live in ONE contiguous buffer and gradients in another;
// each layer's weights are views into them. Averaging a model is one collective on params();
// a DDP bucket is a contiguous slice of grads().
//
// The Trainer drives passes layer by layer (so the Executor can account each layer's cost and a
// strategy can start a bucket's allreduce as soon as backward has filled it):
//   model.set_batch(B); fill model.input(); for i in 0..L-1: forward_layer(i, ctx);
//   fill model.output_grad() from the loss; for i in L-1..0: backward_layer(i);
// A cost-only model has shape-only activations and no parameter storage: the same calls then
// only yield shapes and costs.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/comm/comm.hpp"
#include "core/nn/layer.hpp"
#include "core/nn/model_spec.hpp"

namespace syncopate {

enum class Storage { kReal, kShapeOnly };

class Model {
 public:
  // sample_shape excludes the batch dimension, e.g. {1, 28, 28}.
  Model(std::string name, Shape sample_shape, std::vector<std::unique_ptr<Layer>> layers,
        Storage storage = Storage::kReal);
  // The layers `spec` describes (make_layer), in order; spec() keeps the description.
  explicit Model(const ModelSpec& spec, Storage storage = Storage::kReal);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& name() const { return name_; }
  const Shape& sample_shape() const { return sample_shape_; }
  Shape output_shape(int64_t batch) const;
  Storage storage() const { return storage_; }
  // The description the model was built from (what other builds of it, e.g. on CUDA, start
  // from); empty for a model built from a list of layers.
  const std::optional<ModelSpec>& spec() const { return spec_; }

  int num_layers() const { return static_cast<int>(layers_.size()); }
  const Layer& layer(int i) const { return *layers_[static_cast<size_t>(i)]; }

  int64_t num_params() const { return num_params_; }
  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }
  std::span<float> grads() { return grads_; }
  std::span<const float> grads() const { return grads_; }
  // Where layer i's parameters sit in the flat buffers.
  BlockRange param_range(int i) const { return ranges_[static_cast<size_t>(i)]; }

  // He initialisation for layers followed by ReLU, Xavier otherwise; biases zero. Keyed by
  // (seed, layer index), so the result does not depend on anything else.
  void init(uint64_t seed);
  void zero_grads();

  void set_batch(int64_t batch);
  int64_t batch() const { return batch_; }
  Tensor& input() { return activations_.front(); }
  const Tensor& output() const { return activations_.back(); }
  Tensor& output_grad() { return grads_of_activations_.back(); }
  void forward_layer(int i, const StepContext& ctx);
  // Nothing upstream of the first layer with parameters needs a gradient: that layer does not
  // compute its input gradient (so neither does layer 0), and layers before it skip backward.
  void backward_layer(int i);
  bool needs_input_grad(int i) const;
  // Whether layer i is a ReLU that layer i + 1 runs inside its own passes (Layer::absorbs_relu):
  // then forward_layer(i) and backward_layer(i) do nothing, layer i + 1's passes do both, and
  // the ReLU's output is never stored. The results are the same bits.
  bool relu_absorbed(int i) const { return relu_absorbed_[static_cast<size_t>(i)] != 0; }
  // The layer whose backward_layer runs layer i's backward pass: i itself, or for an absorbed
  // ReLU and for a layer that streams its input gradient (Layer::streams_input_grad, max
  // pooling) into the layer before it (with an absorbed ReLU between them or not) that takes it
  // image by image (Layer::takes_streamed_grad, a convolution on the im2col path), that
  // layer. The gradient between such a pair is then never stored whole. The same bits.
  int backward_runs_in(int i) const;
  // Layer i's cost at the current batch (a shape-only model computes it once per batch size).
  Cost forward_cost(int i) const;
  Cost backward_cost(int i) const;

  // Whole passes, for evaluation and tests.
  const Tensor& forward(const Tensor& x, const StepContext& ctx);
  double forward_flops(int64_t batch) const;
  double backward_flops(int64_t batch) const;

 private:
  std::string name_;
  Shape sample_shape_;
  std::optional<ModelSpec> spec_;
  std::vector<std::unique_ptr<Layer>> layers_;
  Storage storage_;
  int64_t num_params_ = 0;
  std::vector<float> param_storage_, grad_storage_;
  std::span<float> params_, grads_;
  std::vector<BlockRange> ranges_;
  int first_param_layer_ = 0;        // layers before it have no parameters
  std::vector<char> relu_absorbed_;  // per layer: see relu_absorbed()
  std::vector<int> streams_from_;    // per layer: the layer whose input gradient it pulls, or -1
  std::vector<int> streams_to_;      // per layer: the layer that pulls its input gradient, or -1
  int64_t batch_ = 0;
  std::vector<Tensor> activations_;           // activations_[i] is layer i's input
  std::vector<Tensor> grads_of_activations_;  // same shapes
  // Shape-only: per layer at the current batch, filled on first use (a cost walks every
  // sub-layer's shapes, which a cost-only step would otherwise repeat for every layer of every
  // step). Its shapes view activations_, whose shapes only set_batch changes in that mode.
  mutable std::vector<std::optional<Cost>> forward_costs_, backward_costs_;
};

// A model built from its description (real parameters, or shape-only for cost-only runs).
std::unique_ptr<Model> make_model(const ModelSpec& spec, Storage storage = Storage::kReal);

// The model zoo (descriptions: zoo_spec, core/nn/model_spec.hpp). Sample shapes: mlp {1,28,28}
// (flattened inside), cnn {1,28,28}, nfnet {3,64,64}, resnet50 {3,224,224}; the transformers
// gpt2, gpt2-medium, gpt2-large, gpt2-xl {1024} and llama-7b {2048} (token ids, see
// core/nn/transformer.hpp). nfnet and resnet50 are meant for cost-only use but are real models
// when built with Storage::kReal; the transformers hold cost-only layers (tied_dense, swiglu).
std::unique_ptr<Model> make_model(const std::string& name, Storage storage = Storage::kReal);
std::vector<std::string> model_names();

}  // namespace syncopate
