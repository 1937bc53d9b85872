// Where the NCCL communicator's ranks take their GPUs: by machine, not by (possibly pretend)
// node. Pure functions; no device needed.
#include "backends/cuda/nccl_placement.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace syncopate::cuda {
namespace {

TEST(NcclPlacement, HostIdsSurviveTheFloatQuarters) {
  for (const uint64_t id : {uint64_t{0}, ~uint64_t{0}, host_id("gpu-node-17"), host_id(""),
                            uint64_t{0x8000'0001'ffff'0000}}) {
    const std::array<float, 4> quarters = pack_host(id);
    EXPECT_EQ(unpack_host(quarters), id);
  }
  EXPECT_NE(host_id("node1"), host_id("node2"));
  EXPECT_EQ(host_id("node1"), host_id("node1"));
}

TEST(NcclPlacement, ARankCountsTheRanksBeforeItOnItsMachine) {
  // Four ranks on machine A, two on B, interleaved as a scheduler may place them.
  const uint64_t a = host_id("a"), b = host_id("b");
  const std::vector<uint64_t> hosts{a, a, b, a, b, a};
  const std::vector<int> expected{0, 1, 0, 2, 1, 3};
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r)
    EXPECT_EQ(index_on_host(hosts, r), expected[static_cast<size_t>(r)]) << "rank " << r;
}

TEST(NcclPlacement, PretendNodesOnOneMachineTakeDifferentGpus) {
  // SYNCOPATE_MPI_RANKS_PER_NODE=2 with 4 ranks on one 4-GPU machine: nodes 0, 0, 1, 1. By node
  // index the ranks would take GPUs 0, 1, 0, 1; by machine 0, 1, 2, 3.
  const uint64_t one = host_id("box");
  const std::vector<uint64_t> hosts(4, one);
  const std::vector<int> nodes{0, 0, 1, 1};
  std::vector<PciLocation> gpus;
  for (int r = 0; r < 4; ++r) gpus.push_back({0, 0x10 + index_on_host(hosts, r) % 4, 0});
  EXPECT_EQ(placement_problem(nodes, hosts, gpus), "");
}

TEST(NcclPlacement, TwoRanksOfOneMachineOnOneGpuAreRefusedWhateverTheirNodes) {
  const uint64_t one = host_id("box");
  const std::vector<uint64_t> hosts(4, one);
  const std::vector<int> nodes{0, 0, 1, 1};
  // Two GPUs for four ranks: rank 2 takes rank 0's.
  const std::vector<PciLocation> gpus{{0, 0x10, 0}, {0, 0x11, 0}, {0, 0x10, 0}, {0, 0x11, 0}};
  const std::string problem = placement_problem(nodes, hosts, gpus);
  EXPECT_NE(problem.find("ranks 0 and 2 (nodes 0 and 1, on one machine) would share the GPU at "
                         "PCI 0:10:0"),
            std::string::npos)
      << problem;
  // The same GPUs on the same node.
  const std::vector<int> one_node(4, 0);
  EXPECT_NE(placement_problem(one_node, hosts, gpus).find("ranks 0 and 2 on node 0 would share"),
            std::string::npos);
}

TEST(NcclPlacement, TheSamePciLocationOnTwoMachinesIsTwoGpus) {
  const std::vector<uint64_t> hosts{host_id("a"), host_id("b")};
  const std::vector<int> nodes{0, 1};
  const std::vector<PciLocation> gpus{{0, 0x10, 0}, {0, 0x10, 0}};
  EXPECT_EQ(placement_problem(nodes, hosts, gpus), "");
}

TEST(NcclPlacement, ARankWithoutADeviceIsNamed) {
  const std::vector<uint64_t> hosts{host_id("a"), host_id("a")};
  const std::vector<int> nodes{0, 0};
  const std::vector<PciLocation> gpus{{0, 0x10, 0}, {}};
  EXPECT_EQ(placement_problem(nodes, hosts, gpus),
            "rank 1 (node 0, which runs 2 ranks) sees no CUDA device");
}

}  // namespace
}  // namespace syncopate::cuda
