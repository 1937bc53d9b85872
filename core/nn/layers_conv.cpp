// Conv2D as im2col + GEMM, one image at a time (the im2col buffer stays small and hot in cache;
// backward recomputes it instead of keeping a batch-sized copy from forward); 3x3 stride-1
// convolutions with padding 1 and enough input channels by Winograd's F(2x2, 3x3)
// (core/tensor/winograd.hpp) over groups of images instead, with 2.25x fewer multiplications.
#include <algorithm>
#include <vector>

#include "core/nn/layer.hpp"
#include "core/nn/layers_common.hpp"
#include "core/tensor/conv_direct.hpp"
#include "core/tensor/gemm.hpp"
#include "core/tensor/winograd.hpp"

namespace syncopate {
namespace {

using layers::cost;

class Conv2D final : public Layer {
 public:
  Conv2D(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
         Bias bias, ConvAlgorithm algorithm)
      : cin_(in_channels),
        cout_(out_channels),
        k_(kernel),
        stride_(stride),
        pad_(padding),
        bias_(bias == Bias::kYes),
        algorithm_(algorithm) {
    layers::require_arg(cin_ > 0, "conv2d", "in_channels", cin_, "> 0");
    layers::require_arg(cout_ > 0, "conv2d", "out_channels", cout_, "> 0");
    layers::require_arg(k_ > 0, "conv2d", "kernel", k_, "> 0");
    layers::require_arg(stride_ > 0, "conv2d", "stride", stride_, "> 0");
    layers::require_arg(pad_ >= 0, "conv2d", "padding", pad_, ">= 0");
    if ((algorithm == ConvAlgorithm::kWinograd && !winograd::applies(k_, stride_, pad_)) ||
        (algorithm == ConvAlgorithm::kDirect && !conv_direct::applies(k_, stride_, pad_)))
      throw UserError(std::string("conv2d: the ") +
                      (algorithm == ConvAlgorithm::kWinograd ? "Winograd" : "direct") +
                      " algorithm takes a 3x3 kernel of stride 1 and padding 1; got kernel " +
                      std::to_string(k_) + ", stride " + std::to_string(stride_) + ", padding " +
                      std::to_string(pad_));
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
    if (winograd_for(x.shape())) return winograd_forward(x, y);
    const ConvGeometry g = geometry(x.shape());
    const int64_t kk = g.col_rows(), p = g.col_cols(), batch = x.dim(0);
    const int64_t in_size = cin_ * g.height * g.width, out_size = cout_ * p;
    if (direct()) {
      for (int64_t n = 0; n < batch; ++n)
        conv_direct::forward(x.data() + n * in_size, cin_, g.height, g.width, w_.data(), cout_,
                             bias_ ? b_.data() : nullptr, y.data() + n * out_size);
      return;
    }
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
    if (winograd_for(x.shape())) return winograd_backward(x, dy, dx);
    const int64_t out_size = cout_ * geometry(x.shape()).col_cols();
    for (int64_t n = 0; n < x.dim(0); ++n)
      backward_image(x, n, dy.span().subspan(static_cast<size_t>(n * out_size)), dx);
  }
  // The same, each image's dy asked for just before its turn: it stays in cache.
  bool takes_streamed_grad(const Shape& input) const override { return !winograd_for(input); }
  void backward_streamed(const Tensor& x, ImageGrad dy_of, Tensor* dx) override {
    SYNC_CHECK(!winograd_for(x.shape()), "conv2d: a streamed gradient on the Winograd path");
    const ConvGeometry g = geometry(x.shape());
    dy_image_.resize(static_cast<size_t>(cout_ * g.col_cols()));
    for (int64_t n = 0; n < x.dim(0); ++n) {
      dy_of(n, dy_image_);
      backward_image(x, n, dy_image_, dx);
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
  // Below this many input channels the products are too thin for the transforms to pay (the
  // first layer of an image model: 1 or 3 channels); im2col then.
  static constexpr int64_t kWinogradMinChannels = 8;
  // Above this many tiles x channels of one image (large planes of many channels: 16 MB per
  // workspace) im2col, whose workspace is 2.25x smaller than the transformed image.
  static constexpr int64_t kWinogradMaxTileChannels = int64_t{1} << 18;

  // Image n's share of backward, dy its output gradient (Cout x P).
  void backward_image(const Tensor& x, int64_t n, std::span<const float> dy, Tensor* dx) {
    const ConvGeometry g = geometry(x.shape());
    const int64_t kk = g.col_rows(), p = g.col_cols();
    const int64_t in_size = cin_ * g.height * g.width;
    col_.resize(static_cast<size_t>(kk * p));
    const std::span<const float> xn =
        x.span().subspan(static_cast<size_t>(n * in_size), static_cast<size_t>(in_size));
    const MatrixView dyn{dy.data(), cout_, p, p};
    if (direct()) {
      conv_direct::add_weight_grad(xn.data(), cin_, g.height, g.width, dy.data(), cout_,
                                   dw_.data());
    } else {
      im2col(xn, g, col_.data(), p);
      gemm(Trans::kNo, Trans::kYes, 1.0f, dyn, matrix(std::span<const float>(col_), kk, p), 1.0f,
           matrix(dw_, cout_, kk));
    }
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

  // Whether the forward pass and the weight gradient run directly: when asked for, and by
  // default for 3x3 / stride 1 / padding 1 below Winograd's channels.
  bool direct() const {
    if (algorithm_ != ConvAlgorithm::kAuto) return algorithm_ == ConvAlgorithm::kDirect;
    return conv_direct::applies(k_, stride_, pad_) && cin_ < kWinogradMinChannels;
  }
  // Whether this input runs by Winograd: always when asked for, never when another algorithm
  // is; by default where F(2x2, 3x3) applies, with enough input channels and a moderate
  // workspace.
  bool winograd_for(const Shape& input) const {
    if (algorithm_ != ConvAlgorithm::kAuto) return algorithm_ == ConvAlgorithm::kWinograd;
    const winograd::Tiling t{input[2], input[3]};
    return winograd::applies(k_, stride_, pad_) && cin_ >= kWinogradMinChannels &&
           t.tiles() * winograd::padded_channels(std::max(cin_, cout_)) <= kWinogradMaxTileChannels;
  }
  // Images per group: about this many tiles, so that the 16 products are wide enough and the
  // transformed group and its products stay in the core's cache (cnn's conv2, 49 tiles an
  // image: 2 images; 5, with 256, made its training step about 4% longer).
  static constexpr int64_t kWinogradGroupTiles = 128;

  int64_t winograd_group(const winograd::Tiling& t) const {
    return std::max<int64_t>(1, kWinogradGroupTiles / t.tiles());
  }
  // m[xi] (rows x n, row length ldm) = a[xi] (rows x k, row length lda) * b[xi] (k x n), for the
  // 16 positions.
  static void winograd_products(const float* a, int64_t lda, const float* b, float* m, int64_t ldm,
                                int64_t rows, int64_t k, int64_t n) {
    for (int64_t xi = 0; xi < winograd::kPositions; ++xi)
      gemm(Trans::kNo, Trans::kNo, 1.0f, {a + xi * rows * lda, rows, k, lda},
           {b + xi * k * n, k, n, n}, 0.0f, {m + xi * rows * ldm, rows, n, ldm});
  }

  void winograd_forward(const Tensor& x, Tensor& y) {
    const winograd::Tiling t{x.dim(2), x.dim(3)};
    const int64_t batch = x.dim(0), plane = t.height * t.width, group = winograd_group(t);
    const int64_t in_ld = winograd::padded_channels(cin_);
    const int64_t out_ld = winograd::padded_channels(cout_);
    u_.resize(static_cast<size_t>(winograd::kPositions * cout_ * cin_));
    winograd::transform_filters(w_, cout_, cin_, /*flip=*/false, u_);
    for (int64_t n = 0; n < batch; n += group) {
      const int64_t images = std::min(group, batch - n), rows = images * t.tiles();
      v_.resize(static_cast<size_t>(winograd::kPositions * rows * in_ld));
      m_.resize(static_cast<size_t>(winograd::kPositions * rows * out_ld));
      winograd::transform_input(x.data() + n * cin_ * plane, images, cin_, t, v_.data(), in_ld);
      winograd_products(v_.data(), in_ld, u_.data(), m_.data(), out_ld, rows, cin_, cout_);
      winograd::transform_output(m_.data(), out_ld, images, cout_, t,
                                 bias_ ? std::span<const float>(b_) : std::span<const float>(),
                                 y.data() + n * cout_ * plane);
    }
  }

  // dW = G^T (sum over tiles of (A dy A^T) . (B^T x B)) G; dx = the convolution of dy with the
  // rotated, transposed filters (the same forward transforms); db = the row sums of dy.
  void winograd_backward(const Tensor& x, const Tensor& dy, Tensor* dx) {
    const winograd::Tiling t{x.dim(2), x.dim(3)};
    const int64_t batch = x.dim(0), plane = t.height * t.width, group = winograd_group(t);
    const int64_t positions = winograd::kPositions;
    const int64_t in_ld = winograd::padded_channels(cin_);
    const int64_t out_ld = winograd::padded_channels(cout_);
    z_.assign(static_cast<size_t>(positions * cout_ * cin_), 0.0f);
    if (dx) {
      u_.resize(static_cast<size_t>(positions * cout_ * cin_));
      winograd::transform_filters(w_, cout_, cin_, /*flip=*/true, u_);
    }
    for (int64_t n = 0; n < batch; n += group) {
      const int64_t images = std::min(group, batch - n), rows = images * t.tiles();
      const float* dyn = dy.data() + n * cout_ * plane;
      v_.resize(static_cast<size_t>(positions * rows * in_ld));
      p_.resize(static_cast<size_t>(positions * rows * out_ld));
      if (dx) vdy_.resize(static_cast<size_t>(positions * rows * out_ld));
      winograd::transform_input(x.data() + n * cin_ * plane, images, cin_, t, v_.data(), in_ld);
      winograd::transform_output_grad(dyn, images, cout_, t, p_.data(), out_ld,
                                      dx ? vdy_.data() : nullptr);
      for (int64_t xi = 0; xi < positions; ++xi)
        gemm(Trans::kYes, Trans::kNo, 1.0f, {p_.data() + xi * rows * out_ld, rows, cout_, out_ld},
             {v_.data() + xi * rows * in_ld, rows, cin_, in_ld}, 1.0f,
             {z_.data() + xi * cout_ * cin_, cout_, cin_, cin_});
      if (bias_)
        for (int64_t i = 0; i < images; ++i)
          add_row_sums({dyn + i * cout_ * plane, cout_, plane, plane}, db_);
      if (dx) {
        m_.resize(static_cast<size_t>(positions * rows * in_ld));
        winograd_products(vdy_.data(), out_ld, u_.data(), m_.data(), in_ld, rows, cout_, cin_);
        winograd::transform_output(m_.data(), in_ld, images, cin_, t, {},
                                   dx->data() + n * cin_ * plane);
      }
    }
    winograd::add_filter_grads(z_, cout_, cin_, dw_);
  }

  int64_t weight_count() const { return cout_ * cin_ * k_ * k_; }
  ConvGeometry geometry(const Shape& input) const {
    return {cin_, input[2], input[3], k_, stride_, pad_};
  }

  int64_t cin_, cout_, k_, stride_, pad_;
  bool bias_;
  ConvAlgorithm algorithm_;
  std::span<float> w_, b_, dw_, db_;
  std::vector<float> col_;       // im2col workspace of one image, reused across calls
  std::vector<float> dy_image_;  // one image's streamed output gradient
  // Winograd workspaces, reused across calls: transformed filters, a group's transformed
  // input, output gradient (for dW), output gradient as input (for dx) and products, the summed
  // weight-gradient products.
  std::vector<float> u_, v_, p_, vdy_, m_, z_;
};

}  // namespace

std::unique_ptr<Layer> conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                              int64_t stride, int64_t padding, Bias bias, ConvAlgorithm algorithm) {
  return std::make_unique<Conv2D>(in_channels, out_channels, kernel, stride, padding, bias,
                                  algorithm);
}

}  // namespace syncopate
