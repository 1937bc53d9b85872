#pragma once
// Helpers of the simulator tests: run a body in a forked child (SimGrid's engine can be created
// once per process), and a small two-level test platform built with the S4U API.

#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <string>
#include <vector>

#include "backends/sim/platform/platform.hpp"
#include "backends/sim/sim_backend.hpp"
#include "tests/sim/fork_util.hpp"

namespace syncopate::sim::testing {

using syncopate::testing::ChildResult;

// Runs body() in a forked child (tests/sim/fork_util.hpp). An exception thrown by body comes back
// in `output` with its type ("SimDeadlock: ...", "UserError: ...", "exception: ..."), the status
// then being 0 as for a normal return.
inline ChildResult run_in_child(const std::function<std::string()>& body) {
  return syncopate::testing::run_in_child_output([&]() -> std::string {
    try {
      return body();
    } catch (const SimDeadlock& e) {
      return std::string("SimDeadlock: ") + e.what();
    } catch (const UserError& e) {
      return std::string("UserError: ") + e.what();
    } catch (const std::exception& e) {
      return std::string("exception: ") + e.what();
    }
  });
}

// Creates the engine (quiet logs) and configures it as run_simulation does.
inline simgrid::s4u::Engine& make_engine() {
  static EngineArgs args("test", "critical");
  static simgrid::s4u::Engine engine(args.argc(), args.argv());
  configure_engine(engine);
  return engine;
}

struct TestPlatformSpec {
  int gpus = 4;
  int gpus_per_node = 4;
  double link_latency = 1e-6;  // per link: a route crosses two links
  double intra_bandwidth = 100e9;
  double inter_bandwidth = 10e9;
  bool master = false;
  double gemm_flops = 1e12;  // every op kind
  double memory_bandwidth = 1e12;
  double step_overhead = 0;
};

// A single node of p GPUs whose links all have one latency and one bandwidth, for checks
// against closed forms (alpha-beta): a route crosses two links, so alpha = 2 link latencies.
struct ClosedForm {
  static constexpr double kLinkLatency = 1e-6;  // per link
  static constexpr double kBandwidth = 10e9;    // bytes/s
  static constexpr double kAlpha = 2 * kLinkLatency;
  static constexpr double kBeta = 1 / kBandwidth;
};

inline TestPlatformSpec closed_form_node(int p) {
  return {.gpus = p,
          .gpus_per_node = p,
          .link_latency = ClosedForm::kLinkLatency,
          .intra_bandwidth = ClosedForm::kBandwidth,
          .inter_bandwidth = ClosedForm::kBandwidth,
          .master = true};
}

// A full-routing zone: every GPU has its own split-duplex "nvlink" and "nic" links; a route
// inside a node is nvl_i UP + nvl_j DOWN, across nodes nic_i UP + nic_j DOWN (one NIC per GPU,
// as on MareNostrum 5). Route latency 2 * link_latency, bandwidth the link's.
inline Platform make_test_platform(const TestPlatformSpec& spec) {
  namespace sg4 = simgrid::s4u;
  make_engine();
  sg4::NetZone* zone = sg4::create_full_zone("test");
  Platform platform;
  platform.name = "test";
  platform.gpus_per_node = spec.gpus_per_node;
  std::vector<sg4::Link*> nvl, nic;
  const auto up = sg4::LinkInRoute::Direction::UP;
  const auto down = sg4::LinkInRoute::Direction::DOWN;
  for (int i = 0; i < spec.gpus; ++i) {
    platform.gpus.push_back(zone->create_host("gpu" + std::to_string(i), 1e12));
    platform.node_of_gpu.push_back(i / spec.gpus_per_node);
    nvl.push_back(zone->create_split_duplex_link("nvl" + std::to_string(i), spec.intra_bandwidth)
                      ->set_latency(spec.link_latency)
                      ->seal());
    nic.push_back(zone->create_split_duplex_link("nic" + std::to_string(i), spec.inter_bandwidth)
                      ->set_latency(spec.link_latency)
                      ->seal());
  }
  for (int i = 0; i < spec.gpus; ++i)
    for (int j = 0; j < spec.gpus; ++j) {
      if (i == j) continue;
      const bool same = platform.node_of_gpu[static_cast<size_t>(i)] ==
                        platform.node_of_gpu[static_cast<size_t>(j)];
      const auto& links = same ? nvl : nic;
      zone->add_route(platform.gpus[static_cast<size_t>(i)]->get_netpoint(),
                      platform.gpus[static_cast<size_t>(j)]->get_netpoint(), nullptr, nullptr,
                      {{links[static_cast<size_t>(i)], up}, {links[static_cast<size_t>(j)], down}},
                      false);
    }
  if (spec.master) {
    platform.master = zone->create_host("master", 1e12);
    sg4::Link* link = zone->create_split_duplex_link("master_nic", spec.inter_bandwidth)
                          ->set_latency(spec.link_latency)
                          ->seal();
    for (int i = 0; i < spec.gpus; ++i) {
      zone->add_route(platform.master->get_netpoint(),
                      platform.gpus[static_cast<size_t>(i)]->get_netpoint(), nullptr, nullptr,
                      {{link, up}, {nic[static_cast<size_t>(i)], down}}, false);
      zone->add_route(platform.gpus[static_cast<size_t>(i)]->get_netpoint(),
                      platform.master->get_netpoint(), nullptr, nullptr,
                      {{nic[static_cast<size_t>(i)], up}, {link, down}}, false);
    }
  }
  zone->seal();
  platform.profile.name = "test";
  platform.profile.flops_per_s.fill(spec.gemm_flops);
  platform.profile.memory_bandwidth = spec.memory_bandwidth;
  platform.profile.step_overhead_s = spec.step_overhead;
  platform.intra_node = {2 * spec.link_latency, spec.intra_bandwidth};
  platform.inter_node = {2 * spec.link_latency, spec.inter_bandwidth};
  platform.master_link = {2 * spec.link_latency, spec.inter_bandwidth};
  return platform;
}

}  // namespace syncopate::sim::testing

namespace syncopate::sim::testing {

// Doubles through the child's result string, exactly (%a).
inline std::string encode(const std::vector<double>& values) {
  std::string out;
  for (double v : values) {
    std::array<char, 64> buffer{};
    std::snprintf(buffer.data(), buffer.size(), "%a ", v);
    out += buffer.data();
  }
  return out;
}

inline std::vector<double> decode(const std::string& text) {
  std::vector<double> values;
  const char* p = text.c_str();
  char* end = nullptr;
  for (double v = std::strtod(p, &end); end != p; v = std::strtod(p, &end)) {
    values.push_back(v);
    p = end;
  }
  return values;
}

// Every fidelity as a test parameter, each instance named after it (message, flow, analytic):
//   INSTANTIATE_TEST_SUITE_P(Fidelities, SomeTest, testing::every_fidelity(),
//                            testing::FidelityName());
inline auto every_fidelity() {
  return ::testing::Values(Fidelity::kMessage, Fidelity::kFlow, Fidelity::kAnalytic);
}

struct FidelityName {
  std::string operator()(const ::testing::TestParamInfo<Fidelity>& info) const {
    return std::string(to_string(info.param));
  }
};

}  // namespace syncopate::sim::testing
