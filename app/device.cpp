// The device set-up of a run: the accelerator model.device asks for, and the MPI ranks' GPUs and
// NCCL.
#include "app/commands.hpp"
#include "core/base/check.hpp"
#include "core/nn/model.hpp"
#ifdef SYNCOPATE_HAVE_CUDA
#include "backends/cuda/cuda_accelerator.hpp"
#include "backends/cuda/device.hpp"
#endif
#ifdef SYNCOPATE_HAVE_NCCL
#include "backends/cuda/nccl_comm.hpp"
#endif

namespace syncopate::app {

AcceleratorFactory accelerator_for(const Scenario& scenario) {
  if (scenario.model.device != Device::kCuda) return {};
#ifdef SYNCOPATE_HAVE_CUDA
  return [](const Model& model) { return cuda::make_cuda_accelerator(model); };
#else
  throw UserError(scenario.source +
                  ": model.device: \"cuda\" needs a build with the CUDA toolkit; this one has "
                  "none (allowed here: cpu)");
#endif
}

std::unique_ptr<Communicator> mpi_device_setup(const Scenario& scenario, Communicator& world,
                                               int local_rank, double watchdog_seconds) {
  const Transport transport = scenario.mpi.transport;
  if (transport == Transport::kMpi) {
#ifdef SYNCOPATE_HAVE_CUDA
    if (scenario.model.device == Device::kCuda && cuda::cuda_available())
      SYNC_CUDA_CHECK(cudaSetDevice(local_rank % cuda::device_count()));
#endif
    return nullptr;
  }
#ifdef SYNCOPATE_HAVE_NCCL
  try {
    return std::make_unique<cuda::NcclCommunicator>(
        world, cuda::NcclOptions{.native = transport == Transport::kNcclNative,
                                 .watchdog_seconds = watchdog_seconds});
  } catch (const UserError& e) {
    throw UserError(scenario.source + ": mpi.transport: \"" + std::string(to_string(transport)) +
                    "\": " + e.what());
  }
#else
  static_cast<void>(world);
  static_cast<void>(local_rank);
  static_cast<void>(watchdog_seconds);
  throw UserError(scenario.source + ": mpi.transport: \"" + std::string(to_string(transport)) +
                  "\" needs a build with CUDA and NCCL; this one has none (allowed here: mpi)");
#endif
}

}  // namespace syncopate::app
