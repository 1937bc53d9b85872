#pragma once
// A sequential model that trains on one CUDA device, with the CPU Model's flat parameter
// layout: all parameters in ONE device buffer, all gradients in another, layers in order, each
// layer's weights then its bias (dense w is (out, in), conv w is (oc, c, k, k)).
//
// A CudaModel is built from the model's description (ModelSpec, core/nn/model_spec.hpp), the
// same one the CPU Model is built from: zoo_spec(name), or Model::spec(). It runs the layer
// kinds dense (with bias, over the last axis or the flattened sample), conv2d (with bias),
// maxpool2d (no padding), avgpool2d, global_avgpool, relu, flatten, dropout, sigmoid, tanh,
// gelu, layernorm, rmsnorm, embedding (as the first layer: its ids come from the host) and
// residual (a skip around a list of these, recursively), and refuses others (UserError:
// attention, swiglu, tied_dense, batchnorm2d, bottleneck, unused_conv2d).
// from_cpu() checks a description against a CPU Model (kinds, parameter counts and offsets,
// output sizes) and copies its parameters.
//
// Usage mirrors the CPU Model:
//   model.set_batch(B); model.set_input(x); model.forward(ctx);
//   model.softmax_cross_entropy(labels);   // fills the output gradient
//   model.zero_grads(); model.backward();  // gradients accumulate
//   optimizer.step(model.params(), model.grads(), lr, step, model.stream());
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/device.hpp"
#include "backends/cuda/kernels.hpp"
#include "core/comm/comm.hpp"
#include "core/nn/layer.hpp"
#include "core/nn/loss.hpp"
#include "core/nn/model_spec.hpp"
#include "core/optim/optim.hpp"
#include "core/tensor/tensor.hpp"

namespace syncopate {
class Model;
}

namespace syncopate::cuda {

// One layer of a CudaModel at the current batch: its shapes, where its parameters are, and
// its device state. A residual block holds its layers' runs and their activations.
struct LayerRun {
  const LayerSpec* spec = nullptr;
  Shape in, out;
  size_t offset = 0;                       // its parameters in the model's parameter buffer
  Mode last_mode = Mode::kEval;            // dropout backward
  DeviceBuffer<int32_t> argmax;            // maxpool2d
  DeviceBuffer<float> mask;                // dropout
  DeviceBuffer<float> stats;               // layernorm, rmsnorm: (rows, 2) mean and inv
  std::vector<LayerRun> inner;             // residual: its layers
  std::vector<DeviceBuffer<float>> acts;   // residual: inner[j]'s output
  std::vector<DeviceBuffer<float>> grads;  // residual: inner[j]'s input gradient (j > 0)
};

// Throws UserError naming the first layer of `spec` this backend does not run (a kind without
// kernels, conv2d without bias, maxpool2d with padding). Needs no device.
void check_runs_on_cuda(const ModelSpec& spec);

// Throws UserError unless `spec` describes `cpu`: same sample shape, layer kinds, parameter
// counts and offsets, and output sizes (at batch 2). Needs no device.
void check_matches(const Model& cpu, const ModelSpec& spec);

class CudaModel {
 public:
  // Throws UserError for a layer this backend does not run (see above).
  explicit CudaModel(ModelSpec spec, MathMode math = MathMode::kFp32);
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  // Checks `spec` against `cpu` and copies cpu's parameters to the device.
  static std::unique_ptr<CudaModel> from_cpu(const Model& cpu, ModelSpec spec,
                                             MathMode math = MathMode::kFp32);

  const ModelSpec& spec() const { return spec_; }
  int num_layers() const { return static_cast<int>(spec_.layers.size()); }
  int64_t num_params() const { return num_params_; }
  BlockRange param_range(int i) const { return ranges_[static_cast<size_t>(i)]; }
  float* params() { return params_.data(); }  // device, num_params()
  float* grads() { return grads_.data(); }    // device, num_params()
  const float* params() const { return params_.data(); }
  const float* grads() const { return grads_.data(); }
  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }

  // Host copies; each waits for the device before returning.
  void set_params(std::span<const float> host);
  void get_params(std::span<float> host) const;
  void get_grads(std::span<float> host) const;
  void get_output(std::span<float> host) const;  // output_shape() elements
  // Fills the gradient of the loss with respect to the output (output_shape() elements).
  void set_output_grad(std::span<const float> host);

  void zero_grads();
  void set_batch(int64_t batch);
  int64_t batch() const { return batch_; }
  Shape output_shape() const { return shapes_.back(); }
  // batch() * sample numel; token ids (an embedding first) are checked here (UserError).
  void set_input(std::span<const float> host);

  void forward_layer(int i, const StepContext& ctx);
  // As the CPU Model: layers before the first one with parameters skip backward, and that
  // layer does not compute its input gradient.
  void backward_layer(int i);
  void forward(const StepContext& ctx);
  void backward();

  // Losses of the current output; they set the output gradient (of the mean loss).
  // labels: batch() class indices stored as floats; targets: output-sized.
  LossResult softmax_cross_entropy(std::span<const float> labels);
  LossResult mse(std::span<const float> targets);

 private:
  // A layer's passes on x (run.in) and y (run.out); dx may be null (not needed).
  void forward_run(LayerRun& run, const float* x, float* y, const StepContext& ctx);
  void backward_run(LayerRun& run, const float* x, const float* y, const float* dy, float* dx);
  void forward_residual(LayerRun& run, const float* x, float* y, const StepContext& ctx);
  void backward_residual(LayerRun& run, const float* x, const float* dy, float* dx);
  void forward_dense(const LayerRun& run, const float* x, float* y);
  void forward_conv(const LayerRun& run, const float* x, float* y);
  void backward_dense(const LayerRun& run, const float* x, const float* dy, float* dx);
  void backward_conv(const LayerRun& run, const float* x, const float* dy, float* dx);
  // Sets run's shapes from `in` and sizes its buffers and the shared scratch sizes.
  void prepare(LayerRun& run, const Shape& in);
  LossResult sum_losses(int64_t terms, int64_t divisor, bool with_correct);

  ModelSpec spec_;
  Stream stream_;
  CublasHandle cublas_;
  int64_t num_params_ = 0;
  std::vector<BlockRange> ranges_;
  DeviceBuffer<float> params_, grads_;

  int64_t batch_ = 0;
  std::vector<Shape> shapes_;                     // shapes_[i] is layer i's input
  std::vector<DeviceBuffer<float>> activations_;  // same indexing, plus the output
  std::vector<DeviceBuffer<float>> activation_grads_;
  std::vector<LayerRun> runs_;  // one per layer
  int first_param_layer_ = 0;   // backward stops there, as the CPU Model
  int64_t col_size_ = 0, scratch_size_ = 0, ones_size_ = 0;  // set by prepare()
  DeviceBuffer<float> col_, scratch_, ones_;
  DeviceBuffer<int32_t> token_offsets_, token_rows_;  // an embedding's ids (math::token_rows)
  DeviceBuffer<float> labels_, loss_terms_, correct_;
};

// core/optim's optimizers on the device: same configuration, same update rules (PyTorch's),
// same state layout (SGD with momentum: the momentum buffer; Adam/AdamW: m then v), so a
// strategy can average, reset or keep the state. The step number (from 1) and the learning
// rate are explicit, as on the CPU.
class CudaOptimizer {
 public:
  CudaOptimizer(const OptimizerConfig& config, int64_t num_params);  // validates config
  void step(float* params, const float* grads, float lr, int64_t step, cudaStream_t stream);
  float* state() { return state_.data(); }  // device; null for plain SGD
  int64_t state_size() const { return static_cast<int64_t>(state_.size()); }
  void reset(cudaStream_t stream);  // state filled with 0
  const OptimizerConfig& config() const { return config_; }

 private:
  OptimizerConfig config_;
  int64_t n_ = 0;
  DeviceBuffer<float> state_;
};

// One training step on a batch held in host memory: input, forward, softmax cross-entropy,
// backward (gradients zeroed first), optimizer step. Returns the batch's loss and hits.
LossResult train_step(CudaModel& model, CudaOptimizer& optimizer, std::span<const float> x,
                      std::span<const float> labels, const StepContext& ctx, float lr,
                      int64_t step);

}  // namespace syncopate::cuda
