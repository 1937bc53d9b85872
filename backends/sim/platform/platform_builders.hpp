#pragma once
// Builds a parsed recipe into SimGrid zones. platform_builders.cpp holds every call of SimGrid's
// create_*_zone builders (renamed in SimGrid 4), behind one small adapter.
#include <simgrid/s4u.hpp>
#include <vector>

#include "backends/sim/platform/platform_recipe.hpp"

namespace syncopate::sim::detail {

struct BuiltCluster {
  std::vector<simgrid::s4u::Host*> gpus;  // node-major: node k holds gpus[k*G .. k*G+G-1]
  std::vector<int> node_of_gpu;
  simgrid::s4u::Host* master = nullptr;
};

// Creates the whole platform under a new root zone named after the recipe. The engine must not
// hold a platform yet.
BuiltCluster build_recipe(const Recipe& recipe);

}  // namespace syncopate::sim::detail
