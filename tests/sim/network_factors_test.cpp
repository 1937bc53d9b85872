// A recipe's [network] table: its factor tables and overheads parse, refuse bad input with
// file:line: key, and a simulated message of s bytes then takes send + receive overhead +
// latency x lat_factor(s) + s / (bandwidth x bw_factor(s)) at every fidelity.
#include "backends/sim/platform/network_factors.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backends/sim/platform/platform.hpp"
#include "backends/sim/platform/platform_recipe.hpp"
#include "backends/sim/sim_backend.hpp"
#include "core/base/check.hpp"
#include "core/comm/collective_schedule.hpp"
#include "tests/common/scratch.hpp"
#include "tests/sim/sim_test_util.hpp"

namespace syncopate::sim {
namespace {

namespace fs = std::filesystem;
using testing::decode;
using testing::encode;
using testing::run_in_child;

// Two GPUs on one node, a 1 us, 10 GB/s route between them; then `network`.
std::string two_gpus(const std::string& network) {
  return "topology = \"star\"\nnodes = 1\ngpus_per_node = 2\n[profile]\nmemory_bandwidth = 1e12\n"
         "[profile.flops_per_s]\nconv = 1e12\npool = 1e12\nelementwise = 1e12\nloss = 1e12\n"
         "optimizer = 1e12\ngemm = 1e12\n[gpu_link]\nbandwidth = 1e10\nlatency = 1e-6\n" +
         network;
}
// Where an error in the line after `network`'s first one ([network]) in two_gpus() is reported.
constexpr const char* kKeyLine = ":17: ";

// `text` in a file of this process named after `name`.
fs::path write_recipe(const std::string& text, const std::string& name = "network") {
  const fs::path path = scratch_folder("network-factors") / (name + ".toml");
  std::ofstream(path) << text;
  return path;
}

std::string recipe_error(const std::string& text) {
  try {
    detail::parse_recipe(write_recipe(text).string(), {});
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

const std::string kTables =
    "[network]\nsend_overhead = \"2us\"\nrecv_overhead = 3e-6\n"
    "bandwidth_factor = [[0, 0.25], [65536, 0.5], [1048576, 2]]\n"
    "latency_factor = [[0, 3], [65536, 0.5]]\n";

TEST(NetworkFactors, TablesParseAndLookUpByMessageSize) {
  const detail::Recipe recipe = detail::parse_recipe(write_recipe(two_gpus(kTables)).string(), {});
  const NetworkFactors& f = recipe.network;
  EXPECT_DOUBLE_EQ(f.send_overhead_s, 2e-6);
  EXPECT_DOUBLE_EQ(f.recv_overhead_s, 3e-6);
  ASSERT_EQ(f.bandwidth.size(), 3u);
  ASSERT_EQ(f.latency.size(), 2u);
  EXPECT_EQ(factor_at(f.bandwidth, 0), 0.25);
  EXPECT_EQ(factor_at(f.bandwidth, 65535), 0.25);
  EXPECT_EQ(factor_at(f.bandwidth, 65536), 0.5);
  EXPECT_EQ(factor_at(f.bandwidth, 1048575), 0.5);
  EXPECT_EQ(factor_at(f.bandwidth, 1e12), 2);
  EXPECT_EQ(factor_at(f.latency, 4096), 3);
  EXPECT_EQ(factor_at(f.latency, 1 << 20), 0.5);
  EXPECT_EQ(factor_at({}, 4096), 1);
  EXPECT_DOUBLE_EQ(message_seconds(f, 1e-6, 1e10, 4096), 2e-6 + 3e-6 + 3e-6 + 4096 / 2.5e9);
}

TEST(NetworkFactors, AbsentIsThePlainModelBitForBit) {
  const detail::Recipe recipe = detail::parse_recipe(write_recipe(two_gpus("")).string(), {});
  EXPECT_TRUE(recipe.network.empty());
  for (double bytes : {0.0, 4096.0, 3e7}) {
    const double plain = 1.3e-6 + bytes / 7.7e9;
    EXPECT_EQ(message_seconds(recipe.network, 1.3e-6, 7.7e9, bytes), plain);
  }
}

TEST(NetworkFactors, BadTablesAreRefusedWithFileLineAndKey) {
  struct Case {
    std::string table, expected;
  };
  const std::string key = "bandwidth_factor = ";
  const Case cases[] = {
      {key + "0.5", "network.bandwidth_factor: expected an array of [from_bytes, factor] pairs"},
      {key + "[]", "network.bandwidth_factor: expected an array"},
      {key + "[[0, 1], 5]", "entry 2: expected [from_bytes, factor], two numbers"},
      {key + "[[0, 1, 2]]", "entry 1: expected [from_bytes, factor]"},
      {key + "[[0, \"fast\"]]", "entry 1: expected [from_bytes, factor]"},
      {key + "[[16, 1]]", "entry 1: the first entry must be from 0"},
      {key + "[[0, 1], [64, 0.5], [64, 0.7]]", "entry 3: from_bytes must be larger"},
      {key + "[[0, 1], [32.5, 0.5]]", "entry 2: from_bytes must be a whole number"},
      {key + "[[0, 1], [-8, 0.5]]", "entry 2: from_bytes must be a whole number"},
      {key + "[[0, 0]]", "entry 1: the factor must be > 0"},
      {key + "[[0, -1]]", "entry 1: the factor must be > 0"},
      {key + "[[0, 1e7]]", "entry 1: the factor must be > 0 and at most 1e6"},
      {key + "[[0, nan]]", "entry 1: the factor must be > 0"},
      {"latency_factor = [[0, -0.5]]", "network.latency_factor: entry 1: the factor must be >= 0"},
      {"send_overhead = -1", "network.send_overhead: must be >= 0"},
      {"recv_overhead = \"fast\"", "network.recv_overhead: expected a number"},
      {"gap = 1", "gap"},
      // The local passes' speeds.
      {"reduce_bandwidth = 1e10",
       "network.reduce_bandwidth: expected an array of [from_bytes, bytes_per_second] pairs"},
      {"copy_bandwidth = [[0, 0]]",
       "network.copy_bandwidth: entry 1: the bytes_per_second must be > 0"},
      {"scale_bandwidth = [[0, 0]]",
       "network.scale_bandwidth: entry 1: the bytes_per_second must be > 0"},
      {"divide_bandwidth = [[1, 1e9]]",
       "network.divide_bandwidth: entry 1: the first entry must be from 0"},
      {"solo_copy_bandwidth = [[0, -1]]",
       "network.solo_copy_bandwidth: entry 1: the bytes_per_second must be > 0"},
      {"copy_bandwidth = [[0, 1e16]]",
       "entry 1: the bytes_per_second must be > 0 and at most 1e15"},
      {"reduce_bandwidth = [[8, 1e10]]", "entry 1: the first entry must be from 0"},
      {"reduce_bandwidth = [[0, \"fast\"]]", "entry 1: expected [from_bytes, bytes_per_second]"},
      {"fp16.encode_bandwidth = 2e10",
       "network.fp16.encode_bandwidth: expected an array of [from_bytes, bytes_per_second]"},
      {"bf16.round_bandwidth = [[0, -1]]",
       "network.bf16.round_bandwidth: entry 1: the bytes_per_second must be > 0"},
      {"fp16.speed = [[0, 1e10]]", "fp16.speed"},
      {"fp8.encode_bandwidth = [[0, 1e10]]", "fp8"},
  };
  for (const Case& c : cases) {
    const std::string msg = recipe_error(two_gpus("[network]\n" + c.table + "\n"));
    EXPECT_NE(msg.find(kKeyLine), std::string::npos) << c.table << ": " << msg;
    EXPECT_NE(msg.find(c.expected), std::string::npos) << c.table << ": " << msg;
  }
  EXPECT_EQ(recipe_error(two_gpus("[network]\nlatency_factor = [[0, 0]]\n")), "");
}

// Seconds of `kind` over a buffer of `bytes` (an allgather's result, a reduce-scatter's input)
// at `workers` workers, cost-only, and the latency and bandwidth of the platform's `route`
// (gpus[0] to the next GPU, or to the master).
std::vector<double> simulate(const fs::path& recipe, Fidelity fidelity, CollectiveKind kind,
                             size_t bytes, int workers, Algorithm algorithm,
                             LinkModel Platform::*route = &Platform::intra_node,
                             WireFormat wire = WireFormat::kFp32, ReduceOp op = ReduceOp::kSum) {
  const testing::ChildResult result = run_in_child([&] {
    const Platform platform = load_platform(testing::make_engine(), recipe.string(), {}, workers);
    double end = 0;
    SimOptions options;
    options.workers = workers;
    options.fidelity = fidelity;
    options.cost_only = true;
    std::vector<float> all(bytes / sizeof(float)), block(all.size() / workers);
    run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
      if (kind == CollectiveKind::kAllreduce)
        comm.allreduce(all, {.op = op, .algorithm = algorithm, .wire = wire});
      if (kind == CollectiveKind::kAllgather) comm.allgather(block, all, {wire});
      if (kind == CollectiveKind::kReduceScatter) comm.reduce_scatter(all, block, op, {wire});
      end = std::max(end, exec.now());
    });
    return encode({end, (platform.*route).latency_s, (platform.*route).bandwidth_Bps});
  });
  EXPECT_EQ(result.status, 0) << result.output;
  return decode(result.output);
}

std::vector<double> simulate_allreduce(const fs::path& recipe, Fidelity fidelity, size_t bytes,
                                       int workers, Algorithm algorithm,
                                       LinkModel Platform::*route) {
  return simulate(recipe, fidelity, CollectiveKind::kAllreduce, bytes, workers, algorithm, route);
}

// Between the recipe's two GPUs (recursive doubling: one exchange of all the bytes each way).
std::vector<double> simulate_exchange(const fs::path& recipe, Fidelity fidelity, size_t bytes) {
  return simulate_allreduce(recipe, fidelity, bytes, 2, Algorithm::kRecursiveDoubling,
                            &Platform::intra_node);
}

class NetworkFactorsTiming : public ::testing::TestWithParam<Fidelity> {};

TEST_P(NetworkFactorsTiming, AMessageTakesOverheadPlusFactoredLatencyAndBandwidth) {
  const fs::path recipe = write_recipe(two_gpus(kTables));
  const fs::path plain = write_recipe(two_gpus(""), "plain");
  for (size_t bytes : {size_t{4096}, size_t{256} << 10, size_t{4} << 20}) {
    const std::vector<double> got = simulate_exchange(recipe, GetParam(), bytes);
    ASSERT_EQ(got.size(), 3u);
    const double latency = got[1], bandwidth = got[2], s = static_cast<double>(bytes);
    const double bw = bytes < 65536 ? 0.25 : bytes < 1048576 ? 0.5 : 2;
    const double lat = bytes < 65536 ? 3 : 0.5;
    const double expected = 2e-6 + latency * lat + s / (bandwidth * bw) + 3e-6;
    EXPECT_NEAR(got[0], expected, 1e-6 * expected) << bytes << " B";
    const std::vector<double> base = simulate_exchange(plain, GetParam(), bytes);
    ASSERT_EQ(base.size(), 3u);
    EXPECT_NEAR(base[0], latency + s / bandwidth, 1e-6 * base[0]) << bytes << " B, plain";
  }
}

// Three GPUs of one node and a master on 1 GB/s with 10 us; then `network`.
std::string three_gpus_and_master(const std::string& network) {
  std::string text = two_gpus("[master]\nbandwidth = 1e9\nlatency = 1e-5\n" + network);
  text.replace(text.find("gpus_per_node = 2"), 17, "gpus_per_node = 3");
  return text;
}

// Through the master at 3 workers.
std::vector<double> simulate_through_master(const fs::path& recipe, Fidelity fidelity,
                                            size_t bytes) {
  return simulate_allreduce(recipe, fidelity, bytes, 3, Algorithm::kMaster, &Platform::master_link);
}

// Each way, the three uploads (downloads) share the master's link, which each of them sees at
// the factored bandwidth: the closed form at analytic fidelity is what SimGrid's flows do at the
// others (a factor above 1 lets the three move faster than the link).
TEST_P(NetworkFactorsTiming, AnAllreduceThroughTheMasterPaysTheTermsOfOneMessageEachWay) {
  const std::string tables =
      "[network]\nsend_overhead = \"2us\"\nrecv_overhead = 3e-6\n"
      "bandwidth_factor = [[0, 0.25], [65536, 2]]\nlatency_factor = [[0, 3]]\n";
  const fs::path recipe = write_recipe(three_gpus_and_master(tables));
  const fs::path plain = write_recipe(three_gpus_and_master(""), "plain");
  for (size_t bytes : {size_t{16} << 10, size_t{1} << 20}) {
    const std::vector<double> got = simulate_through_master(recipe, GetParam(), bytes);
    const std::vector<double> base = simulate_through_master(plain, GetParam(), bytes);
    ASSERT_EQ(got.size(), 3u);
    ASSERT_EQ(base.size(), 3u);
    const double latency = got[1], bandwidth = got[2], s = static_cast<double>(bytes);
    const double factor = bytes < 65536 ? 0.25 : 2;
    const double shared = 3 * s / bandwidth;  // the plain model's transfer each way
    const double network = 5e-6 + 3 * latency + shared / factor;
    const double expected = base[0] + 2 * (network - latency - shared);
    EXPECT_NEAR(got[0], expected, 1e-6 * expected) << bytes << " B";
  }
}

// two_gpus(...) with `gpus` GPUs on its node.
std::string on_gpus(int gpus, std::string text) {
  text.replace(text.find("gpus_per_node = 2"), 17, "gpus_per_node = " + std::to_string(gpus));
  return text;
}

// The local passes at 2 ranks, on top of the same platform without them: recursive doubling
// reduces the whole buffer once, Rabenseifner (and the ring) half of it; an allgather copies its
// contribution (half) into place, a reduce-scatter its input and then its block out, and
// reduces the block it receives. Each pass of s bytes takes s / speed(s).
TEST_P(NetworkFactorsTiming, LocalPassesAddTheirReductionsAndCopies) {
  const std::string speeds =
      "[network]\nreduce_bandwidth = [[0, 2e10], [1048576, 5e9]]\n"
      "copy_bandwidth = [[0, 4e10], [524288, 8e9]]\n";
  const fs::path recipe = write_recipe(two_gpus(speeds));
  const fs::path plain = write_recipe(two_gpus(""), "plain");
  const auto reduce = [](double s) { return s / (s < 1048576 ? 2e10 : 5e9); };
  const auto copy = [](double s) { return s / (s < 524288 ? 4e10 : 8e9); };
  struct Case {
    CollectiveKind kind;
    Algorithm algorithm;
    size_t bytes;
    double local;
  };
  const double kib = 1024, mib = 1024 * kib;
  const Case cases[] = {
      {CollectiveKind::kAllreduce, Algorithm::kRecursiveDoubling, 16 << 10, reduce(16 * kib)},
      {CollectiveKind::kAllreduce, Algorithm::kRabenseifner, 4 << 20, reduce(2 * mib)},
      {CollectiveKind::kAllreduce, Algorithm::kRing, 1 << 20, reduce(512 * kib)},
      {CollectiveKind::kAllgather, Algorithm::kAuto, 2 << 20, copy(1 * mib)},
      {CollectiveKind::kAllgather, Algorithm::kAuto, 512 << 10, copy(256 * kib)},
      {CollectiveKind::kReduceScatter, Algorithm::kAuto, 1 << 20,
       copy(1 * mib) + copy(512 * kib) + reduce(512 * kib)},
  };
  for (const Case& c : cases) {
    const std::vector<double> got = simulate(recipe, GetParam(), c.kind, c.bytes, 2, c.algorithm);
    const std::vector<double> base = simulate(plain, GetParam(), c.kind, c.bytes, 2, c.algorithm);
    ASSERT_EQ(got.size(), 3u);
    ASSERT_EQ(base.size(), 3u);
    EXPECT_NEAR(got[0] - base[0], c.local, 1e-6 * got[0])
        << to_string(c.kind) << " " << to_string(c.algorithm) << " " << c.bytes << " B";
  }
}

// One rank's copies touch buffers that no other rank does, and pay solo_copy_bandwidth where the
// recipe has it: a reduce-scatter copies its input and then its block (the whole buffer), an
// allgather its contribution. From two ranks on, the copies pay copy_bandwidth as before.
TEST_P(NetworkFactorsTiming, OneRanksCopiesPaySoloCopySpeeds) {
  const std::string copies = "[network]\ncopy_bandwidth = [[0, 8e9]]\n";
  const std::string solo = copies + "solo_copy_bandwidth = [[0, 5e10], [1048576, 2e10]]\n";
  const auto solo_copy = [](double s) { return s / (s < 1048576 ? 5e10 : 2e10); };
  const double mib = 1024 * 1024;
  struct Case {
    CollectiveKind kind;
    size_t bytes;
    double one_rank;  // the copies' seconds at one rank
    double two_ranks;
  };
  const Case cases[] = {
      {CollectiveKind::kReduceScatter, 1 << 20, 2 * solo_copy(mib), mib / 8e9 + mib / 2 / 8e9},
      {CollectiveKind::kReduceScatter, 512 << 10, 2 * solo_copy(mib / 2),
       mib / 2 / 8e9 + mib / 4 / 8e9},
      {CollectiveKind::kAllgather, 2 << 20, solo_copy(2 * mib), mib / 8e9},
  };
  for (const Case& c : cases) {
    for (const int workers : {1, 2}) {
      const fs::path recipe = write_recipe(on_gpus(workers, two_gpus(solo)));
      const fs::path plain = write_recipe(on_gpus(workers, two_gpus("")), "plain");
      const std::vector<double> got =
          simulate(recipe, GetParam(), c.kind, c.bytes, workers, Algorithm::kAuto);
      const std::vector<double> base =
          simulate(plain, GetParam(), c.kind, c.bytes, workers, Algorithm::kAuto);
      ASSERT_EQ(got.size(), 3u);
      ASSERT_EQ(base.size(), 3u);
      const double expected = workers == 1 ? c.one_rank : c.two_ranks;
      EXPECT_NEAR(got[0] - base[0], expected, 1e-6 * got[0])
          << to_string(c.kind) << " " << c.bytes << " B at " << workers << " ranks";
    }
  }
}

// Ranks that time-share their node's cores make their local passes at the share of a core their
// compute gets: 2 ranks on one core take twice the passes' time (on top of the same platform
// without speeds, also on one core), on two cores the time of one core each.
TEST_P(NetworkFactorsTiming, TimeSharedCoresStretchTheLocalPasses) {
  const std::string speeds =
      "[network]\nreduce_bandwidth = [[0, 2e10]]\ncopy_bandwidth = [[0, 4e10]]\n";
  const double mib = 1024 * 1024;
  struct Case {
    CollectiveKind kind;
    Algorithm algorithm;
    double local;  // on a core of their own
  };
  const Case cases[] = {
      {CollectiveKind::kAllreduce, Algorithm::kRabenseifner, 2 * mib / 2e10},
      {CollectiveKind::kAllgather, Algorithm::kAuto, 2 * mib / 4e10},
      {CollectiveKind::kReduceScatter, Algorithm::kAuto,
       4 * mib / 4e10 + 2 * mib / 4e10 + 2 * mib / 2e10},
  };
  for (const int cores : {1, 2}) {
    const auto on_cores = [cores](std::string text) {
      text.replace(text.find("gpus_per_node = 2"), 17,
                   "gpus_per_node = 2\ncores_per_node = " + std::to_string(cores));
      return text;
    };
    const fs::path recipe = write_recipe(on_cores(two_gpus(speeds)));
    const fs::path plain = write_recipe(on_cores(two_gpus("")), "plain");
    for (const Case& c : cases) {
      const std::vector<double> got = simulate(recipe, GetParam(), c.kind, 4 << 20, 2, c.algorithm);
      const std::vector<double> base = simulate(plain, GetParam(), c.kind, 4 << 20, 2, c.algorithm);
      ASSERT_EQ(got.size(), 3u);
      ASSERT_EQ(base.size(), 3u);
      const double expected = c.local * (cores == 1 ? 2 : 1);
      EXPECT_NEAR(got[0] - base[0], expected, 1e-6 * got[0])
          << to_string(c.kind) << " on " << cores << " core(s)";
    }
  }
}

// A collective at `workers` ranks over `bytes` of floats in `wire`, and the seconds of local
// passes it should add.
struct PassCase {
  CollectiveKind kind;
  Algorithm algorithm;
  int workers;
  size_t bytes;
  WireFormat wire;
  double seconds;
};

// A 16-bit wire format's passes, on top of the same platform without them, in that format: a
// reduction rounds its buffer first, an allgather its own block; each send encodes its segment,
// except where it forwards a segment as it received it (a ring allgather's second round on); each
// received segment is added as it is decoded, or decoded into place. Each format has its own
// speeds; fp32 pays none of them.
TEST_P(NetworkFactorsTiming, WireFormatPassesAddRoundingEncodingsAndDecodings) {
  const std::string speeds =
      "[network.fp16]\nencode_bandwidth = [[0, 2e10], [1048576, 5e9]]\n"
      "decode_bandwidth = [[0, 3e10]]\nreduce_bandwidth = [[0, 1.5e10]]\n"
      "round_bandwidth = [[0, 4e10]]\n"
      "[network.bf16]\nencode_bandwidth = [[0, 1e10]]\ndecode_bandwidth = [[0, 6e9]]\n"
      "reduce_bandwidth = [[0, 7e9]]\nround_bandwidth = [[0, 8e9]]\n";
  const auto encode = [](double s) { return s / (s < 1048576 ? 2e10 : 5e9); };
  const auto decode = [](double s) { return s / 3e10; };
  const auto reduce = [](double s) { return s / 1.5e10; };
  const auto round = [](double s) { return s / 4e10; };
  const double kib = 1024, mib = 1024 * kib;
  const PassCase cases[] = {
      // Round, then the reduce-scatter's step and the allgather's (whose segment was reduced).
      {CollectiveKind::kAllreduce, Algorithm::kRing, 2, 4 << 20, WireFormat::kFp16,
       round(4 * mib) + 2 * encode(2 * mib) + reduce(2 * mib) + decode(2 * mib)},
      {CollectiveKind::kAllreduce, Algorithm::kRecursiveDoubling, 2, 64 << 10, WireFormat::kFp16,
       round(64 * kib) + encode(64 * kib) + reduce(64 * kib)},
      {CollectiveKind::kAllreduce, Algorithm::kRing, 2, 1 << 20, WireFormat::kBf16,
       1 * mib / 8e9 + 2 * (512 * kib / 1e10) + 512 * kib / 7e9 + 512 * kib / 6e9},
      {CollectiveKind::kReduceScatter, Algorithm::kAuto, 2, 1 << 20, WireFormat::kFp16,
       round(1 * mib) + encode(512 * kib) + reduce(512 * kib)},
      // Three ranks: its own block rounded, then two rounds, the second forwarding what the
      // first received.
      {CollectiveKind::kAllgather, Algorithm::kAuto, 3, 3 << 20, WireFormat::kFp16,
       round(1 * mib) + encode(1 * mib) + 2 * decode(1 * mib)},
      {CollectiveKind::kAllreduce, Algorithm::kRing, 3, 3 << 20, WireFormat::kFp16,
       round(3 * mib) + 2 * (encode(1 * mib) + reduce(1 * mib)) + encode(1 * mib) +
           2 * decode(1 * mib)},
      {CollectiveKind::kAllreduce, Algorithm::kRing, 2, 1 << 20, WireFormat::kFp32, 0},
  };
  for (const PassCase& c : cases) {
    const fs::path recipe = write_recipe(on_gpus(c.workers, two_gpus(speeds)));
    const fs::path plain = write_recipe(on_gpus(c.workers, two_gpus("")), "plain");
    const std::vector<double> got = simulate(recipe, GetParam(), c.kind, c.bytes, c.workers,
                                             c.algorithm, &Platform::intra_node, c.wire);
    const std::vector<double> base = simulate(plain, GetParam(), c.kind, c.bytes, c.workers,
                                              c.algorithm, &Platform::intra_node, c.wire);
    ASSERT_EQ(got.size(), 3u);
    ASSERT_EQ(base.size(), 3u);
    EXPECT_NEAR(got[0] - base[0], c.seconds, 1e-6 * got[0])
        << to_string(c.kind) << " " << to_string(c.algorithm) << " at " << c.workers << ", "
        << c.bytes << " B, " << to_string(c.wire);
  }
}

// An average (kAvg) against the same sum: its division by p is one pass more, at scale_bandwidth
// where p is a power of two and divide_bandwidth otherwise, over the floats each rank divides
// as the real backend does: after the schedule in fp32 (an allreduce's whole buffer, a
// reduce-scatter's block), before it in a 16-bit format (the whole input, before its rounding).
// Nothing at one rank, nor without the tables.
TEST_P(NetworkFactorsTiming, AnAverageDividesItsResultAtTheScaleOrDivideSpeed) {
  const std::string speeds =
      "[network]\nscale_bandwidth = [[0, 2e10], [1048576, 5e9]]\n"
      "divide_bandwidth = [[0, 4e9]]\n[network.fp16]\nround_bandwidth = [[0, 4e10]]\n";
  const auto scale = [](double s) { return s / (s < 1048576 ? 2e10 : 5e9); };
  const auto divide = [](double s) { return s / 4e9; };
  const double kib = 1024, mib = 1024 * kib;
  const PassCase cases[] = {
      {CollectiveKind::kAllreduce, Algorithm::kRabenseifner, 2, 4 << 20, WireFormat::kFp32,
       scale(4 * mib)},
      {CollectiveKind::kAllreduce, Algorithm::kRing, 4, 256 << 10, WireFormat::kFp32,
       scale(256 * kib)},
      {CollectiveKind::kAllreduce, Algorithm::kRing, 3, 3 << 20, WireFormat::kFp32,
       divide(3 * mib)},
      {CollectiveKind::kReduceScatter, Algorithm::kAuto, 2, 1 << 20, WireFormat::kFp32,
       scale(512 * kib)},
      {CollectiveKind::kReduceScatter, Algorithm::kAuto, 3, 3 << 20, WireFormat::kFp32,
       divide(1 * mib)},
      {CollectiveKind::kAllreduce, Algorithm::kRing, 2, 1 << 20, WireFormat::kFp16, scale(1 * mib)},
      {CollectiveKind::kAllreduce, Algorithm::kRing, 1, 1 << 20, WireFormat::kFp32, 0},
  };
  for (const PassCase& c : cases) {
    const fs::path recipe = write_recipe(on_gpus(std::max(c.workers, 2), two_gpus(speeds)));
    const fs::path plain = write_recipe(on_gpus(std::max(c.workers, 2), two_gpus("")), "plain");
    const auto seconds = [&](const fs::path& path, ReduceOp op) {
      const std::vector<double> got = simulate(path, GetParam(), c.kind, c.bytes, c.workers,
                                               c.algorithm, &Platform::intra_node, c.wire, op);
      EXPECT_EQ(got.size(), 3u);
      return got.empty() ? 0.0 : got[0];
    };
    const double sum = seconds(recipe, ReduceOp::kSum), avg = seconds(recipe, ReduceOp::kAvg);
    EXPECT_NEAR(avg - sum, c.seconds, 1e-6 * avg)
        << to_string(c.kind) << " " << to_string(c.algorithm) << " at " << c.workers << ", "
        << c.bytes << " B, " << to_string(c.wire);
    EXPECT_EQ(seconds(plain, ReduceOp::kAvg), seconds(plain, ReduceOp::kSum))
        << to_string(c.kind) << " at " << c.workers << ", plain";
  }
}

TEST(NetworkFactors, LocalPassSpeedsParseAndLookUpByPassSize) {
  const detail::Recipe recipe = detail::parse_recipe(
      write_recipe(two_gpus("[network]\nreduce_bandwidth = [[0, 2e10], [65536, 9e9]]\n"
                            "copy_bandwidth = [[0, 3e10]]\nscale_bandwidth = [[0, 5e10]]\n"
                            "divide_bandwidth = [[0, 7e9]]\n"))
          .string(),
      {});
  EXPECT_FALSE(recipe.network.empty());
  EXPECT_DOUBLE_EQ(local_pass_seconds(recipe.network.reduce, 65536), 65536 / 9e9);
  EXPECT_DOUBLE_EQ(local_pass_seconds(recipe.network.reduce, 4096), 4096 / 2e10);
  EXPECT_DOUBLE_EQ(local_pass_seconds(recipe.network.copy, 1e9), 1e9 / 3e10);
  EXPECT_DOUBLE_EQ(average_pass_seconds(recipe.network, 4, 1000), 4000 / 5e10);
  EXPECT_DOUBLE_EQ(average_pass_seconds(recipe.network, 6, 1000), 4000 / 7e9);
  EXPECT_EQ(average_pass_seconds(recipe.network, 1, 1000), 0);
  EXPECT_EQ(local_pass_seconds({}, 1e9), 0);
}

INSTANTIATE_TEST_SUITE_P(Fidelities, NetworkFactorsTiming, testing::every_fidelity(),
                         testing::FidelityName());

}  // namespace
}  // namespace syncopate::sim
