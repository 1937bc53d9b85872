#pragma once
// A whole model (a ModelSpec layer list) run through the reference loops of
// reference.hpp: forward in eval mode (dropout is the identity) and backward.
#include <span>
#include <vector>

#include "backends/cuda/cuda_model.hpp"
#include "tests/cuda/reference.hpp"

namespace syncopate::cuda::reference {

// The reference model: activations in float between layers (like the device), each layer's
// math in double.
struct ReferenceRun {
  std::vector<std::vector<float>> acts;  // acts[i] is layer i's input
  std::vector<Shape> shapes;
  Vec grads;
};

inline std::vector<float> to_float(const Vec& v) { return {v.begin(), v.end()}; }

inline Pool pool_of(const LayerSpec& l, const Shape& s) {
  const bool global = l.kind == LayerKind::kGlobalAvgPool;
  return {s[0], s[1], s[2], s[3], global ? s[2] : l.kernel, global ? 1 : l.stride};
}

inline Conv conv_of(const LayerSpec& l, const Shape& s) {
  return {s[0], s[1], s[2], s[3], l.out, l.kernel, l.stride, l.padding};
}

// Forward in eval mode (dropout is the identity).
inline ReferenceRun reference_forward(const ModelSpec& spec, std::span<const float> params,
                                      const std::vector<float>& x, int64_t batch) {
  ReferenceRun run;
  Shape shape = {batch};
  shape.insert(shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  run.acts.push_back(x);
  run.shapes.push_back(shape);
  size_t offset = 0;
  for (const LayerSpec& l : spec.layers) {
    const std::vector<float>& in = run.acts.back();
    const Shape out_shape = output_shape(l, shape);
    const float* w = params.data() + offset;
    std::vector<float> out;
    Vec y, unused;
    switch (l.kind) {
      case LayerKind::kDense:
        out = to_float(dense_forward(in, {w, size_t(l.in * l.out)},
                                     {w + l.in * l.out, size_t(l.out)}, batch, l.in, l.out));
        break;
      case LayerKind::kConv2d: {
        const size_t nw = size_t(l.out * l.in * l.kernel * l.kernel);
        out = to_float(conv_forward(in, {w, nw}, {w + nw, size_t(l.out)}, conv_of(l, shape)));
        break;
      }
      case LayerKind::kMaxPool2d:
        maxpool(in, {}, pool_of(l, shape), y, unused);
        out = to_float(y);
        break;
      case LayerKind::kAvgPool2d:
      case LayerKind::kGlobalAvgPool:
        avgpool(in, {}, pool_of(l, shape), y, unused);
        out = to_float(y);
        break;
      case LayerKind::kRelu:
        for (const float v : in) out.push_back(v > 0 ? v : 0.0f);
        break;
      case LayerKind::kFlatten:
      case LayerKind::kDropout:
        out = in;
        break;
      default:  // layers the CUDA backend refuses
        ADD_FAILURE() << "no reference for " << to_string(l.kind);
        break;
    }
    offset += size_t(num_params(l));
    run.acts.push_back(out);
    run.shapes.push_back(out_shape);
    shape = out_shape;
  }
  return run;
}

inline void reference_backward(const ModelSpec& spec, std::span<const float> params,
                               std::vector<float> dy, ReferenceRun& run) {
  run.grads.assign(params.size(), 0.0);
  size_t end = params.size();
  for (int i = int(spec.layers.size()) - 1; i >= 0; --i) {
    const LayerSpec& l = spec.layers[size_t(i)];
    const std::vector<float>& x = run.acts[size_t(i)];
    const Shape& shape = run.shapes[size_t(i)];
    const size_t offset = end - size_t(num_params(l));
    const float* w = params.data() + offset;
    Vec dx, unused;
    switch (l.kind) {
      case LayerKind::kDense:
      case LayerKind::kConv2d: {
        const size_t nw = size_t(num_params(l) - l.out);
        const Grads g = l.kind == LayerKind::kDense
                            ? dense_backward(x, {w, nw}, dy, shape[0], l.in, l.out)
                            : conv_backward(x, {w, nw}, dy, conv_of(l, shape));
        for (size_t j = 0; j < nw; ++j) run.grads[offset + j] = g.dw[j];
        for (size_t j = 0; j < size_t(l.out); ++j) run.grads[offset + nw + j] = g.db[j];
        dx = g.dx;
        break;
      }
      case LayerKind::kMaxPool2d:
        maxpool(x, dy, pool_of(l, shape), unused, dx);
        break;
      case LayerKind::kAvgPool2d:
      case LayerKind::kGlobalAvgPool:
        avgpool(x, dy, pool_of(l, shape), unused, dx);
        break;
      case LayerKind::kRelu:
        for (size_t j = 0; j < x.size(); ++j) dx.push_back(x[j] > 0 ? dy[j] : 0.0);
        break;
      case LayerKind::kFlatten:
      case LayerKind::kDropout:
        dx = to_double(dy);
        break;
      default:  // layers the CUDA backend refuses
        ADD_FAILURE() << "no reference for " << to_string(l.kind);
        break;
    }
    dy = to_float(dx);
    end = offset;
  }
}

}  // namespace syncopate::cuda::reference
