// Allreduce over MPI: Syncopate's schedules against MPI's own MPI_Allreduce.
//
//   mpirun -np 2 --oversubscribe --bind-to none build/bin/bench_allreduce_mpi [--min-kib 4]
//          [--max-mib 64 | --max-kib N] [--reps 15] [--overlap-mib 16]
//
// For every size (min .. max, x4) and algorithm, checks the result first, then times `reps`
// allreduces (each one timed separately between barriers, the slowest rank's time counts; the
// algorithms take turns in a freshly shuffled order, so that load from other processes affects
// them alike) and prints the median with the bandwidths as nccl-tests defines them:
//   algbw = bytes / time,  busbw = algbw * 2 (p - 1) / p,
// and vs_MPI, the median of MPI_Allreduce's time over the algorithm's, repetition by repetition.
// Then measures how much of an asynchronous allreduce hides behind work (the helper thread of
// MpiCommunicator): overlap = (t_comm + t_work - t_both) / min(t_comm, t_work), for work that
// sleeps (a GPU kernel) and for arithmetic on the rank's core.
// Built with NCCL and run with a GPU per rank, it also times the NCCL communicator
// (mpi.transport): our ring as NCCL send/recv rounds and ncclAllReduce, both staged from host
// memory as the trainer calls them, and ncclAllReduce on device memory (what nccl-tests'
// all_reduce_perf measures).
// A plain main, not Google Benchmark: every rank must run the same loop under mpirun.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/mpi/deadline.hpp"
#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/mpi_executor.hpp"
#include "backends/mpi/runtime.hpp"
#include "backends/mpi/startup_check.hpp"
#if defined(SYNCOPATE_HAVE_NCCL)
#include "backends/cuda/nccl_comm.hpp"
#endif

namespace {

using syncopate::Algorithm;
using syncopate::ReduceOp;
using syncopate::WireFormat;
using syncopate::mpi::MpiCommunicator;

struct Options {
  size_t min_bytes = size_t{4} << 10;
  size_t max_bytes = size_t{64} << 20;
  int reps = 15;
  size_t overlap_bytes = size_t{16} << 20;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "--min-kib")
      o.min_bytes = static_cast<size_t>(value) << 10;
    else if (flag == "--max-mib")
      o.max_bytes = static_cast<size_t>(value) << 20;
    else if (flag == "--max-kib")
      o.max_bytes = static_cast<size_t>(value) << 10;
    else if (flag == "--reps")
      o.reps = static_cast<int>(value);
    else if (flag == "--overlap-mib")
      o.overlap_bytes = static_cast<size_t>(value) << 20;
    else
      throw syncopate::UserError(
          "bench_allreduce_mpi: unknown flag " + flag +
          "; allowed: --min-kib, --max-mib (or --max-kib), --reps, --overlap-mib");
  }
  if (o.min_bytes == 0 || o.min_bytes > o.max_bytes || o.reps < 1)
    throw syncopate::UserError(
        "bench_allreduce_mpi: allowed: 1 <= --min-kib <= the maximum size, --reps >= 1");
  return o;
}

// What is timed: one of our schedules through allreduce() (as the strategies call it: on the
// calling thread when no asynchronous job is in flight, on the asynchronous channel), through
// allreduce_async() waited for at once (handed to the helper thread, or taken back by the
// waiter if the helper has not started it), on the blocking channel (allreduce_blocking), or
// MPI's own MPI_Allreduce.
// The NCCL paths: our schedule through NCCL (staged), ncclAllReduce (staged), ncclAllReduce on
// device memory.
enum class Path { kAsync, kAsyncWaited, kBlocking, kNative, kNccl, kNcclNative, kNcclDevice };
// A 16-bit wire format (strategy.compression) sends 2 bytes per element and reduces in that
// format; its row's bytes and bandwidths are those of the fp32 buffer it stands for.
struct Variant {
  const char* name;
  Algorithm algorithm;
  Path path;
  WireFormat wire = WireFormat::kFp32;
};
std::vector<Variant> g_variants = {
    {"ring", Algorithm::kRing, Path::kAsync},
    {"ring (blocking)", Algorithm::kRing, Path::kBlocking},
    {"ring (async, waited)", Algorithm::kRing, Path::kAsyncWaited},
    {"ring, bf16 wire", Algorithm::kRing, Path::kAsync, WireFormat::kBf16},
    {"ring, fp16 wire", Algorithm::kRing, Path::kAsync, WireFormat::kFp16},
    {"rabenseifner", Algorithm::kRabenseifner, Path::kAsync},
    {"recursive_doubling", Algorithm::kRecursiveDoubling, Path::kAsync},
    {"MPI_Allreduce", Algorithm::kAuto, Path::kNative},
};

#if defined(SYNCOPATE_HAVE_NCCL)
struct Nccl {
  std::unique_ptr<syncopate::cuda::NcclCommunicator> schedules, native;
  syncopate::cuda::DeviceBuffer<float> device;
};
std::unique_ptr<Nccl> g_nccl;

// Adds the NCCL variants when every rank has a GPU of its own (collective); else says why not.
// The communicator decides: it gathers every rank's machine and GPU, so that every rank reaches
// the same verdict (ranks of pretend nodes on one machine share its GPUs).
std::string add_nccl_variants(MpiCommunicator& comm, size_t max_floats) {
  auto nccl = std::make_unique<Nccl>();
  try {
    nccl->schedules = std::make_unique<syncopate::cuda::NcclCommunicator>(comm);
  } catch (const syncopate::UserError& e) {
    return e.what();
  }
  nccl->native = std::make_unique<syncopate::cuda::NcclCommunicator>(
      comm, syncopate::cuda::NcclOptions{.native = true});
  nccl->device.resize(max_floats);
  g_nccl = std::move(nccl);
  g_variants.push_back({"nccl ring (staged)", Algorithm::kRing, Path::kNccl});
  g_variants.push_back({"ncclAllReduce (staged)", Algorithm::kAuto, Path::kNcclNative});
  g_variants.push_back({"ncclAllReduce (device)", Algorithm::kAuto, Path::kNcclDevice});
  return "";
}
#endif

void allreduce(MpiCommunicator& comm, std::span<float> data, const Variant& variant) {
  switch (variant.path) {
#if defined(SYNCOPATE_HAVE_NCCL)
    case Path::kNccl:
      g_nccl->schedules->allreduce(data, {ReduceOp::kSum, variant.algorithm});
      break;
    case Path::kNcclNative:
      g_nccl->native->allreduce(data, {ReduceOp::kSum, variant.algorithm});
      break;
    case Path::kNcclDevice:  // the first data.size() floats of the device buffer, in place
      syncopate::cuda::copy_to_device(std::span<const float>(data), g_nccl->device.data());
      g_nccl->native->allreduce_device(g_nccl->device.data(), data.size(), {ReduceOp::kSum});
      syncopate::cuda::copy_to_host(g_nccl->device.data(), data);
      break;
#else
    case Path::kNccl:
    case Path::kNcclNative:
    case Path::kNcclDevice:
      break;
#endif
    case Path::kAsync:
      comm.allreduce(data,
                     {.op = ReduceOp::kSum, .algorithm = variant.algorithm, .wire = variant.wire});
      break;
    case Path::kAsyncWaited:  // as ddp's last bucket: handed to the helper thread, waited at once
      comm.allreduce_async(data, {ReduceOp::kSum, variant.algorithm})->wait();
      break;
    case Path::kBlocking:
      comm.allreduce_blocking(data, {ReduceOp::kSum, variant.algorithm});
      break;
    case Path::kNative:
      syncopate::mpi::native_allreduce(comm, data, ReduceOp::kSum);
      break;
  }
}

// What is timed of a variant: for the device path only the allreduce on device memory.
void timed_allreduce(MpiCommunicator& comm, std::span<float> data, const Variant& variant) {
#if defined(SYNCOPATE_HAVE_NCCL)
  if (variant.path == Path::kNcclDevice) {
    g_nccl->native->allreduce_device(g_nccl->device.data(), data.size(), {ReduceOp::kSum});
    return;
  }
#endif
  allreduce(comm, data, variant);
}

// Integers small enough that every order of additions gives the exact sum, in the 16-bit
// formats too: each element sums p values of 1 to 3, exact in bf16 (8 significant bits) up to
// 85 ranks and in fp16 up to 682.
void check(MpiCommunicator& comm, std::vector<float>& data, const Variant& variant) {
  const int p = comm.size();
  auto value = [](int rank, size_t i) { return 1 + static_cast<int>((i + rank) % 3); };
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(value(comm.rank(), i));
  allreduce(comm, data, variant);
  for (size_t i = 0; i < data.size(); ++i) {
    int sum = 0;
    for (int r = 0; r < p; ++r) sum += value(r, i);
    if (data[i] != static_cast<float>(sum))
      syncopate::mpi::Runtime::abort(
          1, std::string("wrong result of ") + variant.name + " at element " + std::to_string(i));
  }
}

// Seconds of one call, slowest rank.
template <typename F>
double timed(MpiCommunicator& comm, F&& body) {
  comm.barrier();
  const double start = MPI_Wtime();
  body();
  double elapsed = MPI_Wtime() - start;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, comm.handle());
  return elapsed;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Fixed arithmetic standing in for backward: `passes` sweeps over a small buffer.
float compute(long passes, std::vector<float>& scratch) {
  float acc = 0;
  for (long k = 0; k < passes; ++k)
    for (float& x : scratch) acc += (x = x * 0.999f + 1.0f);
  return acc;
}

// How much of an async allreduce hides behind work that takes about as long: "busy" work is
// arithmetic on this core (CPU backward), "idle" work sleeps (a GPU kernel the CPU waits for).
void measure_overlap(MpiCommunicator& comm, size_t bytes, int reps, bool busy) {
  std::vector<float> data(bytes / sizeof(float), 0.0f), scratch(4096, 1.0f);
  const syncopate::CollectiveOptions ring{ReduceOp::kSum, Algorithm::kRing};
  std::vector<double> comm_alone, work_alone, both;
  for (int r = 0; r < reps; ++r)
    comm_alone.push_back(timed(comm, [&] { comm.allreduce(data, ring); }));
  const double t_comm = median(comm_alone);
  // Calibrate the busy work to last about as long as the allreduce.
  long passes = 1;
  float sink = 0;
  if (busy)
    while (timed(comm, [&] { sink += compute(passes, scratch); }) < t_comm) passes *= 2;
  auto work = [&] {
    if (busy)
      sink += compute(passes, scratch);
    else
      std::this_thread::sleep_for(std::chrono::duration<double>(t_comm));
  };
  for (int r = 0; r < reps; ++r) {
    work_alone.push_back(timed(comm, work));
    both.push_back(timed(comm, [&] {
      syncopate::WorkPtr pending = comm.allreduce_async(data, ring);
      work();
      pending->wait();
    }));
  }
  const double t_work = median(work_alone), t_both = median(both);
  if (comm.rank() == 0)
    std::printf(
        "%-5s work: allreduce alone %7.2f ms, work alone %7.2f ms, both %7.2f ms: "
        "overlap %4.0f%%%s\n",
        busy ? "busy" : "idle", t_comm * 1e3, t_work * 1e3, t_both * 1e3,
        100.0 * (t_comm + t_work - t_both) / std::min(t_comm, t_work), sink < 0 ? "!" : "");
}

}  // namespace

int main(int argc, char** argv) {
  syncopate::mpi::Runtime runtime(&argc, &argv);
  Options options;
  try {
    options = parse(argc, argv);
  } catch (const syncopate::UserError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  auto comm = MpiCommunicator::world();
  const int p = comm->size();
  std::vector<float> data(options.max_bytes / sizeof(float));
#if defined(SYNCOPATE_HAVE_NCCL)
  const std::string no_nccl = add_nccl_variants(*comm, data.size());
  if (comm->rank() == 0 && !no_nccl.empty()) std::printf("no NCCL rows: %s\n", no_nccl.c_str());
#endif
  if (comm->rank() == 0) {
    std::printf(
        "allreduce, float sum, %d ranks, %s threads, shared-memory single copy %s, median of %d\n",
        p, runtime.thread_multiple() ? "MPI_THREAD_MULTIPLE" : "funneled",
        runtime.shared_memory_single_copy() ? "on" : "off", options.reps);
    std::printf("%10s  %-24s %12s %12s %12s %10s\n", "bytes", "algorithm", "time_us", "algbw_GB/s",
                "busbw_GB/s", "vs_MPI");
  }
  for (size_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 4) {
    const std::span<float> buffer(data.data(), bytes / sizeof(float));
    std::vector<float> check_buffer(buffer.size());
    for (const Variant& variant : g_variants) {
      check(*comm, check_buffer, variant);
      std::fill(buffer.begin(), buffer.end(), 0.0f);  // zeros: sums stay finite, no denormals
      allreduce(*comm, buffer, variant);              // warm-up (schedule cache, connections)
    }
    // Algorithms take turns within each repetition, so load from elsewhere hits all alike, in
    // an order shuffled anew for each repetition (the same on every rank): what ran just before
    // a call changes its time (by 15-30% at 256 KiB to 1 MiB here), and a fixed cycle gives every
    // algorithm the same predecessor every time.
    std::vector<std::vector<double>> seconds(g_variants.size());
    std::vector<size_t> order(g_variants.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::mt19937 shuffle(static_cast<std::mt19937::result_type>(bytes));
    for (int r = 0; r < options.reps; ++r) {
      std::shuffle(order.begin(), order.end(), shuffle);
      for (const size_t a : order)
        seconds[a].push_back(timed(*comm, [&] { timed_allreduce(*comm, buffer, g_variants[a]); }));
    }
    // The paired ratio: MPI_Allreduce's time over this algorithm's in the same repetition, the
    // median over repetitions (above 1: faster than MPI). Load that hits one repetition hits
    // both sides of its ratio, which makes it steadier than a ratio of the two medians.
    const auto native_variant =
        std::find_if(g_variants.begin(), g_variants.end(),
                     [](const Variant& v) { return v.path == Path::kNative; });
    const std::vector<double>& native = seconds[native_variant - g_variants.begin()];
    for (size_t a = 0; a < g_variants.size(); ++a) {
      const double t = median(seconds[a]), algbw = static_cast<double>(bytes) / t / 1e9;
      std::vector<double> ratios;
      for (int r = 0; r < options.reps; ++r) ratios.push_back(native[r] / seconds[a][r]);
      if (comm->rank() == 0)
        std::printf("%10zu  %-24s %12.1f %12.3f %12.3f %10.2f\n", bytes, g_variants[a].name,
                    t * 1e6, algbw, algbw * 2.0 * (p - 1) / p, median(ratios));
    }
  }
#if defined(SYNCOPATE_HAVE_NCCL)
  g_nccl.reset();  // before MPI finalizes: the NCCL communicators use the world communicator
#endif
  if (p > 1) {
    if (comm->rank() == 0)
      std::printf("\noverlap of an async ring allreduce of %zu MiB, median of %d:\n",
                  options.overlap_bytes >> 20, options.reps);
    measure_overlap(*comm, options.overlap_bytes, options.reps, /*busy=*/false);
    measure_overlap(*comm, options.overlap_bytes, options.reps, /*busy=*/true);
  }
  return 0;
}
