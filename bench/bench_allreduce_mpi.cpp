// Allreduce over MPI: Syncopate's schedules against MPI's own MPI_Allreduce.
//
//   mpirun -np 2 --oversubscribe --bind-to none build/bin/bench_allreduce_mpi [--max-mib 64]
//          [--reps 15] [--overlap-mib 16]
//
// For every size (4 KiB .. max, x4) and algorithm, checks the result first, then times `reps`
// allreduces (each one timed separately between barriers, the slowest rank's time counts) and
// prints the median with the bandwidths as nccl-tests defines them:
//   algbw = bytes / time,  busbw = algbw * 2 (p - 1) / p.
// Then measures how much of an asynchronous allreduce hides behind computation (the helper
// thread of MpiCommunicator): overlap = (t_comm + t_compute - t_both) / min(t_comm, t_compute).
// A plain main, not Google Benchmark: every rank must run the same loop under mpirun.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/mpi/mpi_backend.hpp"

namespace {

using syncopate::Algorithm;
using syncopate::ReduceOp;
using syncopate::mpi::MpiCommunicator;

struct Options {
  size_t max_bytes = size_t{64} << 20;
  int reps = 15;
  size_t overlap_bytes = size_t{16} << 20;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "--max-mib")
      o.max_bytes = static_cast<size_t>(value) << 20;
    else if (flag == "--reps")
      o.reps = static_cast<int>(value);
    else if (flag == "--overlap-mib")
      o.overlap_bytes = static_cast<size_t>(value) << 20;
    else
      throw syncopate::UserError("bench_allreduce_mpi: unknown flag " + flag +
                                 "; allowed: --max-mib, --reps, --overlap-mib");
  }
  return o;
}

// Algorithm::kAuto stands for "MPI_Allreduce" in this program.
void allreduce(MpiCommunicator& comm, std::span<float> data, Algorithm algorithm) {
  if (algorithm == Algorithm::kAuto)
    syncopate::mpi::native_allreduce(comm, data, ReduceOp::kSum);
  else
    comm.allreduce(data, {ReduceOp::kSum, algorithm});
}
const char* name_of(Algorithm algorithm) {
  return algorithm == Algorithm::kAuto ? "MPI_Allreduce" : to_string(algorithm).data();
}

// Integers small enough that every order of additions gives the exact sum.
void check(MpiCommunicator& comm, std::vector<float>& data, Algorithm algorithm) {
  const int p = comm.size();
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<float>((comm.rank() + 1) * (1 + static_cast<int>(i % 7)));
  allreduce(comm, data, algorithm);
  const float ranks = static_cast<float>(p * (p + 1) / 2);
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i] != ranks * static_cast<float>(1 + i % 7))
      syncopate::mpi::Runtime::abort(1, std::string("wrong result of ") + name_of(algorithm) +
                                            " at element " + std::to_string(i));
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

void measure_overlap(MpiCommunicator& comm, size_t bytes, int reps) {
  std::vector<float> data(bytes / sizeof(float), 0.0f), scratch(4096, 1.0f);
  const syncopate::CollectiveOptions ring{ReduceOp::kSum, Algorithm::kRing};
  std::vector<double> comm_alone, compute_alone, both;
  for (int r = 0; r < reps; ++r)
    comm_alone.push_back(timed(comm, [&] { comm.allreduce(data, ring); }));
  const double t_comm = median(comm_alone);
  // Calibrate the work to last about as long as the allreduce on an otherwise idle rank.
  long passes = 1;
  float sink = 0;
  while (timed(comm, [&] { sink += compute(passes, scratch); }) < t_comm) passes *= 2;
  for (int r = 0; r < reps; ++r) {
    compute_alone.push_back(timed(comm, [&] { sink += compute(passes, scratch); }));
    both.push_back(timed(comm, [&] {
      syncopate::WorkPtr work = comm.allreduce_async(data, ring);
      sink += compute(passes, scratch);
      work->wait();
    }));
  }
  const double t_compute = median(compute_alone), t_both = median(both);
  if (comm.rank() == 0)
    std::printf(
        "\noverlap of an async ring allreduce of %zu MiB with computation (%s):\n"
        "  allreduce alone %.2f ms, compute alone %.2f ms, both %.2f ms: overlap %.0f%%\n",
        bytes >> 20, sink != 0 ? "median" : "-", t_comm * 1e3, t_compute * 1e3, t_both * 1e3,
        100.0 * (t_comm + t_compute - t_both) / std::min(t_comm, t_compute));
}

}  // namespace

int main(int argc, char** argv) {
  syncopate::mpi::Runtime runtime(&argc, &argv);
  const Options options = parse(argc, argv);
  auto comm = MpiCommunicator::world();
  const int p = comm->size();
  const Algorithm algorithms[] = {Algorithm::kRing, Algorithm::kRabenseifner,
                                  Algorithm::kRecursiveDoubling, Algorithm::kAuto};
  if (comm->rank() == 0) {
    std::printf("allreduce, float sum, %d ranks, %s threads, median of %d\n", p,
                runtime.thread_multiple() ? "MPI_THREAD_MULTIPLE" : "funneled", options.reps);
    std::printf("%10s  %-20s %12s %12s %12s\n", "bytes", "algorithm", "time_us", "algbw_GB/s",
                "busbw_GB/s");
  }
  std::vector<float> data(options.max_bytes / sizeof(float));
  for (size_t bytes = 4096; bytes <= options.max_bytes; bytes *= 4) {
    const std::span<float> buffer(data.data(), bytes / sizeof(float));
    for (const Algorithm algorithm : algorithms) {
      std::vector<float> check_buffer(buffer.size());
      check(*comm, check_buffer, algorithm);
      std::fill(buffer.begin(), buffer.end(), 0.0f);  // zeros: sums stay finite, no denormals
      allreduce(*comm, buffer, algorithm);            // warm-up (schedule cache, connections)
      std::vector<double> seconds;
      for (int r = 0; r < options.reps; ++r)
        seconds.push_back(timed(*comm, [&] { allreduce(*comm, buffer, algorithm); }));
      const double t = median(seconds), algbw = static_cast<double>(bytes) / t / 1e9;
      if (comm->rank() == 0)
        std::printf("%10zu  %-20s %12.1f %12.3f %12.3f\n", bytes, name_of(algorithm), t * 1e6,
                    algbw, algbw * 2.0 * (p - 1) / p);
    }
  }
  if (p > 1) measure_overlap(*comm, options.overlap_bytes, options.reps);
  return 0;
}
