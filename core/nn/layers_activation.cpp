// The smooth elementwise activations: sigmoid, tanh and GELU (GPT-2's tanh form).
#include <cmath>

#include "core/nn/layers_common.hpp"
#include "core/nn/layers_extra.hpp"

namespace syncopate {
namespace {

using layers::cost;

// An elementwise function: value(x) and its derivative slope(x, y) at x, with y = value(x).
// flops: per element, forward and backward (estimates for the cost model).
struct Activation {
  std::string_view name;
  float (*value)(float x);
  float (*slope)(float x, float y);
  double forward_flops, backward_flops;
};

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

float gelu_value(float x) {
  return 0.5f * x * (1.0f + std::tanh(kGeluC * (x + kGeluA * x * x * x)));
}

float gelu_slope(float x, float /*y*/) {
  const float t = std::tanh(kGeluC * (x + kGeluA * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
}

constexpr Activation kSigmoid{"sigmoid", [](float x) { return 1.0f / (1.0f + std::exp(-x)); },
                              [](float /*x*/, float y) { return y * (1.0f - y); }, 4, 3};
constexpr Activation kTanh{"tanh", [](float x) { return std::tanh(x); },
                           [](float /*x*/, float y) { return 1.0f - y * y; }, 4, 3};
constexpr Activation kGelu{"gelu", gelu_value, gelu_slope, 10, 16};

class Elementwise final : public Layer {
 public:
  explicit Elementwise(const Activation& f) : f_(f) {}
  std::string_view kind() const override { return f_.name; }
  Shape output_shape(const Shape& input) const override { return input; }
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) y[i] = f_.value(x[i]);
  }
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override {
    if (!dx) return;
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) (*dx)[i] = dy[i] * f_.slope(x[i], y[i]);
  }
  Cost forward_cost(const Shape& input) const override {
    const double n = static_cast<double>(numel(input));
    return cost(f_.forward_flops * n, 2 * n, OpKind::kElementwise);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const double n = input_grad ? static_cast<double>(numel(input)) : 0.0;
    return cost(f_.backward_flops * n, 4 * n, OpKind::kElementwise);
  }

 private:
  const Activation& f_;
};

}  // namespace

std::unique_ptr<Layer> sigmoid() { return std::make_unique<Elementwise>(kSigmoid); }
std::unique_ptr<Layer> tanh_layer() { return std::make_unique<Elementwise>(kTanh); }
std::unique_ptr<Layer> gelu() { return std::make_unique<Elementwise>(kGelu); }

}  // namespace syncopate
