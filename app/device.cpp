#include "app/commands.hpp"
#include "core/check.hpp"
#include "core/model.hpp"
#ifdef SYNCOPATE_HAVE_CUDA
#include "backends/cuda/cuda_accelerator.hpp"
#endif

namespace syncopate::app {

AcceleratorFactory accelerator_for(const Scenario& scenario) {
  if (scenario.model.device != "cuda") return {};
#ifdef SYNCOPATE_HAVE_CUDA
  return [](const Model& model) { return cuda::make_cuda_accelerator(model); };
#else
  throw UserError(scenario.source +
                  ": model.device: \"cuda\" needs a build with the CUDA toolkit; this one has "
                  "none (allowed here: cpu)");
#endif
}

}  // namespace syncopate::app
