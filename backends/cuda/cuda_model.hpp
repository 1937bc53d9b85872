#pragma once
// A sequential model that trains on one CUDA device, with the CPU Model's flat parameter
// layout: all parameters in ONE device buffer, all gradients in another, layers in order, each
// layer's weights then its bias (dense w is (out, in), conv w is (oc, c, k, k)).
//
// The CPU layers do not expose their hyper-parameters (kernel, stride, padding, dropout rate),
// so a CudaModel is built from a plain layer description list (LayerSpec). cuda_zoo_specs()
// gives the lists of the zoo's mlp and cnn; from_cpu() checks a list against a CPU Model
// (kinds, parameter counts and offsets, output sizes) and copies its parameters.
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
#include "core/optim/optim.hpp"
#include "core/tensor/tensor.hpp"

namespace syncopate {
class Model;
}

namespace syncopate::cuda {

enum class LayerKind {
  kDense,
  kConv2d,
  kMaxPool2d,
  kAvgPool2d,
  kGlobalAvgPool,
  kRelu,
  kFlatten,
  kDropout
};

// The CPU Layer::kind() name: "dense", "conv2d", "maxpool2d", "avgpool2d", "global_avgpool",
// "relu", "flatten", "dropout".
std::string_view to_string(LayerKind kind);

struct LayerSpec {
  LayerKind kind = LayerKind::kRelu;
  int64_t in = 0, out = 0;  // dense features or conv channels
  int64_t kernel = 0, stride = 1, padding = 0;
  float rate = 0.0f;  // dropout
};

// Same arguments as the CPU factories in core/nn/layer.hpp.
LayerSpec dense_spec(int64_t in, int64_t out);
LayerSpec conv2d_spec(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1,
                      int64_t padding = 0);
LayerSpec maxpool2d_spec(int64_t kernel, int64_t stride);
LayerSpec avgpool2d_spec(int64_t kernel, int64_t stride);
LayerSpec global_avgpool_spec();
LayerSpec relu_spec();
LayerSpec flatten_spec();
LayerSpec dropout_spec(float rate);

int64_t num_params(const LayerSpec& spec);
// Input and output include the batch; throws UserError if the input does not fit the layer.
Shape output_shape(const LayerSpec& spec, const Shape& input);

// The layer lists of the zoo models the CUDA backend runs ("mlp", "cnn"), with their sample
// shapes. Throws UserError for other names.
struct ModelSpec {
  std::string name;
  Shape sample_shape;  // without the batch
  std::vector<LayerSpec> layers;
};
ModelSpec cuda_zoo_spec(const std::string& name);

// Throws UserError unless `spec` describes `cpu`: same sample shape, layer kinds, parameter
// counts and offsets, and output sizes (at batch 2). Needs no device.
void check_matches(const Model& cpu, const ModelSpec& spec);

class CudaModel {
 public:
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
  void set_input(std::span<const float> host);  // batch() * sample numel

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
  void forward_dense(int i);
  void forward_conv(int i);
  void backward_dense(int i, float* dx);
  void backward_conv(int i, float* dx);
  ConvGeometry conv_geometry(int i) const;
  PoolGeometry pool_geometry(int i) const;
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
  std::vector<DeviceBuffer<int32_t>> argmax_;  // maxpool layers
  std::vector<DeviceBuffer<float>> masks_;     // dropout layers
  std::vector<Mode> last_mode_;                // per layer, for dropout backward
  int first_param_layer_ = 0;                  // backward stops there, as the CPU Model
  DeviceBuffer<float> col_, scratch_, ones_;
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
