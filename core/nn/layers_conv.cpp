// Conv2D as im2col + GEMM, one image at a time (the im2col buffer stays small and hot in cache;
// backward recomputes it instead of keeping a batch-sized copy from forward).
#include <algorithm>
#include <vector>

#include "core/tensor/gemm.hpp"
#include "core/nn/layer.hpp"
#include "core/nn/layers_common.hpp"

namespace syncopate {
namespace {

using layers::cost;

class Conv2D final : public Layer {
 public:
  Conv2D(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
         Bias bias)
      : cin_(in_channels),
        cout_(out_channels),
        k_(kernel),
        stride_(stride),
        pad_(padding),
        bias_(bias == Bias::kYes) {
    layers::require_arg(cin_ > 0, "conv2d", "in_channels", cin_, "> 0");
    layers::require_arg(cout_ > 0, "conv2d", "out_channels", cout_, "> 0");
    layers::require_arg(k_ > 0, "conv2d", "kernel", k_, "> 0");
    layers::require_arg(stride_ > 0, "conv2d", "stride", stride_, "> 0");
    layers::require_arg(pad_ >= 0, "conv2d", "padding", pad_, ">= 0");
  }
  std::string_view kind() const override { return "conv2d"; }
  Shape output_shape(const Shape& input) const override {
    const bool ok = input.size() == 4 && input[1] == cin_ && input[2] + 2 * pad_ >= k_ &&
                    input[3] + 2 * pad_ >= k_;
    layers::require_shape(ok, "conv2d", input,
                          "(batch, " + std::to_string(cin_) +
                              ", H, W) with H, W + 2 * padding >= " + std::to_string(k_));
    const ConvGeometry g = geometry(input);
    return {input[0], cout_, g.out_height(), g.out_width()};
  }
  int64_t num_params() const override { return weight_count() + (bias_ ? cout_ : 0); }
  void bind(std::span<float> params, std::span<float> grads) override {
    if (params.empty()) return;
    const size_t nw = static_cast<size_t>(weight_count());
    w_ = params.first(nw);
    b_ = params.subspan(nw);
    dw_ = grads.first(nw);
    db_ = grads.subspan(nw);
  }
  void init_params(Rng& rng, InitScheme scheme) override {
    if (w_.empty()) return;
    const int64_t taps = k_ * k_;
    layers::fill_normal(w_, rng, layers::init_std(scheme, cin_ * taps, cout_ * taps));
    std::fill(b_.begin(), b_.end(), 0.0f);
  }

  // y[n] (Cout, P) = W (Cout, K) * im2col(x[n]) (K, P) + b.
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    const ConvGeometry g = geometry(x.shape());
    const int64_t kk = g.col_rows(), p = g.col_cols(), batch = x.dim(0);
    const int64_t in_size = cin_ * g.height * g.width, out_size = cout_ * p;
    col_.resize(static_cast<size_t>(kk * p));
    for (int64_t n = 0; n < batch; ++n) {
      im2col(x.span().subspan(static_cast<size_t>(n * in_size), static_cast<size_t>(in_size)), g,
             col_.data(), p);
      float* out = y.data() + n * out_size;
      float beta = 0.0f;
      if (bias_) {
        for (int64_t c = 0; c < cout_; ++c) std::fill(out + c * p, out + (c + 1) * p, b_[c]);
        beta = 1.0f;
      }
      gemm(Trans::kNo, Trans::kNo, 1.0f, matrix(w_, cout_, kk),
           matrix(std::span<const float>(col_), kk, p), beta, {out, cout_, p, p});
    }
  }

  // dW += dy[n] * im2col(x[n])^T; db += rowsum(dy[n]); dx[n] = col2im(W^T * dy[n]).
  void backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) override {
    const ConvGeometry g = geometry(x.shape());
    const int64_t kk = g.col_rows(), p = g.col_cols(), batch = x.dim(0);
    const int64_t in_size = cin_ * g.height * g.width, out_size = cout_ * p;
    col_.resize(static_cast<size_t>(kk * p));
    for (int64_t n = 0; n < batch; ++n) {
      const std::span<const float> xn =
          x.span().subspan(static_cast<size_t>(n * in_size), static_cast<size_t>(in_size));
      const MatrixView dyn{dy.data() + n * out_size, cout_, p, p};
      im2col(xn, g, col_.data(), p);
      gemm(Trans::kNo, Trans::kYes, 1.0f, dyn, matrix(std::span<const float>(col_), kk, p), 1.0f,
           matrix(dw_, cout_, kk));
      if (bias_) add_row_sums(dyn, db_);
      if (dx) {
        gemm(Trans::kYes, Trans::kNo, 1.0f, matrix(w_, cout_, kk), dyn, 0.0f,
             matrix(std::span<float>(col_), kk, p));
        const std::span<float> dxn =
            dx->span().subspan(static_cast<size_t>(n * in_size), static_cast<size_t>(in_size));
        std::fill(dxn.begin(), dxn.end(), 0.0f);
        col2im_add(col_.data(), p, g, dxn);
      }
    }
  }

  Cost forward_cost(const Shape& input) const override {
    const ConvGeometry g = geometry(input);
    const double b = static_cast<double>(input[0]), kk = static_cast<double>(g.col_rows());
    const double p = static_cast<double>(g.col_cols()), co = static_cast<double>(cout_);
    const double in = static_cast<double>(numel(input));
    const double flops = 2 * b * co * kk * p + (bias_ ? b * co * p : 0.0);
    return cost(flops, in + static_cast<double>(num_params()) + b * co * p, OpKind::kConv);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const ConvGeometry g = geometry(input);
    const double b = static_cast<double>(input[0]), kk = static_cast<double>(g.col_rows());
    const double p = static_cast<double>(g.col_cols()), co = static_cast<double>(cout_);
    const double in = static_cast<double>(numel(input)), np = static_cast<double>(num_params());
    double flops = 2 * b * co * kk * p + (bias_ ? b * co * p : 0.0);
    double moved = in + b * co * p + 2 * np;  // read x and dy, update the gradients
    if (input_grad) {
      flops += 2 * b * co * kk * p;
      moved += np + in;  // read W, write dx
    }
    return cost(flops, moved, OpKind::kConv);
  }

 private:
  int64_t weight_count() const { return cout_ * cin_ * k_ * k_; }
  ConvGeometry geometry(const Shape& input) const {
    return {cin_, input[2], input[3], k_, stride_, pad_};
  }

  int64_t cin_, cout_, k_, stride_, pad_;
  bool bias_;
  std::span<float> w_, b_, dw_, db_;
  std::vector<float> col_;  // im2col workspace of one image, reused across calls
};

}  // namespace

std::unique_ptr<Layer> conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                              int64_t stride, int64_t padding, Bias bias) {
  return std::make_unique<Conv2D>(in_channels, out_channels, kernel, stride, padding, bias);
}

}  // namespace syncopate
