// Prints one digest per hand-written kernel: the bits of every output and gradient of a layer
// that runs it, on fixed random data. Built twice (tests/CMakeLists.txt): against the library,
// whose kernels the loader takes as the CPU allows, and with the kernels' baseline copies only.
// ctest compares the two prints: the copies must give the same bits (core/tensor/lanes.hpp).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "core/nn/layer.hpp"
#include "core/tensor/tensor.hpp"

namespace {

using namespace syncopate;

// FNV-1a over the bytes of the floats.
uint64_t digest(std::span<const float> v, uint64_t h) {
  for (const float f : v) {
    unsigned char bytes[sizeof f];
    std::memcpy(bytes, &f, sizeof f);
    for (const unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
  }
  return h;
}

void fill(std::span<float> v, std::mt19937& gen) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& f : v) f = dist(gen);
}

// Forward and backward of `layer` on an input of shape `in` (after a ReLU when `relu`, which a
// 2x2 max pool runs inside its own passes); the digest of the output, the input gradient and the
// parameter gradients.
uint64_t run(Layer& layer, const Shape& in, bool relu) {
  std::mt19937 gen(7);
  std::vector<float> params(static_cast<size_t>(layer.num_params()));
  std::vector<float> grads(params.size(), 0.0f);
  fill(params, gen);
  layer.bind(params, grads);
  Tensor x(in), y(layer.output_shape(in)), dy(layer.output_shape(in)), dx(in);
  fill(x.span(), gen);
  fill(dy.span(), gen);
  if (relu) {
    layer.forward_after_relu(x, y, {});
    layer.backward_after_relu(x, y, dy, &dx);
  } else {
    layer.forward(x, y, {});
    layer.backward(x, y, dy, &dx);
  }
  uint64_t h = 14695981039346656037ull;
  h = digest(y.span(), h);
  h = digest(dx.span(), h);
  return digest(grads, h);
}

}  // namespace

int main() {
  struct Case {
    const char* name;
    std::unique_ptr<Layer> layer;
    Shape in;
    bool relu;
  };
  // Planes wider than one vector and odd sizes, so that the vector loops and their tails run;
  // Winograd's 20 and 28 channels run loops of 16, 8 and 4 channels (or 8 and 4: on a CPU without
  // AVX-512 the copy the loader picks takes 8 where the baseline build takes 16).
  Case cases[] = {
      {"winograd",
       conv2d(20, 28, 3, 1, 1, Bias::kYes, ConvAlgorithm::kWinograd),
       {3, 20, 19, 21},
       false},
      {"direct", conv2d(3, 5, 3, 1, 1, Bias::kYes, ConvAlgorithm::kDirect), {2, 3, 9, 37}, false},
      {"maxpool_2x2", maxpool2d(2, 2), {2, 3, 10, 38}, false},
      {"maxpool_2x2_relu", maxpool2d(2, 2), {2, 3, 7, 35}, true},
  };
  for (Case& c : cases)
    std::printf("%s %016llx\n", c.name,
                static_cast<unsigned long long>(run(*c.layer, c.in, c.relu)));
  return 0;
}
