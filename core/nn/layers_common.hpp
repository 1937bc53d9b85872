#pragma once
// Helpers shared by the layer implementations (core/nn/layers_*.cpp); not part of the public API.
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/base/check.hpp"
#include "core/nn/cost.hpp"
#include "core/nn/layer.hpp"
#include "core/base/rng.hpp"
#include "core/tensor/tensor.hpp"

namespace syncopate::layers {

inline constexpr double kFloatBytes = sizeof(float);

// A cost in flops and float elements moved.
inline Cost cost(double flops, double elements_moved, OpKind kind) {
  return {flops, elements_moved * kFloatBytes, kind};
}

// Throws UserError unless `ok`: a layer was given an input shape it cannot take.
inline void require_shape(bool ok, std::string_view layer, const Shape& input,
                          const std::string& expected) {
  if (!ok) {
    throw UserError(std::string(layer) + ": input shape " + to_string(input) +
                    " does not fit; allowed: " + expected);
  }
}

// Checks a layer's constructor argument.
inline void require_arg(bool ok, std::string_view layer, std::string_view field, int64_t value,
                        std::string_view allowed) {
  if (!ok) {
    throw UserError(std::string(layer) + ": " + std::string(field) + " = " + std::to_string(value) +
                    " is invalid; allowed: " + std::string(allowed));
  }
}

// He: std = sqrt(2 / fan_in); Xavier (Glorot normal): std = sqrt(2 / (fan_in + fan_out)).
inline double init_std(InitScheme scheme, int64_t fan_in, int64_t fan_out) {
  return scheme == InitScheme::kHe ? std::sqrt(2.0 / static_cast<double>(fan_in))
                                   : std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
}

// Fills w with N(0, stddev^2) draws, in order.
inline void fill_normal(std::span<float> w, Rng& rng, double stddev) {
  for (float& v : w) v = static_cast<float>(stddev * rng.normal());
}

}  // namespace syncopate::layers
