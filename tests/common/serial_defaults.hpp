#pragma once
// The base the tests build their scenarios on: the embedded default scenario made one local
// worker, one epoch, serial SGD (the reference every strategy is compared with), then `sets`.
#include <string>
#include <vector>

namespace syncopate {

inline std::vector<std::string> serial_defaults(const std::vector<std::string>& sets) {
  std::vector<std::string> all = {"backend=local", "workers=1", "epochs=1", "strategy.name=serial"};
  all.insert(all.end(), sets.begin(), sets.end());
  return all;
}

}  // namespace syncopate
