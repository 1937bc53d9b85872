// MaxPool2D, AvgPool2D and GlobalAvgPool over NCHW images.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/nn/layer.hpp"
#include "core/nn/layers_common.hpp"
#include "core/nn/maxpool_2x2.hpp"
#include "core/tensor/gemm.hpp"

namespace syncopate {
namespace {

using layers::cost;

// Shared by the windowed pools: geometry and shape checks.
class WindowPool : public Layer {
 public:
  WindowPool(std::string_view name, int64_t kernel, int64_t stride, int64_t padding)
      : name_(name), k_(kernel), stride_(stride), pad_(padding) {
    layers::require_arg(k_ > 0, name_, "kernel", k_, "> 0");
    layers::require_arg(stride_ > 0, name_, "stride", stride_, "> 0");
    layers::require_arg(pad_ >= 0 && 2 * pad_ <= k_, name_, "padding", pad_,
                        "0 <= padding <= kernel / 2");
  }
  std::string_view kind() const override { return name_; }
  Shape output_shape(const Shape& input) const override {
    const bool ok =
        input.size() == 4 && input[1] > 0 && input[2] + 2 * pad_ >= k_ && input[3] + 2 * pad_ >= k_;
    layers::require_shape(ok, name_, input,
                          "(batch, C, H, W) with H, W + 2 * padding >= " + std::to_string(k_));
    const ConvGeometry g = geometry(input);
    return {input[0], input[1], g.out_height(), g.out_width()};
  }

 protected:
  ConvGeometry geometry(const Shape& input) const {
    return {1, input[2], input[3], k_, stride_, pad_};
  }
  double windows(const Shape& input) const {
    const ConvGeometry g = geometry(input);
    return static_cast<double>(input[0] * input[1] * g.out_height() * g.out_width());
  }
  std::string_view name_;
  int64_t k_, stride_, pad_;
};

// Max over each window; the first maximum (in row-major window order) wins ties and takes the
// whole gradient. Padding never wins.
class MaxPool2D final : public WindowPool {
 public:
  MaxPool2D(int64_t kernel, int64_t stride, int64_t padding)
      : WindowPool("maxpool2d", kernel, stride, padding) {}
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    run_forward(x, y, false);
  }
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override {
    if (dx) run_backward(x, y, dy, *dx, false);
  }
  // The max of ReLUs is the ReLU of the max: pool x, then clamp the outputs. The winner is
  // the same input as over relu(x) whenever the max is positive; otherwise the output is 0 and
  // no gradient passes, whichever input won.
  bool absorbs_relu() const override { return true; }
  void forward_after_relu(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    run_forward(x, y, true);
  }
  void backward_after_relu(const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor* dx) override {
    if (dx) run_backward(x, y, dy, *dx, true);
  }
  bool streams_input_grad() const override { return true; }
  void input_grad_of_image(const Tensor& x, const Tensor& y, const Tensor& dy, bool after_relu,
                           int64_t image, std::span<float> dx) const override {
    const int64_t channels = x.dim(1);
    SYNC_CHECK(image >= 0 && image < x.dim(0) &&
                   static_cast<int64_t>(dx.size()) == channels * x.dim(2) * x.dim(3),
               "image " << image << " of " << x.dim(0) << ", " << dx.size() << " floats");
    backward_planes(x, y, dy, after_relu, image * channels, channels, dx.data());
  }
  Cost forward_cost(const Shape& input) const override {
    const double out = windows(input);
    return cost(out * static_cast<double>(k_ * k_), static_cast<double>(numel(input)) + 2 * out,
                OpKind::kPool);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    if (!input_grad) return cost(0, 0, OpKind::kPool);
    const double out = windows(input);
    return cost(out, static_cast<double>(numel(input)) + 2 * out, OpKind::kPool);
  }

 private:
  void run_forward(const Tensor& x, Tensor& y, bool relu) {
    const ConvGeometry g = geometry(x.shape());
    const int64_t planes = x.dim(0) * x.dim(1), in_plane = g.height * g.width;
    const int64_t out_plane = g.out_height() * g.out_width();
    argmax_.resize(static_cast<size_t>(planes * out_plane));
    for (int64_t p = 0; p < planes; ++p) {
      const float* in = x.data() + p * in_plane;
      float* out = y.data() + p * out_plane;
      int32_t* at = argmax_.data() + p * out_plane;
      if (k_ == 2 && stride_ == 2 && pad_ == 0) {
        maxpool_2x2::forward(in, g.height, g.width, relu, out, at);
      } else {
        forward_plane(in, g, out, at);
        if (relu) {
          for (int64_t i = 0; i < out_plane; ++i) out[i] = out[i] > 0.0f ? out[i] : 0.0f;
        }
      }
    }
  }
  // With `relu`, y holds ReLU'd maxima: a window whose max was not positive passes nothing.
  void run_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx,
                    bool relu) const {
    backward_planes(x, y, dy, relu, 0, x.dim(0) * x.dim(1), dx.data());
  }
  // The input gradient of planes [first, first + count) (image-major, channel-minor) into d.
  void backward_planes(const Tensor& x, const Tensor& y, const Tensor& dy, bool relu, int64_t first,
                       int64_t count, float* d) const {
    const int64_t h = x.dim(2), w = x.dim(3), in_plane = h * w, out_plane = y.dim(2) * y.dim(3);
    const bool tiled = k_ == 2 && stride_ == 2 && pad_ == 0 && h % 2 == 0 && w % 2 == 0;
    const int32_t* best_at = argmax_.data() + first * out_plane;
    const float* g = dy.data() + first * out_plane;
    const float* out = relu ? y.data() + first * out_plane : nullptr;
    for (int64_t plane = 0; plane < count; ++plane, d += in_plane) {
      if (tiled) {
        maxpool_2x2::backward(g, best_at, out, h, w, d);
      } else {
        // Zeroed plane by plane, so the scatter below finds it in cache.
        std::fill(d, d + in_plane, 0.0f);
        for (int64_t i = 0; i < out_plane; ++i) {
          const float gi = g[i];  // read whatever the mask, as ReLU's backward does
          d[best_at[i]] += !out || out[i] > 0.0f ? gi : 0.0f;
        }
      }
      g += out_plane;
      best_at += out_plane;
      if (out) out += out_plane;
    }
  }
  void forward_plane(const float* in, const ConvGeometry& g, float* out, int32_t* best_at) const {
    const int64_t h = g.height, w = g.width, ho = g.out_height(), wo = g.out_width();
    for (int64_t oy = 0; oy < ho; ++oy) {
      const int64_t y0 = std::max<int64_t>(oy * stride_ - pad_, 0);
      const int64_t y1 = std::min(oy * stride_ - pad_ + k_, h);
      for (int64_t ox = 0; ox < wo; ++ox) {
        const int64_t x0 = std::max<int64_t>(ox * stride_ - pad_, 0);
        const int64_t x1 = std::min(ox * stride_ - pad_ + k_, w);
        float best = -std::numeric_limits<float>::infinity();
        int64_t at = y0 * w + x0;
        for (int64_t iy = y0; iy < y1; ++iy) {
          for (int64_t ix = x0; ix < x1; ++ix) {
            const float v = in[iy * w + ix];
            if (v > best) {
              best = v;
              at = iy * w + ix;
            }
          }
        }
        *out++ = best;
        *best_at++ = static_cast<int32_t>(at);
      }
    }
  }

  std::vector<int32_t> argmax_;  // per output: the winning input's index inside its plane
};

// Mean over each k x k window (no padding: every window is full).
class AvgPool2D final : public WindowPool {
 public:
  AvgPool2D(int64_t kernel, int64_t stride) : WindowPool("avgpool2d", kernel, stride, 0) {}
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    const ConvGeometry g = geometry(x.shape());
    const int64_t h = g.height, w = g.width, ho = g.out_height(), wo = g.out_width();
    const int64_t planes = x.dim(0) * x.dim(1);
    const float scale = 1.0f / static_cast<float>(k_ * k_);
    float* out = y.data();
    for (int64_t plane = 0; plane < planes; ++plane) {
      const float* in = x.data() + plane * h * w;
      for (int64_t oy = 0; oy < ho; ++oy) {
        for (int64_t ox = 0; ox < wo; ++ox) {
          float sum = 0.0f;
          for (int64_t ky = 0; ky < k_; ++ky) {
            const float* row = in + (oy * stride_ + ky) * w + ox * stride_;
            for (int64_t kx = 0; kx < k_; ++kx) sum += row[kx];
          }
          *out++ = sum * scale;
        }
      }
    }
  }
  void backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) override {
    if (!dx) return;
    const ConvGeometry g = geometry(x.shape());
    const int64_t h = g.height, w = g.width, ho = g.out_height(), wo = g.out_width();
    const int64_t planes = x.dim(0) * x.dim(1);
    const float scale = 1.0f / static_cast<float>(k_ * k_);
    dx->fill(0.0f);
    const float* gy = dy.data();
    for (int64_t plane = 0; plane < planes; ++plane) {
      float* d = dx->data() + plane * h * w;
      for (int64_t oy = 0; oy < ho; ++oy) {
        for (int64_t ox = 0; ox < wo; ++ox) {
          const float share = *gy++ * scale;
          for (int64_t ky = 0; ky < k_; ++ky) {
            float* row = d + (oy * stride_ + ky) * w + ox * stride_;
            for (int64_t kx = 0; kx < k_; ++kx) row[kx] += share;
          }
        }
      }
    }
  }
  Cost forward_cost(const Shape& input) const override {
    const double out = windows(input);
    return cost(out * static_cast<double>(k_ * k_), static_cast<double>(numel(input)) + out,
                OpKind::kPool);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    if (!input_grad) return cost(0, 0, OpKind::kPool);
    const double out = windows(input);
    return cost(out * static_cast<double>(k_ * k_), static_cast<double>(numel(input)) + out,
                OpKind::kPool);
  }
};

// (B, C, H, W) -> (B, C): the mean of each channel's plane.
class GlobalAvgPool final : public Layer {
 public:
  std::string_view kind() const override { return "global_avgpool"; }
  Shape output_shape(const Shape& input) const override {
    layers::require_shape(input.size() == 4 && input[2] > 0 && input[3] > 0, "global_avgpool",
                          input, "(batch, C, H, W)");
    return {input[0], input[1]};
  }
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    const int64_t plane = x.dim(2) * x.dim(3), planes = x.dim(0) * x.dim(1);
    const float scale = 1.0f / static_cast<float>(plane);
    y.fill(0.0f);
    add_row_sums({x.data(), planes, plane, plane}, y.span());
    for (int64_t i = 0; i < planes; ++i) y[i] *= scale;
  }
  void backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) override {
    if (!dx) return;
    const int64_t plane = x.dim(2) * x.dim(3), planes = x.dim(0) * x.dim(1);
    const float scale = 1.0f / static_cast<float>(plane);
    for (int64_t i = 0; i < planes; ++i) {
      float* d = dx->data() + i * plane;
      std::fill(d, d + plane, dy[i] * scale);
    }
  }
  Cost forward_cost(const Shape& input) const override {
    const double n = static_cast<double>(numel(input));
    return cost(n, n + static_cast<double>(input[0] * input[1]), OpKind::kPool);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    if (!input_grad) return cost(0, 0, OpKind::kPool);
    const double n = static_cast<double>(numel(input));
    return cost(n, n + static_cast<double>(input[0] * input[1]), OpKind::kPool);
  }
};

}  // namespace

std::unique_ptr<Layer> maxpool2d(int64_t kernel, int64_t stride, int64_t padding) {
  return std::make_unique<MaxPool2D>(kernel, stride, padding);
}
std::unique_ptr<Layer> avgpool2d(int64_t kernel, int64_t stride) {
  return std::make_unique<AvgPool2D>(kernel, stride);
}
std::unique_ptr<Layer> global_avgpool() { return std::make_unique<GlobalAvgPool>(); }

}  // namespace syncopate
