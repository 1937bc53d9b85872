// CUDA backend throughput: cuBLAS SGEMM at the training shapes of the zoo models (FP32 and
// TF32), whole mlp/cnn training steps (forward, loss, backward, SGD) in samples/s, and the
// trainer's device pass (parameters and gradients copied each step) split into its copies.
// Each benchmark checks its result before timing. Without a CUDA device it prints a message
// and exits 0.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_accelerator.hpp"
#include "backends/cuda/cuda_model.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/kernels.hpp"
#include "core/base/rng.hpp"
#include "core/nn/accelerator.hpp"
#include "core/nn/model.hpp"

namespace syncopate::cuda {
namespace {

std::vector<float> random_floats(size_t n, uint32_t extra) {
  Rng rng({.seed = 99, .purpose = RngPurpose::kSynthetic, .extra = extra});
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

// Times one queued operation with CUDA events (manual time: excludes host overhead).
class EventTimer {
 public:
  EventTimer() {
    SYNC_CUDA_CHECK(cudaEventCreate(&start_));
    SYNC_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  ~EventTimer() {
    static_cast<void>(cudaEventDestroy(start_));
    static_cast<void>(cudaEventDestroy(stop_));
  }
  void start(cudaStream_t stream) { SYNC_CUDA_CHECK(cudaEventRecord(start_, stream)); }
  double stop_seconds(cudaStream_t stream) {
    SYNC_CUDA_CHECK(cudaEventRecord(stop_, stream));
    SYNC_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    SYNC_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// args: m, n, k, math mode (0 FP32, 1 TF32). Row-major C (m,n) = A (m,k) B (k,n).
void BM_Sgemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const MathMode mode = state.range(3) == 0 ? MathMode::kFp32 : MathMode::kTf32;
  Stream stream;
  CublasHandle cublas(stream.get(), mode);
  const auto a = random_floats(size_t(m * k), 1), b = random_floats(size_t(k * n), 2);
  DeviceBuffer<float> da(a.size()), db(b.size()), dc(size_t(m * n));
  copy_to_device(std::span<const float>(a), da, stream.get());
  copy_to_device(std::span<const float>(b), db, stream.get());
  gemm(cublas.get(), Trans::kNo, Trans::kNo, m, n, k, 1.0f, da.data(), db.data(), 0.0f, dc.data());
  std::vector<float> c(size_t(m * n));
  copy_to_host(dc, std::span<float>(c), stream.get());
  stream.synchronize();
  const double tolerance = mode == MathMode::kFp32 ? 1e-4 : 1e-2;
  for (int64_t probe = 0; probe < 16; ++probe) {  // spot-check entries against the host
    const int64_t i = (probe * 7919) % m, j = (probe * 104729) % n;
    double want = 0, scale = 0;
    for (int64_t l = 0; l < k; ++l) {
      want += double{a[size_t(i * k + l)]} * b[size_t(l * n + j)];
      scale += std::abs(double{a[size_t(i * k + l)]} * b[size_t(l * n + j)]);
    }
    if (std::abs(c[size_t(i * n + j)] - want) > tolerance * (scale + 1e-30)) {
      state.SkipWithError("SGEMM result does not match the host");
      return;
    }
  }
  EventTimer timer;
  for (auto _ : state) {
    timer.start(stream.get());
    gemm(cublas.get(), Trans::kNo, Trans::kNo, m, n, k, 1.0f, da.data(), db.data(), 0.0f,
         dc.data());
    state.SetIterationTime(timer.stop_seconds(stream.get()));
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * double(m) * double(n) * double(k),
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(mode == MathMode::kFp32 ? "fp32" : "tf32");
}

// Shapes of the zoo's training GEMMs at batch 1024, and one large square one.
BENCHMARK(BM_Sgemm)
    ->ArgNames({"m", "n", "k", "tf32"})
    ->Args({1024, 256, 784, 0})   // mlp dense 1 forward
    ->Args({256, 784, 1024, 0})   // mlp dense 1 weight gradient
    ->Args({6, 802816, 25, 0})    // cnn conv1 forward (oc, n*oh*ow, c*k*k)
    ->Args({16, 102400, 150, 0})  // cnn conv2 forward
    ->Args({4096, 4096, 4096, 0})
    ->Args({4096, 4096, 4096, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// He-uniform weights (U(-a, a), a = sqrt(6 / fan_in)) and zero biases, in the flat layout.
std::vector<float> he_uniform(const ModelSpec& spec) {
  Rng rng({.seed = 5, .purpose = RngPurpose::kInit});
  std::vector<float> params;
  for (const LayerSpec& layer : spec.layers) {
    const int64_t fan_in =
        layer.kind == LayerKind::kConv2d ? layer.in * layer.kernel * layer.kernel : layer.in;
    const int64_t biases = num_params(layer) > 0 ? layer.out : 0;
    const auto bound = static_cast<float>(std::sqrt(6.0 / double(fan_in > 0 ? fan_in : 1)));
    for (int64_t i = 0; i < num_params(layer) - biases; ++i) {
      params.push_back(rng.uniform(-bound, bound));
    }
    params.insert(params.end(), size_t(biases), 0.0f);
  }
  return params;
}

// A learnable batch of `batch` 28x28 samples: each is its class's prototype plus noise. Labels
// are the classes as floats, as the trainer passes them.
struct PrototypeBatch {
  std::vector<float> x, labels;
};

PrototypeBatch prototype_batch(int64_t batch) {
  const int64_t dim = 784;
  const auto prototypes = random_floats(size_t(10 * dim), 4);
  PrototypeBatch out{random_floats(size_t(batch * dim), 5), std::vector<float>(size_t(batch))};
  for (int64_t b = 0; b < batch; ++b) {
    out.labels[size_t(b)] = float(b % 10);
    for (int64_t j = 0; j < dim; ++j) {
      float& x = out.x[size_t(b * dim + j)];
      x = prototypes[size_t((b % 10) * dim + j)] + 0.5f * x;
    }
  }
  return out;
}

// args: model (0 mlp, 1 cnn), batch. One step = input upload, forward, loss, backward, SGD.
void BM_TrainStep(benchmark::State& state) {
  const std::string name = state.range(0) == 0 ? "mlp" : "cnn";
  const int64_t batch = state.range(1);
  CudaModel model(zoo_spec(name));
  model.set_params(he_uniform(model.spec()));
  model.set_batch(batch);
  const auto [x, labels] = prototype_batch(batch);
  CudaOptimizer optimizer(OptimizerConfig{.kind = OptimizerKind::kSgd, .momentum = 0.9},
                          model.num_params());
  const float lr = 0.01f;
  // Correctness first: a few steps on one batch must lower its loss.
  const LossResult first = train_step(model, optimizer, x, labels, {}, lr, 1);
  LossResult last;
  for (int step = 2; step <= 10; ++step) {
    last = train_step(model, optimizer, x, labels, {.step = uint32_t(step)}, lr, step);
  }
  if (!std::isfinite(last.loss) || !(last.loss < first.loss)) {
    state.SkipWithError("training does not lower the loss");
    return;
  }
  int64_t step = 11;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        train_step(model, optimizer, x, labels, {.step = uint32_t(step)}, lr, step));
    ++step;
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["samples/s"] =
      benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(name);
}

BENCHMARK(BM_TrainStep)
    ->ArgNames({"cnn", "batch"})
    ->Args({0, 64})
    ->Args({0, 1024})
    ->Args({1, 64})
    ->Args({1, 1024})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The trainer's device pass at batch 64 (model.device = "cuda"), which keeps parameters,
// gradients and the optimizer on the host. args: model (0 mlp, 1 cnn), part:
//   0  Accelerator::forward_backward: parameters in, input, forward, loss, backward, gradients
//      out, as TrainStep calls it, on the CPU model's own (page-locked) storage (no optimizer);
//   1  only its two copies of the parameters' size (CudaModel::set_params and get_grads, from
//      and to pageable host vectors);
//   2  the same bytes staged through a page-locked buffer (a host memcpy each way around an
//      asynchronous copy), for comparison;
//   3  the asynchronous copies alone, from and to page-locked memory (what part 0's copies
//      cost, the accelerator having page-locked the model's storage).
void BM_AcceleratorStep(benchmark::State& state) {
  const std::string name = state.range(0) == 0 ? "mlp" : "cnn";
  const int64_t part = state.range(1), batch = 64;
  const std::unique_ptr<Model> cpu = make_model(name);
  const std::vector<float> params(cpu->params().begin(), cpu->params().end());
  std::vector<float> grads(params.size());
  const auto [xs, labels] = prototype_batch(batch);
  const Tensor x({batch, 1, 28, 28}, xs), y({batch}, labels);
  const std::unique_ptr<Accelerator> accelerator = make_cuda_accelerator(*cpu);
  CudaModel model(zoo_spec(name));
  // As the trainer calls it: on the CPU model's own parameters and gradients.
  const LossResult first =
      accelerator->forward_backward(cpu->params(), x, y, true, 1.0f, {}, cpu->grads());
  if (!std::isfinite(first.loss) ||
      std::all_of(cpu->grads().begin(), cpu->grads().end(), [](float g) { return g == 0.0f; })) {
    state.SkipWithError("the pass gives no loss or no gradient");
    return;
  }
  Stream stream;
  DeviceBuffer<float> device(params.size());
  const size_t bytes = params.size() * sizeof(float);
  void* page_locked = nullptr;
  SYNC_CUDA_CHECK(cudaMallocHost(&page_locked, bytes));
  auto* pinned = static_cast<float*>(page_locked);
  for (auto _ : state) {
    if (part == 0) {
      benchmark::DoNotOptimize(
          accelerator->forward_backward(cpu->params(), x, y, true, 1.0f, {}, cpu->grads()));
    } else if (part == 1) {
      model.set_params(params);
      model.get_grads(grads);
    } else {
      if (part == 2) std::memcpy(pinned, params.data(), bytes);
      SYNC_CUDA_CHECK(
          cudaMemcpyAsync(device.data(), pinned, bytes, cudaMemcpyHostToDevice, stream.get()));
      SYNC_CUDA_CHECK(
          cudaMemcpyAsync(pinned, device.data(), bytes, cudaMemcpyDeviceToHost, stream.get()));
      stream.synchronize();
      if (part == 2) std::memcpy(grads.data(), pinned, bytes);
    }
    benchmark::ClobberMemory();
  }
  static_cast<void>(cudaFreeHost(pinned));
  state.counters["param_MB"] = double(bytes) / 1e6;
  const char* parts[] = {" forward_backward", " copies", " copies staged pinned", " copies pinned"};
  state.SetLabel(name + parts[part]);
}

BENCHMARK(BM_AcceleratorStep)
    ->ArgNames({"cnn", "part"})
    ->ArgsProduct({{0, 1}, {0, 1, 2, 3}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace syncopate::cuda

int main(int argc, char** argv) {
  if (!syncopate::cuda::cuda_available()) {
    std::printf("bench_cuda: no CUDA device; nothing to measure\n");
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
