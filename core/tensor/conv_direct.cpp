// The image is first copied inside a border of zeros (one pixel), so that every tap of every
// output is a plain load. Each output row is then computed in chunks of N pixels (16, 8 or 4: the
// widest that the row holds, or 1), the last chunk ending at the row's end and overlapping the
// one before it where N does not divide the width:
// - forward writes each output from its inputs only, so the overlap is written twice, alike;
// - the weight gradient sums over the outputs, so the last chunk drops the lanes that the chunk
//   before it already counted.
// A chunk of 16 is computed in passes of L lanes (lanes::sixteen_lanes(): 16 or 8). Every lane of
// every pass computes what it would in a pass of 16, in the same order, so the bits do not
// depend on L.
#include "core/tensor/conv_direct.hpp"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor/lanes.hpp"

namespace syncopate::conv_direct {
namespace {

constexpr int64_t kTaps = 9;

template <int N>
using Vec = std::conditional_t<N == 1, float, typename lanes::Lanes<N>::F>;

// x (cin, h, w) inside a zero border: (cin, h + 2, w + 2), in this thread's scratch.
const float* bordered(const float* x, int64_t cin, int64_t h, int64_t w) {
  thread_local std::vector<float> pixels;
  const int64_t rs = w + 2, plane = (h + 2) * rs;
  pixels.assign(static_cast<size_t>(cin * plane), 0.0f);
  for (int64_t c = 0; c < cin; ++c)
    for (int64_t y = 0; y < h; ++y)
      std::copy_n(x + (c * h + y) * w, w, pixels.data() + c * plane + (y + 1) * rs + 1);
  return pixels.data();
}

// Zeroes v's lanes of columns before `next` when the chunk starts early at x0 (a last chunk
// overlapping the one before): those columns were counted already.
template <int N, size_t... Is>
[[gnu::always_inline]] inline void drop_counted(Vec<N>& v, int64_t x0, int64_t next,
                                                std::index_sequence<Is...>) {
  if constexpr (N > 1) {
    using I = typename lanes::Lanes<N>::I;
    const I column = I{static_cast<int32_t>(Is)...} + static_cast<int32_t>(x0);
    v = column >= static_cast<int32_t>(next) ? v : Vec<N>{};
  }
}

// One chunk's bordered rows row, row + 1 and row + 2 at shifts 0, 1 and 2 (v[ky][kx]), while
// output rows go down: each bordered row is loaded once and serves the three output rows that
// read it.
template <int N>
struct RowWindow {
  // For output row 0; `in` is the chunk's first pixel in bordered row 0, rows `rs` floats apart.
  [[gnu::always_inline]] RowWindow(const float* in, int64_t rs) : in_(in), rs_(rs) {
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t kx = 0; kx < 3; ++kx) lanes::load(v[r][kx], in + r * rs + kx);
  }
  // Completes the window for output row `row` (loads bordered row row + 2).
  [[gnu::always_inline]] void complete(int64_t row) {
    for (int64_t kx = 0; kx < 3; ++kx) lanes::load(v[2][kx], in_ + (row + 2) * rs_ + kx);
  }
  // Moves down one row.
  [[gnu::always_inline]] void slide() {
    for (int64_t kx = 0; kx < 3; ++kx) {
      v[0][kx] = v[1][kx];
      v[1][kx] = v[2][kx];
    }
  }
  [[gnu::always_inline]] void get(Vec<N>& x, int64_t ky, int64_t kx) const { x = v[ky][kx]; }
  Vec<N> v[3][3];
  const float* in_;
  int64_t rs_;
};

// The same window read from memory at each use (it stays in the first-level cache): the weight
// gradient's, in passes narrower than 16 lanes. There the nine accumulators and the nine
// vectors of RowWindow do not fit 16 registers (AVX2's); reloading took the cnn's first weight
// gradient from 1.13 to 0.73 ms a batch (`BM_Conv/cnn_conv1_bwd_no_dx`, AVX2). The forward keeps
// RowWindow: its accumulator is one vector, and reloading made it slower (0.65 -> 0.69 ms).
template <int N>
struct RowLoads {
  [[gnu::always_inline]] RowLoads(const float* in, int64_t rs) : in_(in), rs_(rs) {}
  [[gnu::always_inline]] void complete(int64_t row) { row_ = row; }
  [[gnu::always_inline]] void slide() {}
  [[gnu::always_inline]] void get(Vec<N>& x, int64_t ky, int64_t kx) const {
    lanes::load(x, in_ + (row_ + ky) * rs_ + kx);
  }
  const float* in_;
  int64_t rs_;
  int64_t row_ = 0;
};
template <int L>
using GradWindow = std::conditional_t<(L < 16), RowLoads<L>, RowWindow<L>>;

// Output channels [c, c + kBlock) at once, input channel by input channel: their 9 x kBlock
// weights stay in registers, and each bordered row is loaded once (at its three shifts) for the
// three output rows it serves.
constexpr int64_t kBlock = 2;

// Forward of output channels [c0, c0 + B): the first input channel's sums start from the bias,
// each next one's from the outputs so far. Chunks of N pixels, in passes of L.
template <int N, int L, int64_t B>
[[gnu::always_inline]] inline void forward_channels(const float* xp, int64_t cin, int64_t h,
                                                    int64_t w, const float* weights, int64_t c0,
                                                    const float* bias, float* y) {
  using V = Vec<L>;
  const int64_t rs = w + 2, plane = (h + 2) * rs;
  for (int64_t ci = 0; ci < cin; ++ci) {
    float taps[B][kTaps];
    for (int64_t j = 0; j < B; ++j)
      for (int64_t k = 0; k < kTaps; ++k) taps[j][k] = weights[((c0 + j) * cin + ci) * kTaps + k];
    for (int64_t next = 0; next < w; next += N) {
      for (int64_t x0 = std::min(next, w - N), end = x0 + N; x0 < end; x0 += L) {
        RowWindow<L> window(xp + ci * plane + x0, rs);
        for (int64_t row = 0; row < h; ++row) {
          window.complete(row);
          for (int64_t j = 0; j < B; ++j) {
            float* out = y + ((c0 + j) * h + row) * w + x0;
            V acc{};
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                V x;
                window.get(x, ky, kx);
                acc += taps[j][ky * 3 + kx] * x;
              }
            V sum;
            if (ci > 0) {
              lanes::load(sum, out);
              drop_counted<L>(acc, x0, next, std::make_index_sequence<L>());
              sum += acc;
            } else {
              sum = bias ? acc + bias[c0 + j] : acc;
            }
            lanes::store(out, sum);
          }
          window.slide();
        }
      }
    }
  }
}

template <int N, int L>
[[gnu::always_inline]] inline void forward_rows(const float* xp, int64_t cin, int64_t h, int64_t w,
                                                const float* weights, int64_t cout,
                                                const float* bias, float* y) {
  int64_t c = 0;
  for (; c + kBlock <= cout; c += kBlock)
    forward_channels<N, L, kBlock>(xp, cin, h, w, weights, c, bias, y);
  for (; c < cout; ++c) forward_channels<N, L, 1>(xp, cin, h, w, weights, c, bias, y);
}

// The sum of v's lanes, halves added pairwise (Is: the lanes of one half): 4 dependent
// additions for 16 lanes, not 15.
template <int N, size_t... Is>
[[gnu::always_inline]] inline float lane_sum(const Vec<N>& v, std::index_sequence<Is...>) {
  if constexpr (N == 1) {
    return v;
  } else if constexpr (N == 2) {
    return v[0] + v[1];
  } else {
    const Vec<N / 2> halves =
        __builtin_shufflevector(v, v, Is...) + __builtin_shufflevector(v, v, (Is + N / 2)...);
    return lane_sum<N / 2>(halves, std::make_index_sequence<N / 4>());
  }
}

// The sum of the lanes of a vector of N lanes held as N / L passes of L (pass p: lanes [p L,
// p L + L)), added as lane_sum<N> adds them: lane i and lane i + N / 2 first.
template <int N, int L>
[[gnu::always_inline]] inline float pass_sum(Vec<L> (&passes)[N / L]) {
  for (int n = N / L; n > 1; n /= 2)
    for (int p = 0; p < n / 2; ++p) passes[p] += passes[p + n / 2];
  return lane_sum<L>(passes[0], std::make_index_sequence<L / 2>());
}

template <int N, int L>
[[gnu::always_inline]] inline void weight_grad_rows(const float* xp, int64_t cin, int64_t h,
                                                    int64_t w, const float* dy, int64_t cout,
                                                    float* dw) {
  using V = Vec<L>;
  const int64_t rs = w + 2, plane = (h + 2) * rs;
  for (int64_t c = 0; c < cout; ++c) {
    for (int64_t ci = 0; ci < cin; ++ci) {
      V sums[kTaps][N / L];
      for (int64_t pass = 0; pass < N / L; ++pass) {
        V acc[kTaps] = {};
        for (int64_t next = 0; next < w; next += N) {
          const int64_t x0 = std::min(next, w - N) + pass * L;
          GradWindow<L> window(xp + ci * plane + x0, rs);
          for (int64_t row = 0; row < h; ++row) {
            window.complete(row);
            V d;
            lanes::load(d, dy + (c * h + row) * w + x0);
            drop_counted<L>(d, x0, next, std::make_index_sequence<L>());
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                V x;
                window.get(x, ky, kx);
                acc[ky * 3 + kx] += d * x;
              }
            window.slide();
          }
        }
        for (int64_t k = 0; k < kTaps; ++k) sums[k][pass] = acc[k];
      }
      float* out = dw + (c * cin + ci) * kTaps;
      for (int64_t k = 0; k < kTaps; ++k) out[k] += pass_sum<N, L>(sums[k]);
    }
  }
}

}  // namespace

bool applies(int64_t kernel, int64_t stride, int64_t padding) {
  return kernel == 3 && stride == 1 && padding == 1;
}

SYNCOPATE_VECTOR_CLONES
void forward(const float* x, int64_t cin, int64_t h, int64_t w, const float* weights, int64_t cout,
             const float* bias, float* y) {
  const float* xp = bordered(x, cin, h, w);
  if (w >= 16) {
    if (lanes::sixteen_lanes())
      forward_rows<16, 16>(xp, cin, h, w, weights, cout, bias, y);
    else
      forward_rows<16, 8>(xp, cin, h, w, weights, cout, bias, y);
  } else if (w >= 8) {
    forward_rows<8, 8>(xp, cin, h, w, weights, cout, bias, y);
  } else if (w >= 4) {
    forward_rows<4, 4>(xp, cin, h, w, weights, cout, bias, y);
  } else {
    forward_rows<1, 1>(xp, cin, h, w, weights, cout, bias, y);
  }
}

SYNCOPATE_VECTOR_CLONES
void add_weight_grad(const float* x, int64_t cin, int64_t h, int64_t w, const float* dy,
                     int64_t cout, float* dw) {
  const float* xp = bordered(x, cin, h, w);
  if (w >= 16) {
    if (lanes::sixteen_lanes())
      weight_grad_rows<16, 16>(xp, cin, h, w, dy, cout, dw);
    else
      weight_grad_rows<16, 8>(xp, cin, h, w, dy, cout, dw);
  } else if (w >= 8) {
    weight_grad_rows<8, 8>(xp, cin, h, w, dy, cout, dw);
  } else if (w >= 4) {
    weight_grad_rows<4, 4>(xp, cin, h, w, dy, cout, dw);
  } else {
    weight_grad_rows<1, 1>(xp, cin, h, w, dy, cout, dw);
  }
}

}  // namespace syncopate::conv_direct
