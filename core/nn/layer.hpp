#pragma once
// A layer: forward/backward over a batch, with its parameters as views into the model's flat
// buffers, and the FLOPs/bytes its passes cost (for the simulator's cost model).
//
// Shapes always include the batch as the first dimension; images are NCHW.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/base/function_ref.hpp"
#include "core/base/rng.hpp"
#include "core/nn/cost.hpp"
#include "core/tensor/tensor.hpp"

namespace syncopate {

enum class Mode { kTrain, kEval };

// Everything a forward pass may need besides its input (dropout draws its mask from it).
struct StepContext {
  Mode mode = Mode::kTrain;
  uint64_t seed = 0;
  uint32_t worker = 0;
  uint32_t epoch = 0;
  uint32_t step = 0;
  uint32_t layer = 0;     // index of the layer being run; Model::forward_layer fills it in
  uint32_t sublayer = 0;  // inside a residual block: 1 + the sub-layer's index (0: top level)
};

enum class InitScheme { kHe, kXavier };

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string_view kind() const = 0;  // "dense", "conv2d", "maxpool2d", ...
  virtual Shape output_shape(const Shape& input) const = 0;
  virtual int64_t num_params() const { return 0; }
  // Points this layer's weights and gradients at its slices of the model's flat buffers
  // (both num_params() long; empty in cost-only models).
  virtual void bind(std::span<float> /*params*/, std::span<float> /*grads*/) {}
  virtual void init_params(Rng& /*rng*/, InitScheme /*scheme*/) {}
  // y is already sized to output_shape(x.shape()). Caches whatever backward needs.
  virtual void forward(const Tensor& x, Tensor& y, const StepContext& ctx) = 0;
  // Accumulates parameter gradients (+=) and, when dx is not null, writes the input gradient.
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) = 0;
  virtual Cost forward_cost(const Shape& input) const = 0;
  virtual Cost backward_cost(const Shape& input, bool input_grad) const = 0;

  // Fusion with a ReLU directly before this layer, on the CPU. A layer that absorbs_relu()
  // computes forward(relu(x)) in forward_after_relu(x, y), and in backward_after_relu a dx that
  // is the gradient with respect to x, before the ReLU; the model then runs the pair as this
  // layer's passes alone and never stores the ReLU's output (Model::relu_absorbed). Max pooling
  // does: the max of ReLUs is the ReLU of the max, and the same input wins, so the results are
  // the same bits as the two layers' (unless x holds NaNs: a NaN the ReLU would zero can win).
  // Costs (the simulator's model) stay the two layers'.
  virtual bool absorbs_relu() const { return false; }
  virtual void forward_after_relu(const Tensor& x, Tensor& y, const StepContext& ctx);
  virtual void backward_after_relu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx);

  // Streaming a gradient image by image between two layers, on the CPU, so that it is never
  // stored whole (the first convolution's output gradient in the cnn: 6.4 MB at batch 64, written
  // by the pool and read back by the convolution, both from memory). A layer that
  // streams_input_grad() writes the input gradient of one image alone (input_grad_of_image: what
  // backward, or backward_after_relu when after_relu, writes for that image, given the same
  // tensors). A layer that takes_streamed_grad(input) computes in backward_streamed exactly what
  // backward computes, asking dy_of for each image's output gradient, in image order, just
  // before it uses it. The model pairs them (Model::backward_runs_in); the results are the same
  // bits. Costs stay each layer's own.
  using ImageGrad = FunctionRef<void(int64_t image, std::span<float> dy)>;
  virtual bool streams_input_grad() const { return false; }
  virtual void input_grad_of_image(const Tensor& x, const Tensor& y, const Tensor& dy,
                                   bool after_relu, int64_t image, std::span<float> dx) const;
  virtual bool takes_streamed_grad(const Shape& /*input*/) const { return false; }
  virtual void backward_streamed(const Tensor& x, ImageGrad dy_of, Tensor* dx);
};

enum class Bias { kYes, kNo };

// Acts on the last axis: (B, ..., in) -> (B, ..., out). Parameters: weights (out, in), then bias.
std::unique_ptr<Layer> dense(int64_t in, int64_t out, Bias bias = Bias::kYes);
// How a convolution computes on the CPU. kAuto, for 3x3 kernels of stride 1 and padding 1:
// Winograd's F(2x2, 3x3) with 8 input channels or more, unless one image's transformed tiles
// would pass 2^18 x 4 bytes per position (im2col's workspace is smaller); with fewer, direct
// (core/tensor/conv_direct.hpp) for the forward pass and the weight gradient. im2col + GEMM
// otherwise, and for a direct convolution's input gradient. They agree up to rounding, not bit
// for bit.
enum class ConvAlgorithm { kAuto, kIm2col, kWinograd, kDirect };
// Square kernel; padding is symmetric (zeros). Parameters: weights (out, in, k, k), then bias.
// kWinograd or kDirect where the kernel is not 3x3 of stride 1 and padding 1 is a UserError.
std::unique_ptr<Layer> conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                              int64_t stride = 1, int64_t padding = 0, Bias bias = Bias::kYes,
                              ConvAlgorithm algorithm = ConvAlgorithm::kAuto);
// Padding never wins the max (it acts as -infinity).
std::unique_ptr<Layer> maxpool2d(int64_t kernel, int64_t stride, int64_t padding = 0);
std::unique_ptr<Layer> avgpool2d(int64_t kernel, int64_t stride);
std::unique_ptr<Layer> global_avgpool();
std::unique_ptr<Layer> relu();
std::unique_ptr<Layer> flatten();
std::unique_ptr<Layer> dropout(float rate);

}  // namespace syncopate
