#pragma once
// Test helpers for the layer tests: double-precision reference layers and a finite-difference
// gradient check. The references are written from the textbook definitions, independently of
// the float kernels under test.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "core/nn/layer.hpp"
#include "core/tensor/tensor.hpp"

namespace syncopate::testing {

using Vec = std::vector<double>;
// A reference forward: (input, parameters) -> output, all in double.
using RefForward = std::function<Vec(const Vec& x, const Vec& params)>;

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = dist(gen);
  return v;
}

inline Vec to_double(std::span<const float> v) { return Vec(v.begin(), v.end()); }

// ||a - b|| / ||b|| (or the plain norm of a - b when b is zero).
inline double normalised_error(const Vec& a, const Vec& b) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    ref += b[i] * b[i];
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

// Conv reference: x (B, Cin, H, W), w (Cout, Cin, k, k) at params[w_at], bias (Cout) at b_at
// (b_at < 0: no bias).
inline Vec conv_ref(const Vec& x, const Vec& p, int64_t w_at, int64_t b_at, int64_t batch,
                    int64_t cin, int64_t h, int64_t w, int64_t cout, int64_t k, int64_t s,
                    int64_t pad) {
  const int64_t ho = (h + 2 * pad - k) / s + 1, wo = (w + 2 * pad - k) / s + 1;
  Vec y(static_cast<size_t>(batch * cout * ho * wo));
  size_t at = 0;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double sum = b_at >= 0 ? p[static_cast<size_t>(b_at + co)] : 0.0;
          for (int64_t ci = 0; ci < cin; ++ci)
            for (int64_t ky = 0; ky < k; ++ky)
              for (int64_t kx = 0; kx < k; ++kx) {
                const int64_t iy = oy * s - pad + ky, ix = ox * s - pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                sum += p[static_cast<size_t>(w_at + ((co * cin + ci) * k + ky) * k + kx)] *
                       x[static_cast<size_t>(((n * cin + ci) * h + iy) * w + ix)];
              }
          y[at++] = sum;
        }
  return y;
}

inline Vec relu_ref(Vec v) {
  for (double& d : v) d = d > 0 ? d : 0;
  return v;
}

struct GradCheckOptions {
  std::vector<float> x;  // the input; random N(0, 1) when empty
  bool input_grad = true;
  uint32_t seed = 1;
  double tolerance = 1e-3;
  double forward_tolerance = 1e-5;
  double eps = 1e-6;
  StepContext ctx{};
};

// Binds the layer to fresh random parameters, runs its float forward and backward, and compares
// them with the double reference: the forward output, and the input and parameter gradients of
// J = sum(r * y) (r random) against central differences of the reference. Parameter gradients
// start from a random value to check that backward accumulates.
inline void check_layer(Layer& layer, const Shape& in_shape, const RefForward& ref,
                        GradCheckOptions opt = {}) {
  const size_t np = static_cast<size_t>(layer.num_params());
  std::vector<float> params = random_floats(np, opt.seed + 1, 0.5f);
  const std::vector<float> grads0 = random_floats(np, opt.seed + 2);
  std::vector<float> grads = grads0;
  layer.bind(params, grads);
  Tensor x(in_shape, opt.x.empty()
                         ? random_floats(static_cast<size_t>(numel(in_shape)), opt.seed + 3)
                         : opt.x);
  Tensor y(layer.output_shape(in_shape));
  layer.forward(x, y, opt.ctx);
  const Vec xd = to_double(x.span()), pd = to_double(params);
  const Vec y_ref = ref(xd, pd);
  ASSERT_EQ(y_ref.size(), static_cast<size_t>(y.numel()));
  EXPECT_LT(normalised_error(to_double(y.span()), y_ref), opt.forward_tolerance) << "forward";

  Tensor dy(y.shape(), random_floats(static_cast<size_t>(y.numel()), opt.seed + 4));
  Tensor dx(in_shape);
  dx.fill(12345.0f);  // backward must overwrite, not accumulate into, dx
  layer.backward(x, y, dy, opt.input_grad ? &dx : nullptr);

  const Vec r = to_double(dy.span());
  auto objective = [&](const Vec& xv, const Vec& pv) {
    const Vec out = ref(xv, pv);
    double j = 0;
    for (size_t i = 0; i < out.size(); ++i) j += r[i] * out[i];
    return j;
  };
  if (opt.input_grad) {
    Vec fd(xd.size());
    Vec xv = xd;
    for (size_t i = 0; i < xv.size(); ++i) {
      xv[i] = xd[i] + opt.eps;
      const double plus = objective(xv, pd);
      xv[i] = xd[i] - opt.eps;
      const double minus = objective(xv, pd);
      xv[i] = xd[i];
      fd[i] = (plus - minus) / (2 * opt.eps);
    }
    EXPECT_LT(normalised_error(to_double(dx.span()), fd), opt.tolerance) << "input gradient";
  }
  if (np > 0) {
    Vec fd(np), got(np);
    Vec pv = pd;
    for (size_t i = 0; i < np; ++i) {
      pv[i] = pd[i] + opt.eps;
      const double plus = objective(xd, pv);
      pv[i] = pd[i] - opt.eps;
      const double minus = objective(xd, pv);
      pv[i] = pd[i];
      fd[i] = (plus - minus) / (2 * opt.eps);
      got[i] = static_cast<double>(grads[i]) - static_cast<double>(grads0[i]);
    }
    EXPECT_LT(normalised_error(got, fd), opt.tolerance) << "parameter gradient";
  }
}

}  // namespace syncopate::testing
