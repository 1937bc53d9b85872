// Compiled only by the tests build.core_cannot_include_backend (must fail: core's include root
// has no backends/) and build.backend_header_compiles (the same file with the repository root).
#include "backends/sim/sim_backend.hpp"

namespace syncopate::build_check {
int backend_header_included = 1;
}  // namespace syncopate::build_check
