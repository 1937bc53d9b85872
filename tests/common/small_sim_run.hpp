#pragma once
// Tests of simulated faults through the syncopate binary: tests/cross/small.toml with host
// failures appended, run on the simulator at 4 workers for 3 epochs (ethernet-cluster, flow).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/run_command.hpp"

namespace syncopate {

struct HostFailure {
  int worker;
  double at_s;
};

// Writes small.toml with a [[sim.faults]] host_failure for each of `faults` to `path`.
inline std::string small_with_host_failures(const std::filesystem::path& path,
                                            const std::vector<HostFailure>& faults) {
  std::ofstream out(path);
  out.precision(17);
  out << read_text(std::string(SYNCOPATE_SOURCE_DIR) + "/tests/cross/small.toml");
  for (const HostFailure& f : faults)
    out << "\n[[sim.faults]]\nkind = \"host_failure\"\nworker = " << f.worker
        << "\nat_s = " << f.at_s << "\n";
  return path.string();
}

// `syncopate run FILE` on the simulator with `strategy` and the `extra` options into `out`;
// returns the exit code, the output in `log`.
inline int run_small_on_sim(const std::string& file, const std::string& strategy,
                            const std::string& extra, const std::filesystem::path& out,
                            std::string* log) {
  return run_command(std::string(SYNCOPATE_BIN) + " run " + file +
                         " --quiet --backend sim --strategy " + strategy +
                         " --workers 4 --epochs 3 --platform ethernet-cluster --fidelity flow "
                         "--out " +
                         out.string() + extra,
                     log);
}

}  // namespace syncopate
