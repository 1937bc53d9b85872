// LayerNorm and RMSNorm over the last axis.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/nn/layers_common.hpp"
#include "core/nn/layers_extra.hpp"

namespace syncopate {
namespace {

using layers::cost;

constexpr float kEps = 1e-5f;

// y = x_hat * gamma (+ beta), x_hat = (x - mean) / rms or x / rms, over rows of `features`.
class Norm final : public Layer {
 public:
  Norm(int64_t features, bool centre) : n_(features), centre_(centre) {
    layers::require_arg(features > 0, name(), "features", features, "> 0");
  }
  std::string_view kind() const override { return name(); }
  Shape output_shape(const Shape& input) const override {
    layers::require_shape(input.size() >= 2 && input.back() == n_, name(), input,
                          "(batch, ..., " + std::to_string(n_) + ")");
    return input;
  }
  int64_t num_params() const override { return centre_ ? 2 * n_ : n_; }
  void bind(std::span<float> params, std::span<float> grads) override {
    if (params.empty()) return;
    params_ = params;
    grads_ = grads;
  }
  void init_params(Rng& /*rng*/, InitScheme /*scheme*/) override {
    if (params_.empty()) return;
    std::fill(params_.begin(), params_.begin() + n_, 1.0f);
    std::fill(params_.begin() + n_, params_.end(), 0.0f);
  }
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    const int64_t rows = x.numel() / n_;
    inv_rms_.resize(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = x.data() + r * n_;
      float* out = y.data() + r * n_;
      const float mean = centre_ ? row_mean(in) : 0.0f;
      double square = 0;
      for (int64_t i = 0; i < n_; ++i) square += (in[i] - mean) * (in[i] - mean);
      const float inv = 1.0f / std::sqrt(static_cast<float>(square / n_) + kEps);
      inv_rms_[static_cast<size_t>(r)] = inv;
      for (int64_t i = 0; i < n_; ++i) {
        out[i] = (in[i] - mean) * inv * params_[i] + (centre_ ? params_[n_ + i] : 0.0f);
      }
    }
  }
  // dx = inv * (g - mean(g) - x_hat mean(g x_hat)) with g = dy * gamma (RMSNorm: no mean(g)).
  void backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) override {
    const int64_t rows = x.numel() / n_;
    std::vector<float> x_hat(static_cast<size_t>(n_));
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = x.data() + r * n_;
      const float* g = dy.data() + r * n_;
      const float mean = centre_ ? row_mean(in) : 0.0f;
      const float inv = inv_rms_[static_cast<size_t>(r)];
      double g_sum = 0, gx_sum = 0;
      for (int64_t i = 0; i < n_; ++i) {
        const float h = (in[i] - mean) * inv;
        x_hat[static_cast<size_t>(i)] = h;
        grads_[i] += g[i] * h;
        if (centre_) grads_[n_ + i] += g[i];
        g_sum += g[i] * params_[i];
        gx_sum += g[i] * params_[i] * h;
      }
      if (!dx) continue;
      const float g_mean = centre_ ? static_cast<float>(g_sum / n_) : 0.0f;
      const float gx_mean = static_cast<float>(gx_sum / n_);
      float* d = dx->data() + r * n_;
      for (int64_t i = 0; i < n_; ++i) {
        d[i] = inv * (g[i] * params_[i] - g_mean - x_hat[static_cast<size_t>(i)] * gx_mean);
      }
    }
  }
  // Per element: mean, variance, normalise, scale and shift (~8 flops); backward ~12 (4 without
  // the input gradient).
  Cost forward_cost(const Shape& input) const override {
    const double n = static_cast<double>(numel(input));
    return cost(8 * n, 2 * n + static_cast<double>(num_params()), OpKind::kElementwise);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const double n = static_cast<double>(numel(input)), p = static_cast<double>(num_params());
    return cost(input_grad ? 12 * n : 4 * n, (input_grad ? 3 : 2) * n + 2 * p,
                OpKind::kElementwise);
  }

 private:
  std::string_view name() const { return centre_ ? "layernorm" : "rmsnorm"; }
  float row_mean(const float* in) const {
    double sum = 0;
    for (int64_t i = 0; i < n_; ++i) sum += in[i];
    return static_cast<float>(sum / n_);
  }
  int64_t n_;
  bool centre_;
  std::span<float> params_, grads_;
  std::vector<float> inv_rms_;  // per row, from forward
};

}  // namespace

std::unique_ptr<Layer> layernorm(int64_t features) {
  return std::make_unique<Norm>(features, true);
}
std::unique_ptr<Layer> rmsnorm(int64_t features) { return std::make_unique<Norm>(features, false); }

}  // namespace syncopate
