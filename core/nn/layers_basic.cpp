// Dense, ReLU, Flatten and Dropout.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/nn/layer.hpp"
#include "core/nn/layers_common.hpp"
#include "core/tensor/gemm.hpp"

namespace syncopate {
namespace {

using layers::cost;

// y (R, out) = x (R, in) * W^T + b over the R = numel / in rows of x (the last axis is in), with
// W (out, in) row-major followed by b (out) in the buffer.
class Dense final : public Layer {
 public:
  Dense(int64_t in, int64_t out, Bias bias) : in_(in), out_(out), bias_(bias == Bias::kYes) {
    layers::require_arg(in > 0, "dense", "in", in, "> 0");
    layers::require_arg(out > 0, "dense", "out", out, "> 0");
  }
  std::string_view kind() const override { return "dense"; }
  Shape output_shape(const Shape& input) const override {
    layers::require_shape(input.size() >= 2 && input.back() == in_, "dense", input,
                          "(batch, ..., " + std::to_string(in_) + ")");
    Shape shape = input;
    shape.back() = out_;
    return shape;
  }
  int64_t num_params() const override { return out_ * in_ + (bias_ ? out_ : 0); }
  void bind(std::span<float> params, std::span<float> grads) override {
    if (params.empty()) return;
    const size_t nw = static_cast<size_t>(out_ * in_);
    w_ = params.first(nw);
    b_ = params.subspan(nw);
    dw_ = grads.first(nw);
    db_ = grads.subspan(nw);
  }
  void init_params(Rng& rng, InitScheme scheme) override {
    if (w_.empty()) return;
    layers::fill_normal(w_, rng, layers::init_std(scheme, in_, out_));
    std::fill(b_.begin(), b_.end(), 0.0f);
  }
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    const int64_t rows = x.numel() / in_;
    if (bias_) {
      for (int64_t r = 0; r < rows; ++r) std::copy(b_.begin(), b_.end(), y.data() + r * out_);
    }
    gemm(Trans::kNo, Trans::kYes, 1.0f, matrix(x.span(), rows, in_), matrix(w_, out_, in_),
         bias_ ? 1.0f : 0.0f, matrix(y.span(), rows, out_));
  }
  void backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) override {
    const int64_t rows = x.numel() / in_;
    gemm(Trans::kYes, Trans::kNo, 1.0f, matrix(dy.span(), rows, out_), matrix(x.span(), rows, in_),
         1.0f, matrix(dw_, out_, in_));
    if (bias_) add_column_sums(matrix(dy.span(), rows, out_), db_);
    if (dx) {
      gemm(Trans::kNo, Trans::kNo, 1.0f, matrix(dy.span(), rows, out_), matrix(w_, out_, in_), 0.0f,
           matrix(dx->span(), rows, in_));
    }
  }
  Cost forward_cost(const Shape& input) const override {
    const double b = rows(input), in = in_, out = out_, bias = bias_ ? 1.0 : 0.0;
    return cost(2 * b * in * out + bias * b * out, b * in + in * out + bias * out + b * out,
                OpKind::kGemm);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const double b = rows(input), in = in_, out = out_, bias = bias_ ? 1.0 : 0.0;
    // dW += dy^T x, db += colsum(dy) [, dx = dy W].
    double flops = 2 * b * in * out + bias * b * out;
    double moved = b * out + b * in + 2 * in * out + bias * 2 * out;
    if (input_grad) {
      flops += 2 * b * in * out;
      moved += in * out + b * in;
    }
    return cost(flops, moved, OpKind::kGemm);
  }

 private:
  double rows(const Shape& input) const {
    return static_cast<double>(numel(input)) / static_cast<double>(in_);
  }
  int64_t in_, out_;
  bool bias_;
  std::span<float> w_, b_, dw_, db_;
};

class ReLU final : public Layer {
 public:
  std::string_view kind() const override { return "relu"; }
  Shape output_shape(const Shape& input) const override { return input; }
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    const float* in = x.data();
    float* out = y.data();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
  }
  void backward(const Tensor& /*x*/, const Tensor& y, const Tensor& dy, Tensor* dx) override {
    if (!dx) return;
    const float* out = y.data();
    const float* g = dy.data();
    float* d = dx->data();
    const int64_t n = y.numel();
    // g[i] is read whatever the mask: a load under the condition keeps the loop scalar and
    // branchy (a misprediction per element on a ReLU's random signs, 15% of the cnn step).
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i];
      d[i] = out[i] > 0.0f ? gi : 0.0f;
    }
  }
  Cost forward_cost(const Shape& input) const override {
    const double n = static_cast<double>(numel(input));
    return cost(n, 2 * n, OpKind::kElementwise);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const double n = input_grad ? static_cast<double>(numel(input)) : 0.0;
    return cost(n, 3 * n, OpKind::kElementwise);
  }
};

class Flatten final : public Layer {
 public:
  std::string_view kind() const override { return "flatten"; }
  Shape output_shape(const Shape& input) const override {
    layers::require_shape(!input.empty(), "flatten", input, "(batch, ...)");
    int64_t features = 1;
    for (size_t i = 1; i < input.size(); ++i) features *= input[i];
    return {input[0], features};
  }
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    std::memcpy(y.data(), x.data(), static_cast<size_t>(x.numel()) * sizeof(float));
  }
  void backward(const Tensor& /*x*/, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) override {
    if (dx) std::memcpy(dx->data(), dy.data(), static_cast<size_t>(dy.numel()) * sizeof(float));
  }
  Cost forward_cost(const Shape& input) const override {
    return cost(0, 2.0 * static_cast<double>(numel(input)), OpKind::kElementwise);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const double n = input_grad ? static_cast<double>(numel(input)) : 0.0;
    return cost(0, 2 * n, OpKind::kElementwise);
  }
};

// Inverted dropout: in training, y = x * m with m = 1/(1-rate) kept, 0 dropped; identity in eval.
// The mask is drawn from Rng (seed, worker, epoch + 2^20 sublayer, kDropout, extra = step * 4096 +
// layer index): distinct for every step, layer and sub-layer of a residual block (for up to 2^20
// steps and epochs and 4096 layers), reproducible anywhere.
class Dropout final : public Layer {
 public:
  explicit Dropout(float rate) : rate_(rate) {
    if (!(rate >= 0.0f && rate < 1.0f)) {
      throw UserError("dropout: rate = " + std::to_string(rate) + " is invalid; allowed: [0, 1)");
    }
  }
  std::string_view kind() const override { return "dropout"; }
  Shape output_shape(const Shape& input) const override { return input; }
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override {
    const int64_t n = x.numel();
    train_ = ctx.mode == Mode::kTrain && rate_ > 0.0f;
    if (!train_) {
      std::memcpy(y.data(), x.data(), static_cast<size_t>(n) * sizeof(float));
      return;
    }
    if (static_cast<int64_t>(mask_.size()) < n) mask_.resize(static_cast<size_t>(n));
    const uint32_t extra = ctx.step * 4096u + ctx.layer;
    Rng rng({ctx.seed, ctx.worker, ctx.epoch + (ctx.sublayer << 20), RngPurpose::kDropout, extra});
    // uniform() has 24 bits: keep when u >= rate, i.e. when the 24-bit draw >= threshold.
    const uint32_t threshold = static_cast<uint32_t>(std::ceil(rate_ * 16777216.0));
    const float scale = 1.0f / (1.0f - rate_);
    for (int64_t i = 0; i < n; ++i) {
      mask_[static_cast<size_t>(i)] = (rng.next_u32() >> 8) >= threshold ? scale : 0.0f;
    }
    const float* in = x.data();
    float* out = y.data();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * mask_[static_cast<size_t>(i)];
  }
  void backward(const Tensor& /*x*/, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) override {
    if (!dx) return;
    const int64_t n = dy.numel();
    if (!train_) {
      std::memcpy(dx->data(), dy.data(), static_cast<size_t>(n) * sizeof(float));
      return;
    }
    const float* g = dy.data();
    float* d = dx->data();
    for (int64_t i = 0; i < n; ++i) d[i] = g[i] * mask_[static_cast<size_t>(i)];
  }
  Cost forward_cost(const Shape& input) const override {
    const double n = static_cast<double>(numel(input));
    return cost(n, 3 * n, OpKind::kElementwise);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const double n = input_grad ? static_cast<double>(numel(input)) : 0.0;
    return cost(n, 3 * n, OpKind::kElementwise);
  }

 private:
  float rate_;
  bool train_ = false;
  std::vector<float> mask_;
};

}  // namespace

void Layer::forward_after_relu(const Tensor& /*x*/, Tensor& /*y*/, const StepContext& /*ctx*/) {
  SYNC_CHECK(false, kind() << " does not absorb a ReLU");
}
void Layer::backward_after_relu(const Tensor& /*x*/, const Tensor& /*y*/, const Tensor& /*dy*/,
                                Tensor* /*dx*/) {
  SYNC_CHECK(false, kind() << " does not absorb a ReLU");
}
void Layer::input_grad_of_image(const Tensor& /*x*/, const Tensor& /*y*/, const Tensor& /*dy*/,
                                bool /*after_relu*/, int64_t /*image*/,
                                std::span<float> /*dx*/) const {
  SYNC_CHECK(false, kind() << " does not stream its input gradient");
}
void Layer::backward_streamed(const Tensor& /*x*/, ImageGrad /*dy_of*/, Tensor* /*dx*/) {
  SYNC_CHECK(false, kind() << " does not take a streamed gradient");
}

std::unique_ptr<Layer> dense(int64_t in, int64_t out, Bias bias) {
  return std::make_unique<Dense>(in, out, bias);
}
std::unique_ptr<Layer> relu() { return std::make_unique<ReLU>(); }
std::unique_ptr<Layer> flatten() { return std::make_unique<Flatten>(); }
std::unique_ptr<Layer> dropout(float rate) { return std::make_unique<Dropout>(rate); }

}  // namespace syncopate
