// CPU kernel benchmarks: the GEMMs of the mlp/cnn training steps, the cnn's convolutions, whole
// training steps (forward, softmax cross-entropy, backward, SGD with momentum) at batch 64, a
// gradient buffer zeroed or given back to the kernel before it is written, and a reduction step
// in the 16-bit wire formats.
// Every kernel is checked against a naive reference before anything is timed.
//
//   OMP_NUM_THREADS=1 build/bin/bench_kernels
// Compare "epoch_s" of BM_TrainStep (938 steps = one Fashion-MNIST epoch at batch 64) with
// bench/peer/fmnist_torch.py.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/base/resident_pages.hpp"
#include "core/comm/collective_schedule.hpp"
#include "core/comm/compression.hpp"
#include "core/nn/layer.hpp"
#include "core/nn/loss.hpp"
#include "core/nn/model.hpp"
#include "core/tensor/gemm.hpp"

namespace syncopate {
namespace {

constexpr int64_t kBatch = 64;
constexpr double kStepsPerEpoch = 938;  // ceil(60000 / 64)

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(gen);
  return v;
}

// ---- correctness, before timing ----

bool gemm_is_correct() {
  const int64_t m = 19, n = 23, k = 31;
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      const auto a = random_floats(m * k, 1), b = random_floats(k * n, 2);
      auto c = random_floats(m * n, 3);
      const auto c0 = c;
      const bool at = ta == Trans::kYes, bt = tb == Trans::kYes;
      gemm(ta, tb, 1.5f, {a.data(), at ? k : m, at ? m : k, at ? m : k},
           {b.data(), bt ? n : k, bt ? k : n, bt ? k : n}, 0.5f, {c.data(), m, n, n});
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t l = 0; l < k; ++l) {
            sum += static_cast<double>(at ? a[l * m + i] : a[i * k + l]) *
                   (bt ? b[j * k + l] : b[l * n + j]);
          }
          const double want = 1.5 * sum + 0.5 * c0[i * n + j];
          if (std::abs(c[i * n + j] - want) > 1e-4 * (1 + std::abs(want))) return false;
        }
      }
    }
  }
  return true;
}

bool conv_is_correct() {
  const int64_t b = 2, cin = 3, h = 9, w = 8, cout = 4, k = 3, s = 2, pad = 1;
  auto layer = conv2d(cin, cout, k, s, pad);
  auto params = random_floats(static_cast<size_t>(layer->num_params()), 4);
  std::vector<float> grads(params.size());
  layer->bind(params, grads);
  const Tensor x({b, cin, h, w}, random_floats(b * cin * h * w, 5));
  Tensor y(layer->output_shape(x.shape()));
  layer->forward(x, y, {});
  const int64_t ho = y.dim(2), wo = y.dim(3);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double sum = params[static_cast<size_t>(cout * cin * k * k + co)];
          for (int64_t ci = 0; ci < cin; ++ci)
            for (int64_t ky = 0; ky < k; ++ky)
              for (int64_t kx = 0; kx < k; ++kx) {
                const int64_t iy = oy * s - pad + ky, ix = ox * s - pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                sum += static_cast<double>(params[((co * cin + ci) * k + ky) * k + kx]) *
                       x[((n * cin + ci) * h + iy) * w + ix];
              }
          const float got = y[((n * cout + co) * ho + oy) * wo + ox];
          if (std::abs(got - sum) > 1e-4 * (1 + std::abs(sum))) return false;
        }
  return true;
}

// ---- GEMM ----

// Args: m, n, k, trans_a, trans_b (C (m x n) = op(A) op(B)).
void BM_Gemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const Trans ta = state.range(3) ? Trans::kYes : Trans::kNo;
  const Trans tb = state.range(4) ? Trans::kYes : Trans::kNo;
  const auto a = random_floats(m * k, 1), b = random_floats(k * n, 2);
  std::vector<float> c(static_cast<size_t>(m * n));
  const MatrixView av{a.data(), ta == Trans::kYes ? k : m, ta == Trans::kYes ? m : k,
                      ta == Trans::kYes ? m : k};
  const MatrixView bv{b.data(), tb == Trans::kYes ? n : k, tb == Trans::kYes ? k : n,
                      tb == Trans::kYes ? k : n};
  for (auto _ : state) {
    gemm(ta, tb, 1.0f, av, bv, 1.0f, {c.data(), m, n, n});
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(m * n * k),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
// mlp step: forward x W^T, dW = dy^T x, dx = dy W.
BENCHMARK(BM_Gemm)->Name("BM_Gemm/mlp_fc1_fwd")->Args({kBatch, 256, 784, 0, 1});
BENCHMARK(BM_Gemm)->Name("BM_Gemm/mlp_fc1_dW")->Args({256, 784, kBatch, 1, 0});
BENCHMARK(BM_Gemm)->Name("BM_Gemm/mlp_fc2_fwd")->Args({kBatch, 128, 256, 0, 1});
BENCHMARK(BM_Gemm)->Name("BM_Gemm/mlp_fc2_dW")->Args({128, 256, kBatch, 1, 0});
BENCHMARK(BM_Gemm)->Name("BM_Gemm/mlp_fc2_dx")->Args({kBatch, 256, 128, 0, 0});
// cnn step: the 3136 -> 128 dense layer, and conv2's per-image GEMMs (K = 288, P = 196).
BENCHMARK(BM_Gemm)->Name("BM_Gemm/cnn_fc1_fwd")->Args({kBatch, 128, 3136, 0, 1});
BENCHMARK(BM_Gemm)->Name("BM_Gemm/cnn_fc1_dW")->Args({128, 3136, kBatch, 1, 0});
BENCHMARK(BM_Gemm)->Name("BM_Gemm/cnn_fc1_dx")->Args({kBatch, 3136, 128, 0, 0});
BENCHMARK(BM_Gemm)->Name("BM_Gemm/cnn_conv2_fwd")->Args({64, 196, 288, 0, 0});
BENCHMARK(BM_Gemm)->Name("BM_Gemm/cnn_conv2_dW")->Args({64, 288, 196, 0, 1});
BENCHMARK(BM_Gemm)->Name("BM_Gemm/cnn_conv2_dcol")->Args({288, 196, 64, 1, 0});
BENCHMARK(BM_Gemm)->Name("BM_Gemm/square_512")->Args({512, 512, 512, 0, 0});

// ---- convolutions of the cnn at batch 64 ----

// Args: in channels, out channels, image size, pass (0 forward, 1 backward with dx, 2 without).
void BM_Conv(benchmark::State& state) {
  const int64_t cin = state.range(0), cout = state.range(1), hw = state.range(2);
  const int pass = static_cast<int>(state.range(3));
  const auto algorithm = static_cast<ConvAlgorithm>(state.range(4));
  auto layer = conv2d(cin, cout, 3, 1, 1, Bias::kYes, algorithm);
  auto params = random_floats(static_cast<size_t>(layer->num_params()), 7);
  std::vector<float> grads(params.size());
  layer->bind(params, grads);
  const Shape in{kBatch, cin, hw, hw};
  const Tensor x(in, random_floats(static_cast<size_t>(numel(in)), 8));
  Tensor y(layer->output_shape(in));
  const Tensor dy(y.shape(), random_floats(static_cast<size_t>(y.numel()), 9));
  Tensor dx(in);
  layer->forward(x, y, {});
  for (auto _ : state) {
    if (pass == 0) {
      layer->forward(x, y, {});
    } else {
      layer->backward(x, y, dy, pass == 1 ? &dx : nullptr);
    }
    benchmark::ClobberMemory();
  }
  const Cost cost = pass == 0 ? layer->forward_cost(in) : layer->backward_cost(in, pass == 1);
  state.counters["GFLOP/s"] =
      benchmark::Counter(1e-9 * cost.flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * kBatch);
}
// The last argument: ConvAlgorithm (0 auto: Winograd for conv2, im2col for conv1; 1 im2col).
BENCHMARK(BM_Conv)->Name("BM_Conv/cnn_conv1_fwd")->Args({1, 32, 28, 0, 0});
BENCHMARK(BM_Conv)->Name("BM_Conv/cnn_conv1_bwd_no_dx")->Args({1, 32, 28, 2, 0});
BENCHMARK(BM_Conv)->Name("BM_Conv/cnn_conv2_fwd")->Args({32, 64, 14, 0, 0});
BENCHMARK(BM_Conv)->Name("BM_Conv/cnn_conv2_bwd")->Args({32, 64, 14, 1, 0});
BENCHMARK(BM_Conv)->Name("BM_Conv/cnn_conv2_fwd_im2col")->Args({32, 64, 14, 0, 1});
BENCHMARK(BM_Conv)->Name("BM_Conv/cnn_conv2_bwd_im2col")->Args({32, 64, 14, 1, 1});

// ---- whole training steps ----

// One step = forward, softmax cross-entropy, zero grads, backward, then SGD with momentum 0.9
// (lr 0.05), as bench/peer/fmnist_torch.py does it.
void train_step(benchmark::State& state, const char* name) {
  auto model = make_model(name);
  model->init(1);
  model->set_batch(kBatch);
  const auto input = random_floats(static_cast<size_t>(model->input().numel()), 10);
  std::copy(input.begin(), input.end(), model->input().data());
  Tensor labels({kBatch});
  for (int64_t i = 0; i < kBatch; ++i) labels[i] = static_cast<float>(i % 10);
  std::vector<float> velocity(model->params().size(), 0.0f);
  const float lr = 0.05f, momentum = 0.9f;
  StepContext ctx;
  double loss = 0;
  for (auto _ : state) {
    for (int i = 0; i < model->num_layers(); ++i) model->forward_layer(i, ctx);
    loss = softmax_cross_entropy(model->output(), labels, &model->output_grad()).loss;
    model->zero_grads();
    for (int i = model->num_layers() - 1; i >= 0; --i) model->backward_layer(i);
    const std::span<float> w = model->params();
    const std::span<const float> g = model->grads();
    for (size_t j = 0; j < w.size(); ++j) {
      velocity[j] = momentum * velocity[j] + g[j];
      w[j] -= lr * velocity[j];
    }
    ++ctx.step;
  }
  if (!std::isfinite(loss)) state.SkipWithError("loss is not finite");
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["epoch_s"] =
      benchmark::Counter(1.0 / kStepsPerEpoch, benchmark::Counter::kIsIterationInvariantRate |
                                                   benchmark::Counter::kInvert);
  state.counters["GFLOP/s"] =
      benchmark::Counter(1e-9 * (model->forward_flops(kBatch) + model->backward_flops(kBatch)),
                         benchmark::Counter::kIsIterationInvariantRate);
}
void BM_TrainStep_mlp(benchmark::State& state) { train_step(state, "mlp"); }
void BM_TrainStep_cnn(benchmark::State& state) { train_step(state, "cnn"); }
BENCHMARK(BM_TrainStep_mlp)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStep_cnn)->Unit(benchmark::kMillisecond);

// ---- gradient buffers ----

// A gradient buffer made ready for backward, then written whole as backward writes it: zeroed
// in place (range(1) = 0, what every strategy does by default), or its pages given back to the
// kernel (1, clear_pages: zero stages 2 and 3 after each reduce-scatter with
// strategy.give_back_memory), which the writes then fault back in. range(0): the buffer's MiB.
void BM_GradientBuffer(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0)) * (1 << 20) / sizeof(float);
  const bool give_back = state.range(1) != 0;
  std::vector<float> grads(n, 1.0f);
  for (auto _ : state) {
    if (give_back)
      clear_pages(grads.data(), n * sizeof(float));
    else
      std::fill(grads.begin(), grads.end(), 0.0f);
    for (float& g : grads) g += 0.5f;
    benchmark::DoNotOptimize(grads.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n * sizeof(float)));
}
BENCHMARK(BM_GradientBuffer)->Name("BM_GradientBuffer/zeroed")->Args({4, 0})->Args({64, 0});
BENCHMARK(BM_GradientBuffer)->Name("BM_GradientBuffer/given_back")->Args({4, 1})->Args({64, 1});

// ---- 16-bit wire formats ----

// One reduction step of a 16-bit allreduce over 1 MiB of floats, as a rank runs it
// (strategy.compression): encode the segment it sends, add the one it received in the format as
// it decodes it (add_decoded). range(0): 0 fp16, 1 bf16; range(1): 1 on x86 intrinsics where the
// CPU has them (AVX2, F16C), 0 on the portable loops. Bytes: the fp32 buffer's, once per pass.
void BM_WireStep(benchmark::State& state) {
  const WireFormat wire = state.range(0) == 1 ? WireFormat::kBf16 : WireFormat::kFp16;
  allow_wire_intrinsics(state.range(1) == 1);
  const size_t n = (size_t{1} << 20) / sizeof(float);
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.0f, 1e-3f);  // gradients: fp16 subnormals included
  std::vector<float> data(n), received(n);
  for (size_t i = 0; i < n; ++i) data[i] = dist(gen), received[i] = dist(gen);
  std::vector<uint16_t> sent(n), arrived(n);
  encode_wire(received, wire, arrived);
  for (auto _ : state) {
    encode_wire(data, wire, sent);
    add_decoded(data, arrived, wire);
    benchmark::DoNotOptimize(data.data());
    benchmark::DoNotOptimize(sent.data());
  }
  const bool intrinsics = wire_intrinsics();
  allow_wire_intrinsics(true);
  state.SetLabel(std::string(to_string(wire)) + (intrinsics            ? ", intrinsics"
                                                 : state.range(1) == 1 ? ", no intrinsics here"
                                                                       : ", portable"));
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(n * sizeof(float)));
}
BENCHMARK(BM_WireStep)->Args({0, 1})->Args({0, 0})->Args({1, 1})->Args({1, 0});

// kAvg's division of a 1 MiB buffer by the rank count range(0) (core/comm/collective_schedule's
// divide_by_ranks): a multiplication by the exact reciprocal for 2 and 4, a division for 3. The
// buffer is refilled, untimed, before each pass: repeated halving would reach subnormals.
void BM_DivideByRanks(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> values((size_t{1} << 20) / sizeof(float));
  for (float& x : values) x = dist(gen);
  std::vector<float> data = values;
  for (auto _ : state) {
    state.PauseTiming();
    std::copy(values.begin(), values.end(), data.begin());
    state.ResumeTiming();
    divide_by_ranks(p, data);
    benchmark::DoNotOptimize(data.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(data.size() * sizeof(float)));
}
BENCHMARK(BM_DivideByRanks)->Arg(2)->Arg(3)->Arg(4);

}  // namespace
}  // namespace syncopate

int main(int argc, char** argv) {
  if (!syncopate::gemm_is_correct() || !syncopate::conv_is_correct()) {
    std::fprintf(stderr, "bench_kernels: a kernel disagrees with its naive reference\n");
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("gemm_kernel", std::string(syncopate::gemm_kernel()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
