// Each output row is pooled in chunks of N windows (N = 16, 8 or 4: the widest that the row
// holds), as GCC's and clang's vector extension, which each copy lowers to its own registers.
// A row whose width N does not divide ends with a chunk that overlaps the one before it: every
// window's results depend on its inputs only, so the windows computed twice are written twice
// with the same values. Rows narrower than 4 windows run one window at a time.
#include "core/nn/maxpool_2x2.hpp"

#include <algorithm>
#include <utility>

#include "core/tensor/lanes.hpp"

namespace syncopate::maxpool_2x2 {
namespace {

using lanes::Lanes;
using lanes::load;
using lanes::store;

// Windows [ox, ox + N) of output row oy: even lanes of the two input rows are the windows' left
// inputs, odd lanes their right ones. The selects are those of the scalar code below, lane by
// lane: std::max(a, b) is `a < b ? b : a`.
template <int N, size_t... Is>
[[gnu::always_inline]] inline void forward_chunk(const float* top_row, const float* bottom_row,
                                                 int32_t first, int32_t row, bool relu, float* out,
                                                 int32_t* best_at, std::index_sequence<Is...>) {
  using F = typename Lanes<N>::F;
  using I = typename Lanes<N>::I;
  F t0, t1, b0, b1;
  load(t0, top_row);
  load(t1, top_row + N);
  load(b0, bottom_row);
  load(b1, bottom_row + N);
  const F a = __builtin_shufflevector(t0, t1, (2 * Is)...);
  const F b = __builtin_shufflevector(t0, t1, (2 * Is + 1)...);
  const F c = __builtin_shufflevector(b0, b1, (2 * Is)...);
  const F d = __builtin_shufflevector(b0, b1, (2 * Is + 1)...);
  const I right_top = b > a, right_bottom = d > c;  // -1 where true
  const F top = right_top ? b : a, bottom = right_bottom ? d : c;
  const I lower = bottom > top;
  F best = lower ? bottom : top;
  if (relu) {
    const F zero{};
    best = best > zero ? best : zero;
  }
  const I left = I{static_cast<int32_t>(2 * Is)...} + first;
  const I at = left + (lower ? row - right_bottom : -right_top);
  store(out, best);
  store(best_at, at);
}

// Interleaves a and b's lanes [half * N / 2, (half + 1) * N / 2): a0 b0 a1 b1 ...
template <int N, size_t Lane, int Half>
constexpr int interleaved = static_cast<int>(N / 2 * Half + Lane / 2 + (Lane % 2) * N);

template <int N, size_t... Is>
[[gnu::always_inline]] inline void backward_chunk(const float* grad, const int32_t* best_at,
                                                  const float* out, int32_t first, int32_t row,
                                                  float* top_row, float* bottom_row,
                                                  std::index_sequence<Is...>) {
  using F = typename Lanes<N>::F;
  using I = typename Lanes<N>::I;
  const F zero{};
  F g;
  load(g, grad);
  g += 0.0f;  // -0 becomes +0, as 0 + g does in a scatter
  if (out) {
    F kept;
    load(kept, out);
    g = kept > zero ? g : zero;
  }
  I at;
  load(at, best_at);
  at -= I{static_cast<int32_t>(2 * Is)...} + first;  // 0, 1, w or w + 1
  const F a = at == 0 ? g : zero, b = at == 1 ? g : zero;
  const F c = at == row ? g : zero, e = at == row + 1 ? g : zero;
  const F top0 = __builtin_shufflevector(a, b, interleaved<N, Is, 0>...);
  const F top1 = __builtin_shufflevector(a, b, interleaved<N, Is, 1>...);
  const F bottom0 = __builtin_shufflevector(c, e, interleaved<N, Is, 0>...);
  const F bottom1 = __builtin_shufflevector(c, e, interleaved<N, Is, 1>...);
  store(top_row, top0);
  store(top_row + N, top1);
  store(bottom_row, bottom0);
  store(bottom_row + N, bottom1);
}

template <int N>
[[gnu::always_inline]] inline void forward_rows(const float* in, int64_t ho, int64_t w, bool relu,
                                                float* out, int32_t* best_at) {
  const int64_t wo = w / 2;
  const int32_t row = static_cast<int32_t>(w);
  for (int64_t oy = 0; oy < ho; ++oy) {
    const float* top = in + 2 * oy * w;
    const int32_t base = static_cast<int32_t>(2 * oy * w);
    for (int64_t next = 0; next < wo; next += N) {
      const int64_t ox = std::min(next, wo - N);  // the last chunk ends at the row's end
      forward_chunk<N>(top + 2 * ox, top + w + 2 * ox, base + static_cast<int32_t>(2 * ox), row,
                       relu, out + oy * wo + ox, best_at + oy * wo + ox,
                       std::make_index_sequence<N>());
    }
  }
}

template <int N>
[[gnu::always_inline]] inline void backward_rows(const float* grad, const int32_t* best_at,
                                                 const float* out, int64_t h, int64_t w, float* d) {
  const int64_t wo = w / 2;
  const int32_t row = static_cast<int32_t>(w);
  for (int64_t oy = 0; oy < h / 2; ++oy) {
    float* top = d + 2 * oy * w;
    const int32_t base = static_cast<int32_t>(2 * oy * w);
    const int64_t o = oy * wo;
    for (int64_t next = 0; next < wo; next += N) {
      const int64_t ox = std::min(next, wo - N);
      backward_chunk<N>(grad + o + ox, best_at + o + ox, out ? out + o + ox : nullptr,
                        base + static_cast<int32_t>(2 * ox), row, top + 2 * ox, top + w + 2 * ox,
                        std::make_index_sequence<N>());
    }
  }
}

// One window at a time, with integer comparison results so that no branch depends on the data.
void forward_scalar(const float* in, int64_t ho, int64_t w, bool relu, float* out,
                    int32_t* best_at) {
  const int64_t wo = w / 2;
  const int32_t row = static_cast<int32_t>(w);
  for (int64_t oy = 0; oy < ho; ++oy) {
    const float* r0 = in + 2 * oy * w;
    const float* r1 = r0 + w;
    const int32_t base = static_cast<int32_t>(2 * oy * w);
    for (int64_t ox = 0; ox < wo; ++ox) {
      const float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
      const int32_t right_top = b > a, right_bottom = d > c;
      const float top = std::max(a, b), bottom = std::max(c, d);
      const int32_t lower = bottom > top;
      const int32_t top_at = right_top, bottom_at = row + right_bottom;
      const float best = std::max(top, bottom);
      *out++ = relu && !(best > 0.0f) ? 0.0f : best;
      *best_at++ = base + static_cast<int32_t>(2 * ox) + top_at + lower * (bottom_at - top_at);
    }
  }
}

void backward_scalar(const float* grad, const int32_t* best_at, const float* out, int64_t h,
                     int64_t w, float* d) {
  const int64_t wo = w / 2;
  const int32_t row = static_cast<int32_t>(w);
  for (int64_t oy = 0; oy < h / 2; ++oy) {
    float* top = d + 2 * oy * w;
    float* bottom = top + w;
    const int32_t base = static_cast<int32_t>(2 * oy * w);
    for (int64_t ox = 0; ox < wo; ++ox) {
      const int64_t i = oy * wo + ox;
      const float g = !out || out[i] > 0.0f ? grad[i] + 0.0f : 0.0f;
      const int32_t at = best_at[i] - base - static_cast<int32_t>(2 * ox);
      top[2 * ox] = at == 0 ? g : 0.0f;
      top[2 * ox + 1] = at == 1 ? g : 0.0f;
      bottom[2 * ox] = at == row ? g : 0.0f;
      bottom[2 * ox + 1] = at == row + 1 ? g : 0.0f;
    }
  }
}

}  // namespace

SYNCOPATE_VECTOR_CLONES
void forward(const float* in, int64_t h, int64_t w, bool relu, float* out, int32_t* best_at) {
  const int64_t ho = h / 2, wo = w / 2;
  if (wo >= 16) {
    forward_rows<16>(in, ho, w, relu, out, best_at);
  } else if (wo >= 8) {
    forward_rows<8>(in, ho, w, relu, out, best_at);
  } else if (wo >= 4) {
    forward_rows<4>(in, ho, w, relu, out, best_at);
  } else {
    forward_scalar(in, ho, w, relu, out, best_at);
  }
}

SYNCOPATE_VECTOR_CLONES
void backward(const float* grad, const int32_t* best_at, const float* out, int64_t h, int64_t w,
              float* d) {
  const int64_t wo = w / 2;
  if (wo >= 16) {
    backward_rows<16>(grad, best_at, out, h, w, d);
  } else if (wo >= 8) {
    backward_rows<8>(grad, best_at, out, h, w, d);
  } else if (wo >= 4) {
    backward_rows<4>(grad, best_at, out, h, w, d);
  } else {
    backward_scalar(grad, best_at, out, h, w, d);
  }
}

}  // namespace syncopate::maxpool_2x2
