// BatchNorm2d (cost-only), the residual composites (ResNet's and the plain skip) and the
// unused-parameter layer.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/nn/layers_common.hpp"
#include "core/nn/layers_extra.hpp"

namespace syncopate {
namespace {

using layers::cost;

class BatchNorm2D final : public Layer {
 public:
  explicit BatchNorm2D(int64_t channels) : channels_(channels) {
    layers::require_arg(channels > 0, "batchnorm2d", "channels", channels, "> 0");
  }
  std::string_view kind() const override { return "batchnorm2d"; }
  Shape output_shape(const Shape& input) const override {
    layers::require_shape(input.size() == 4 && input[1] == channels_, "batchnorm2d", input,
                          "(batch, " + std::to_string(channels_) + ", H, W)");
    return input;
  }
  int64_t num_params() const override { return 2 * channels_; }
  void bind(std::span<float> params, std::span<float> /*grads*/) override { params_ = params; }
  void init_params(Rng& /*rng*/, InitScheme /*scheme*/) override {
    if (params_.empty()) return;
    const auto gamma_end = params_.begin() + channels_;
    std::fill(params_.begin(), gamma_end, 1.0f);
    std::fill(gamma_end, params_.end(), 0.0f);
  }
  void forward(const Tensor& /*x*/, Tensor& /*y*/, const StepContext& /*ctx*/) override {
    throw InternalError("batchnorm2d: cost-only layer; its forward math is not implemented");
  }
  void backward(const Tensor& /*x*/, const Tensor& /*y*/, const Tensor& /*dy*/,
                Tensor* /*dx*/) override {
    throw InternalError("batchnorm2d: cost-only layer; its backward math is not implemented");
  }
  // Estimates per element: forward mean, variance, normalise, scale and shift (~7 flops, x read
  // twice, y written); backward two reductions and the input gradient (~9 flops).
  Cost forward_cost(const Shape& input) const override {
    const double n = static_cast<double>(numel(input));
    return cost(7 * n, 3 * n + 2.0 * static_cast<double>(channels_), OpKind::kElementwise);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const double n = static_cast<double>(numel(input));
    return cost(input_grad ? 9 * n : 4 * n, (input_grad ? 5 : 4) * n, OpKind::kElementwise);
  }

 private:
  int64_t channels_;
  std::span<float> params_;
};

using LayerList = std::vector<std::unique_ptr<Layer>>;

// What follows the sum of the branches: ResNet's ReLU, or nothing (a plain skip connection).
enum class AfterAdd { kRelu, kNone };

class Residual final : public Layer {
 public:
  Residual(LayerList main, LayerList shortcut, AfterAdd after = AfterAdd::kRelu)
      : main_(std::move(main)), shortcut_(std::move(shortcut)), relu_(after == AfterAdd::kRelu) {
    SYNC_CHECK(!main_.empty(), "residual block without a main branch");
    main_acts_.resize(main_.size());
    main_grads_.resize(main_.size());
    short_acts_.resize(shortcut_.size());
    short_grads_.resize(shortcut_.size());
  }
  std::string_view kind() const override { return "residual"; }
  Shape output_shape(const Shape& input) const override {
    const Shape a = branch_shape(main_, input), b = branch_shape(shortcut_, input);
    layers::require_shape(a == b, "residual", input,
                          "an input whose main branch output " + to_string(a) +
                              " matches its shortcut output " + to_string(b));
    return a;
  }
  int64_t num_params() const override {
    int64_t n = 0;
    for (const auto* list : {&main_, &shortcut_}) {
      for (const auto& layer : *list) n += layer->num_params();
    }
    return n;
  }
  void bind(std::span<float> params, std::span<float> grads) override {
    size_t offset = 0;
    for (auto* list : {&main_, &shortcut_}) {
      for (auto& layer : *list) {
        const size_t count = static_cast<size_t>(layer->num_params());
        if (params.empty()) {
          layer->bind({}, {});
        } else {
          layer->bind(params.subspan(offset, count), grads.subspan(offset, count));
        }
        offset += count;
      }
    }
  }
  // ResNet's: He for every sub-layer. A plain skip: as the Model does, He before a ReLU,
  // Xavier otherwise.
  void init_params(Rng& rng, InitScheme /*scheme*/) override {
    for (auto* list : {&main_, &shortcut_}) {
      for (size_t j = 0; j < list->size(); ++j) {
        const bool before_relu = j + 1 < list->size() && (*list)[j + 1]->kind() == "relu";
        const InitScheme scheme = relu_ || before_relu ? InitScheme::kHe : InitScheme::kXavier;
        (*list)[j]->init_params(rng, scheme);
      }
    }
  }
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override {
    const Tensor& a = run_forward(main_, main_acts_, x, ctx, 1);
    const Tensor& b =
        shortcut_.empty() ? x : run_forward(shortcut_, short_acts_, x, ctx, 1 + main_.size());
    const int64_t n = y.numel();
    for (int64_t i = 0; i < n; ++i) {
      const float v = a[i] + b[i];
      y[i] = !relu_ || v > 0.0f ? v : 0.0f;
    }
  }
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override {
    sum_grad_.resize(y.shape());
    const int64_t n = y.numel();
    for (int64_t i = 0; i < n; ++i) {
      const float g = dy[i];  // read unconditionally, so that the loop vectorises (see ReLU)
      sum_grad_[i] = !relu_ || y[i] > 0.0f ? g : 0.0f;
    }
    run_backward(main_, main_acts_, main_grads_, x, dx);
    if (shortcut_.empty()) {
      if (dx) {
        for (int64_t i = 0; i < x.numel(); ++i) (*dx)[i] += sum_grad_[i];
      }
      return;
    }
    if (dx) short_dx_.resize(x.shape());
    run_backward(shortcut_, short_acts_, short_grads_, x, dx ? &short_dx_ : nullptr);
    if (dx) {
      for (int64_t i = 0; i < x.numel(); ++i) (*dx)[i] += short_dx_[i];
    }
  }
  // ResNet's block reports kConv; a plain skip the kind of its costliest layer.
  Cost forward_cost(const Shape& input) const override {
    Cost total = cost(0, 0, OpKind::kConv);
    double most = -1;
    for (const auto* list : {&main_, &shortcut_}) {
      Shape shape = input;
      for (const auto& layer : *list) {
        const Cost part = layer->forward_cost(shape);
        add(total, part);
        if (!relu_ && part.flops > most) {
          most = part.flops;
          total.kind = part.kind;
        }
        shape = layer->output_shape(shape);
      }
    }
    const double n = static_cast<double>(numel(output_shape(input)));
    add(total, relu_ ? cost(2 * n, 3 * n, OpKind::kConv) : cost(n, 3 * n, OpKind::kConv));
    return total;
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const double n = static_cast<double>(numel(output_shape(input)));
    Cost total = relu_ ? cost(n, 3 * n, OpKind::kConv) : cost(0, 0, OpKind::kConv);  // ReLU mask
    if (!relu_) total.kind = forward_cost(input).kind;
    for (const auto* list : {&main_, &shortcut_}) {
      Shape shape = input;
      for (size_t j = 0; j < list->size(); ++j) {
        add(total, (*list)[j]->backward_cost(shape, j > 0 || input_grad));
        shape = (*list)[j]->output_shape(shape);
      }
    }
    if (input_grad) {
      const double in = static_cast<double>(numel(input));
      add(total, cost(in, 3 * in, OpKind::kConv));  // sum of the two branches' input gradients
    }
    return total;
  }

 private:
  static Shape branch_shape(const LayerList& list, Shape shape) {
    for (const auto& layer : list) shape = layer->output_shape(shape);
    return shape;
  }
  static void add(Cost& total, const Cost& part) {
    total.flops += part.flops;
    total.bytes += part.bytes;
  }
  // Runs a branch; acts[j] receives layer j's output. Returns the branch output. Sub-layer j
  // runs as sublayer first + j (dropout draws its mask from it).
  static const Tensor& run_forward(LayerList& list, std::vector<Tensor>& acts, const Tensor& x,
                                   const StepContext& ctx, size_t first) {
    StepContext sub = ctx;
    for (size_t j = 0; j < list.size(); ++j) {
      const Tensor& in = j == 0 ? x : acts[j - 1];
      acts[j].resize(list[j]->output_shape(in.shape()));
      sub.sublayer = static_cast<uint32_t>(first + j);
      list[j]->forward(in, acts[j], sub);
    }
    return acts.back();
  }
  // Back through a branch whose output gradient is sum_grad_; grads[j] is layer j's input
  // gradient (j > 0); the first layer's goes to dx (skipped when null).
  void run_backward(LayerList& list, std::vector<Tensor>& acts, std::vector<Tensor>& grads,
                    const Tensor& x, Tensor* dx) {
    for (size_t j = list.size(); j-- > 0;) {
      const Tensor& in = j == 0 ? x : acts[j - 1];
      const Tensor& grad_out = j + 1 == list.size() ? sum_grad_ : grads[j + 1];
      Tensor* target = dx;
      if (j > 0) {
        grads[j].resize(in.shape());
        target = &grads[j];
      }
      list[j]->backward(in, acts[j], grad_out, target);
    }
  }

  LayerList main_, shortcut_;
  bool relu_;
  std::vector<Tensor> main_acts_, main_grads_, short_acts_, short_grads_;
  Tensor sum_grad_, short_dx_;
};

class UnusedConv2D final : public Layer {
 public:
  UnusedConv2D(int64_t in, int64_t out, int64_t kernel) : in_(in), out_(out), k_(kernel) {
    layers::require_arg(in > 0, "unused_conv2d", "in_channels", in, "> 0");
    layers::require_arg(out > 0, "unused_conv2d", "out_channels", out, "> 0");
    layers::require_arg(kernel > 0, "unused_conv2d", "kernel", kernel, "> 0");
  }
  std::string_view kind() const override { return "unused_conv2d"; }
  Shape output_shape(const Shape& input) const override { return input; }
  int64_t num_params() const override { return out_ * in_ * k_ * k_ + out_; }
  void bind(std::span<float> params, std::span<float> /*grads*/) override { params_ = params; }
  void init_params(Rng& rng, InitScheme scheme) override {
    if (params_.empty()) return;
    const int64_t taps = k_ * k_, weights = out_ * in_ * taps;
    layers::fill_normal(params_.first(static_cast<size_t>(weights)), rng,
                        layers::init_std(scheme, in_ * taps, out_ * taps));
    std::fill(params_.begin() + weights, params_.end(), 0.0f);
  }
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    std::memcpy(y.data(), x.data(), static_cast<size_t>(x.numel()) * sizeof(float));
  }
  void backward(const Tensor& /*x*/, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) override {
    if (dx) std::memcpy(dx->data(), dy.data(), static_cast<size_t>(dy.numel()) * sizeof(float));
  }
  Cost forward_cost(const Shape& /*input*/) const override {
    return cost(0, 0, OpKind::kElementwise);
  }
  Cost backward_cost(const Shape& /*input*/, bool /*input_grad*/) const override {
    return cost(0, 0, OpKind::kElementwise);
  }

 private:
  int64_t in_, out_, k_;
  std::span<float> params_;
};

}  // namespace

std::unique_ptr<Layer> batchnorm2d(int64_t channels) {
  return std::make_unique<BatchNorm2D>(channels);
}

std::unique_ptr<Layer> residual(std::vector<std::unique_ptr<Layer>> main,
                                std::vector<std::unique_ptr<Layer>> shortcut) {
  return std::make_unique<Residual>(std::move(main), std::move(shortcut));
}

std::unique_ptr<Layer> skip(std::vector<std::unique_ptr<Layer>> layers) {
  return std::make_unique<Residual>(std::move(layers), LayerList{}, AfterAdd::kNone);
}

std::unique_ptr<Layer> bottleneck(int64_t in, int64_t width, int64_t out, int64_t stride) {
  LayerList main, shortcut;
  main.push_back(conv2d(in, width, 1, 1, 0, Bias::kNo));
  main.push_back(batchnorm2d(width));
  main.push_back(relu());
  main.push_back(conv2d(width, width, 3, stride, 1, Bias::kNo));
  main.push_back(batchnorm2d(width));
  main.push_back(relu());
  main.push_back(conv2d(width, out, 1, 1, 0, Bias::kNo));
  main.push_back(batchnorm2d(out));
  if (stride != 1 || in != out) {
    shortcut.push_back(conv2d(in, out, 1, stride, 0, Bias::kNo));
    shortcut.push_back(batchnorm2d(out));
  }
  return residual(std::move(main), std::move(shortcut));
}

std::unique_ptr<Layer> unused_conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel) {
  return std::make_unique<UnusedConv2D>(in_channels, out_channels, kernel);
}

}  // namespace syncopate
