// Transformer layers: token (and position) embedding, causal multi-head self-attention, and the
// cost-only gated MLP and tied output projection.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/nn/layers_common.hpp"
#include "core/nn/layers_extra.hpp"
#include "core/tensor/gemm.hpp"

namespace syncopate {
namespace {

using layers::cost;

class Embedding final : public Layer {
 public:
  Embedding(int64_t vocabulary, int64_t width, int64_t positions)
      : vocab_(vocabulary), width_(width), positions_(positions) {
    layers::require_arg(vocabulary > 0, "embedding", "vocabulary", vocabulary, "> 0");
    layers::require_arg(width > 0, "embedding", "width", width, "> 0");
    layers::require_arg(positions >= 0, "embedding", "positions", positions, ">= 0");
  }
  std::string_view kind() const override { return "embedding"; }
  Shape output_shape(const Shape& input) const override {
    layers::require_shape(
        input.size() == 2 && (positions_ == 0 || input[1] <= positions_), "embedding", input,
        "(batch, T) token ids" +
            (positions_ > 0 ? " with T <= " + std::to_string(positions_) : std::string()));
    return {input[0], input[1], width_};
  }
  int64_t num_params() const override { return (vocab_ + positions_) * width_; }
  void bind(std::span<float> params, std::span<float> grads) override {
    params_ = params;
    grads_ = grads;
  }
  void init_params(Rng& rng, InitScheme /*scheme*/) override {
    if (!params_.empty()) layers::fill_normal(params_, rng, 0.02);
  }
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    const int64_t steps = x.dim(1);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float* token = params_.data() + token_id(x[i]) * width_;
      float* out = y.data() + i * width_;
      std::copy(token, token + width_, out);
      if (positions_ == 0) continue;
      const float* position = params_.data() + (vocab_ + i % steps) * width_;
      for (int64_t c = 0; c < width_; ++c) out[c] += position[c];
    }
  }
  void backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) override {
    const int64_t steps = x.dim(1);
    for (int64_t i = 0; i < x.numel(); ++i) {
      float* token = grads_.data() + token_id(x[i]) * width_;
      const float* g = dy.data() + i * width_;
      for (int64_t c = 0; c < width_; ++c) token[c] += g[c];
      if (positions_ == 0) continue;
      float* position = grads_.data() + (vocab_ + i % steps) * width_;
      for (int64_t c = 0; c < width_; ++c) position[c] += g[c];
    }
    if (dx) dx->fill(0.0f);
  }
  Cost forward_cost(const Shape& input) const override {
    const double n = static_cast<double>(numel(input) * width_);
    return cost(positions_ > 0 ? n : 0.0, (positions_ > 0 ? 3 : 2) * n, OpKind::kElementwise);
  }
  Cost backward_cost(const Shape& input, bool /*input_grad*/) const override {
    const double n = static_cast<double>(numel(input) * width_);
    return cost((positions_ > 0 ? 2 : 1) * n, (positions_ > 0 ? 5 : 3) * n, OpKind::kElementwise);
  }

 private:
  int64_t token_id(float value) const {
    const auto id = static_cast<int64_t>(value);
    if (!(value >= 0.0f && static_cast<float>(id) == value && id < vocab_)) {
      throw UserError("embedding: token id " + std::to_string(value) +
                      " is not an integer in [0, " + std::to_string(vocab_) + ")");
    }
    return id;
  }
  int64_t vocab_, width_, positions_;
  std::span<float> params_, grads_;
};

// The parameter layout of attention: Wqkv (3C, C), [bqkv (3C)], Wo (C, C), [bo (C)].
struct AttentionParams {
  std::span<float> wqkv, bqkv, wo, bo;
  static AttentionParams of(std::span<float> all, int64_t c, bool bias) {
    if (all.empty()) return {};
    const auto n = static_cast<size_t>(c);
    AttentionParams p;
    p.wqkv = all.first(3 * n * n);
    p.bqkv = all.subspan(3 * n * n, bias ? 3 * n : 0);
    p.wo = all.subspan(3 * n * n + (bias ? 3 * n : 0), n * n);
    p.bo = all.subspan(4 * n * n + (bias ? 3 * n : 0), bias ? n : 0);
    return p;
  }
};

// x (R, in) W^T (+ b) into y (R, out).
void project(std::span<const float> x, std::span<const float> w, std::span<const float> b,
             std::span<float> y, int64_t rows, int64_t in, int64_t out) {
  if (!b.empty()) {
    for (int64_t r = 0; r < rows; ++r) std::copy(b.begin(), b.end(), y.data() + r * out);
  }
  gemm(Trans::kNo, Trans::kYes, 1.0f, matrix(x, rows, in), matrix(w, out, in),
       b.empty() ? 0.0f : 1.0f, matrix(y, rows, out));
}

// The adjoint of project: dW += dy^T x, db += colsum(dy), dx = dy W (when dx is not empty).
void project_back(std::span<const float> x, std::span<const float> w, std::span<const float> dy,
                  std::span<float> dw, std::span<float> db, std::span<float> dx, int64_t rows,
                  int64_t in, int64_t out) {
  gemm(Trans::kYes, Trans::kNo, 1.0f, matrix(dy, rows, out), matrix(x, rows, in), 1.0f,
       matrix(dw, out, in));
  if (!db.empty()) add_column_sums(matrix(dy, rows, out), db);
  if (!dx.empty()) {
    gemm(Trans::kNo, Trans::kNo, 1.0f, matrix(dy, rows, out), matrix(w, out, in), 0.0f,
         matrix(dx, rows, in));
  }
}

class Attention final : public Layer {
 public:
  Attention(int64_t width, int64_t heads, Bias bias)
      : c_(width), heads_(heads), bias_(bias == Bias::kYes) {
    layers::require_arg(width > 0, "attention", "width", width, "> 0");
    layers::require_arg(heads > 0 && width % heads == 0, "attention", "heads", heads,
                        "a divisor of the width");
  }
  std::string_view kind() const override { return "attention"; }
  Shape output_shape(const Shape& input) const override {
    layers::require_shape(input.size() == 3 && input[2] == c_, "attention", input,
                          "(batch, T, " + std::to_string(c_) + ")");
    return input;
  }
  int64_t num_params() const override { return 4 * c_ * c_ + (bias_ ? 4 * c_ : 0); }
  void bind(std::span<float> params, std::span<float> grads) override {
    p_ = AttentionParams::of(params, c_, bias_);
    g_ = AttentionParams::of(grads, c_, bias_);
  }
  void init_params(Rng& rng, InitScheme scheme) override {
    if (p_.wqkv.empty()) return;
    layers::fill_normal(p_.wqkv, rng, layers::init_std(scheme, c_, 3 * c_));
    layers::fill_normal(p_.wo, rng, layers::init_std(scheme, c_, c_));
    std::fill(p_.bqkv.begin(), p_.bqkv.end(), 0.0f);
    std::fill(p_.bo.begin(), p_.bo.end(), 0.0f);
  }
  void forward(const Tensor& x, Tensor& y, const StepContext& /*ctx*/) override {
    const int64_t rows = x.dim(0) * x.dim(1);
    qkv_.resize(static_cast<size_t>(rows * 3 * c_));
    heads_out_.resize(static_cast<size_t>(rows * c_));
    probs_.resize(static_cast<size_t>(x.dim(0) * heads_ * x.dim(1) * x.dim(1)));
    project(x.span(), p_.wqkv, p_.bqkv, qkv_, rows, c_, 3 * c_);
    for (int64_t b = 0; b < x.dim(0); ++b) {
      for (int64_t h = 0; h < heads_; ++h) head_forward(b, h, x.dim(1));
    }
    project(heads_out_, p_.wo, p_.bo, y.span(), rows, c_, c_);
  }
  void backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) override {
    const int64_t rows = x.dim(0) * x.dim(1);
    d_heads_out_.assign(static_cast<size_t>(rows * c_), 0.0f);
    d_qkv_.assign(static_cast<size_t>(rows * 3 * c_), 0.0f);
    project_back(heads_out_, p_.wo, dy.span(), g_.wo, g_.bo, d_heads_out_, rows, c_, c_);
    for (int64_t b = 0; b < x.dim(0); ++b) {
      for (int64_t h = 0; h < heads_; ++h) head_backward(b, h, x.dim(1));
    }
    project_back(x.span(), p_.wqkv, d_qkv_, g_.wqkv, g_.bqkv, dx ? dx->span() : std::span<float>(),
                 rows, c_, 3 * c_);
  }
  // Per sequence of T tokens: the projections (2 T C 3C + 2 T C C), scores and weighted sums
  // (2 x 2 T^2 C over the full T x T matrix), softmax (~5 H T^2); backward twice the matmuls.
  Cost forward_cost(const Shape& input) const override {
    const Terms t = terms(input);
    return cost(t.projections + t.scores + t.softmax, t.moved, OpKind::kGemm);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const Terms t = terms(input);
    const double skipped = input_grad ? 0.0 : t.projections * 3.0 / 8.0;  // dx of the qkv GEMM
    return cost(2 * (t.projections + t.scores) + 2 * t.softmax - skipped, 2 * t.moved,
                OpKind::kGemm);
  }

 private:
  struct Terms {
    double projections, scores, softmax, moved;
  };
  Terms terms(const Shape& input) const {
    const double b = static_cast<double>(input[0]), t = static_cast<double>(input[1]);
    const double c = static_cast<double>(c_), h = static_cast<double>(heads_);
    const double bias = bias_ ? 1.0 : 0.0;
    return {.projections = b * t * (8 * c * c + bias * 4 * c),
            .scores = 4 * b * t * t * c,
            .softmax = 5 * b * h * t * t,
            .moved = b * t * c * 6 + 4 * c * c + 2 * b * h * t * t};
  }
  const float* q(int64_t row, int64_t h) const { return qkv_.data() + row * 3 * c_ + h * d(); }
  int64_t d() const { return c_ / heads_; }
  float* probs(int64_t b, int64_t h, int64_t steps) {
    return probs_.data() + (b * heads_ + h) * steps * steps;
  }
  void head_forward(int64_t b, int64_t h, int64_t steps) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(d()));
    float* p = probs(b, h, steps);
    for (int64_t t = 0; t < steps; ++t) {
      const float* qt = q(b * steps + t, h);
      float* row = p + t * steps;
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t s = 0; s <= t; ++s) {
        const float* ks = q(b * steps + s, h) + c_;
        float dot = 0.0f;
        for (int64_t i = 0; i < d(); ++i) dot += qt[i] * ks[i];
        row[s] = dot * scale;
        top = std::max(top, row[s]);
      }
      float sum = 0.0f;
      for (int64_t s = 0; s <= t; ++s) sum += (row[s] = std::exp(row[s] - top));
      for (int64_t s = 0; s < steps; ++s) row[s] = s <= t ? row[s] / sum : 0.0f;
      float* out = heads_out_.data() + (b * steps + t) * c_ + h * d();
      std::fill(out, out + d(), 0.0f);
      for (int64_t s = 0; s <= t; ++s) {
        const float* vs = q(b * steps + s, h) + 2 * c_;
        for (int64_t i = 0; i < d(); ++i) out[i] += row[s] * vs[i];
      }
    }
  }
  void head_backward(int64_t b, int64_t h, int64_t steps) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(d()));
    const float* p = probs(b, h, steps);
    std::vector<float> dp(static_cast<size_t>(steps));
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t rt = b * steps + t;
      const float* go = d_heads_out_.data() + rt * c_ + h * d();
      const float* row = p + t * steps;
      float weighted = 0.0f;
      for (int64_t s = 0; s <= t; ++s) {
        const int64_t rs = b * steps + s;
        const float* vs = q(rs, h) + 2 * c_;
        float* dvs = d_qkv_.data() + rs * 3 * c_ + 2 * c_ + h * d();
        float dot = 0.0f;
        for (int64_t i = 0; i < d(); ++i) {
          dot += go[i] * vs[i];
          dvs[i] += row[s] * go[i];
        }
        dp[static_cast<size_t>(s)] = dot;
        weighted += row[s] * dot;
      }
      float* dqt = d_qkv_.data() + rt * 3 * c_ + h * d();
      for (int64_t s = 0; s <= t; ++s) {
        const int64_t rs = b * steps + s;
        const float ds = row[s] * (dp[static_cast<size_t>(s)] - weighted) * scale;
        const float* ks = q(rs, h) + c_;
        const float* qt = q(rt, h);
        float* dks = d_qkv_.data() + rs * 3 * c_ + c_ + h * d();
        for (int64_t i = 0; i < d(); ++i) {
          dqt[i] += ds * ks[i];
          dks[i] += ds * qt[i];
        }
      }
    }
  }

  int64_t c_, heads_;
  bool bias_;
  AttentionParams p_, g_;
  std::vector<float> qkv_, heads_out_, probs_, d_heads_out_, d_qkv_;
};

// Parameters and costs only: forward and backward refuse to run.
class CostOnly : public Layer {
 public:
  void forward(const Tensor& /*x*/, Tensor& /*y*/, const StepContext& /*ctx*/) override {
    throw InternalError(std::string(kind()) +
                        ": cost-only layer; its forward math is not implemented");
  }
  void backward(const Tensor& /*x*/, const Tensor& /*y*/, const Tensor& /*dy*/,
                Tensor* /*dx*/) override {
    throw InternalError(std::string(kind()) +
                        ": cost-only layer; its backward math is not implemented");
  }
};

class Swiglu final : public CostOnly {
 public:
  Swiglu(int64_t width, int64_t hidden, Bias bias)
      : c_(width), hidden_(hidden), bias_(bias == Bias::kYes) {
    layers::require_arg(width > 0, "swiglu", "width", width, "> 0");
    layers::require_arg(hidden > 0, "swiglu", "hidden", hidden, "> 0");
  }
  std::string_view kind() const override { return "swiglu"; }
  Shape output_shape(const Shape& input) const override {
    layers::require_shape(input.size() >= 2 && input.back() == c_, "swiglu", input,
                          "(batch, ..., " + std::to_string(c_) + ")");
    return input;
  }
  int64_t num_params() const override { return 3 * c_ * hidden_ + (bias_ ? 2 * hidden_ + c_ : 0); }
  // Three GEMMs of 2 R C hidden, and silu and the product (~6 flops per hidden element).
  Cost forward_cost(const Shape& input) const override {
    const double r = rows(input), c = static_cast<double>(c_), h = static_cast<double>(hidden_);
    return cost(6 * r * c * h + 6 * r * h, 2 * r * c + 3 * c * h + 4 * r * h, OpKind::kGemm);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const double r = rows(input), c = static_cast<double>(c_), h = static_cast<double>(hidden_);
    const double dx = input_grad ? 4 * r * c * h : 0.0;
    return cost(8 * r * c * h + dx + 10 * r * h, 4 * r * c + 9 * c * h + 8 * r * h, OpKind::kGemm);
  }

 private:
  double rows(const Shape& input) const {
    return static_cast<double>(numel(input)) / static_cast<double>(c_);
  }
  int64_t c_, hidden_;
  bool bias_;
};

class TiedDense final : public CostOnly {
 public:
  TiedDense(int64_t width, int64_t vocabulary) : c_(width), vocab_(vocabulary) {
    layers::require_arg(width > 0, "tied_dense", "width", width, "> 0");
    layers::require_arg(vocabulary > 0, "tied_dense", "vocabulary", vocabulary, "> 0");
  }
  std::string_view kind() const override { return "tied_dense"; }
  Shape output_shape(const Shape& input) const override {
    layers::require_shape(input.size() >= 2 && input.back() == c_, "tied_dense", input,
                          "(batch, ..., " + std::to_string(c_) + ")");
    Shape shape = input;
    shape.back() = vocab_;
    return shape;
  }
  Cost forward_cost(const Shape& input) const override {
    const double r = rows(input), c = static_cast<double>(c_), v = static_cast<double>(vocab_);
    return cost(2 * r * c * v, r * c + c * v + r * v, OpKind::kGemm);
  }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    const double r = rows(input), c = static_cast<double>(c_), v = static_cast<double>(vocab_);
    const double dx = input_grad ? 2 * r * c * v : 0.0;
    return cost(2 * r * c * v + dx, r * v + r * c + 2 * c * v + (input_grad ? c * v + r * c : 0.0),
                OpKind::kGemm);
  }

 private:
  double rows(const Shape& input) const {
    return static_cast<double>(numel(input)) / static_cast<double>(c_);
  }
  int64_t c_, vocab_;
};

}  // namespace

std::unique_ptr<Layer> embedding(int64_t vocabulary, int64_t width, int64_t positions) {
  return std::make_unique<Embedding>(vocabulary, width, positions);
}
std::unique_ptr<Layer> attention(int64_t width, int64_t heads, Bias bias) {
  return std::make_unique<Attention>(width, heads, bias);
}
std::unique_ptr<Layer> swiglu(int64_t width, int64_t hidden, Bias bias) {
  return std::make_unique<Swiglu>(width, hidden, bias);
}
std::unique_ptr<Layer> tied_dense(int64_t width, int64_t vocabulary) {
  return std::make_unique<TiedDense>(width, vocabulary);
}

}  // namespace syncopate
