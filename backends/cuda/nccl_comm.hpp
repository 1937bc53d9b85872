#pragma once
// A Communicator whose data travels through NCCL between the ranks' GPUs (mpi.transport =
// "nccl" or "nccl_native"); built when the NCCL headers and library are found
// (SYNCOPATE_HAVE_NCCL).
//
// Layering: NcclCommunicator wraps a host "control" Communicator (the MPI one in the app; any
// backend in tests) and keeps from it what NCCL has no equivalent for:
//   - bootstrap: control's rank 0 draws the NCCL unique id and broadcasts it; device selection
//     (a rank's device is its index among the ranks of its node, modulo the devices it sees),
//     checked on every rank against every rank's node and GPU PCI location;
//   - barrier, split (a new NCCL communicator over control's split group), node();
//   - epoch_async's shared model (create_shared_model: control's), which needs one-sided
//     access under an exclusive lock.
// Every data movement (allreduce, broadcast, reduce, allgather, reduce_scatter, send, recv) goes
// through NCCL on this rank's device.
//
// Same arithmetic as every other backend: by default each collective runs the core's schedule
// (core/comm/collective_schedule.hpp) as NCCL point-to-point rounds (one ncclGroup of send and recv
// per step), with the step's reduction done by a device kernel that adds in the same order as
// the host's apply_action, and finish() (the division of kAvg) on the host. The results are
// therefore bit-identical to the MPI backend and to the simulator's emulation. In a 16-bit wire
// format (strategy.compression = "fp16" / "bf16") the device rounds as core's prepare() and
// apply_action do, with core's own converters (core/comm/wire_bits.hpp), and each step sends its
// segment encoded, 2 bytes an element: the same bits again. With
// `native = true` allreduce and reduce use NCCL's own algorithms instead (ncclAllReduce /
// ncclReduce with ncclSum or ncclMax, then the same finish(); an allreduce in a 16-bit format
// reduces ncclFloat16 / ncclBfloat16 buffers): faster at scale, but summed in NCCL's order, so
// equal to the others only to rounding. Broadcasts always use ncclBroadcast
// (a copy: no arithmetic to disagree on).
//
// Host spans (the Communicator interface) are staged: copied to a device buffer, communicated,
// copied back. allreduce_async is asynchronous end to end: the host data is copied into a
// pinned buffer of a reusable pool, everything after that is queued on the communicator's stream
// (host-to-device, the schedule, device-to-host into the pinned buffer), and Work::wait() copies
// the result out once the stream reached it. All operations of one communicator are queued on
// one stream in call order, which every rank shares, as NCCL requires.
//
// Device-resident callers use allreduce_device / broadcast_device on this rank's device.
//
// Faults: every wait polls the stream with a timeout (CollectiveOptions::timeout_s, else the
// default: NcclOptions::watchdog_seconds or set_default_timeout) and ncclCommGetAsyncError; a
// timeout aborts the NCCL communicator (ncclCommAbort) and throws PeerTimeout, an asynchronous
// NCCL error aborts it and throws NcclError, both naming the operation. Misuse is a UserError
// before anything is queued (the contract in core/comm/comm.hpp). NCCL cannot see a size
// mismatch between a send and its recv, so send() first sends the element count and recv()
// checks it: on a mismatch it still receives the message (so the send completes), then throws
// UserError.
#if defined(SYNCOPATE_HAVE_NCCL)
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "backends/cuda/device.hpp"
#include "core/base/function_ref.hpp"
#include "core/comm/comm.hpp"
#include "core/comm/schedule_cache.hpp"

namespace syncopate::cuda {

// An NCCL call failed or an asynchronous NCCL error was reported (the contract's PeerFailure).
class NcclError : public PeerFailure {
 public:
  using PeerFailure::PeerFailure;
};

struct NcclOptions {
  bool native = false;            // NCCL's own allreduce/reduce algorithms (see above)
  double watchdog_seconds = 600;  // default timeout: a longer wait throws; 0 = wait forever
};

class PinnedPool;

class NcclCommunicator final : public Communicator {
 public:
  // Collective over every rank of `control`, which must outlive this object. Selects this
  // rank's device (cudaSetDevice on the calling thread) and creates the NCCL communicator.
  // Throws UserError on every rank alike when some rank has no GPU or two would share one.
  // Calls come from one thread at a time; a Work must not outlive its communicator.
  NcclCommunicator(Communicator& control, NcclOptions options = {});
  // The same over a control communicator that this object owns. device >= 0 uses that device
  // instead of choosing one (split() keeps each rank on its parent's device).
  NcclCommunicator(std::unique_ptr<Communicator> control, NcclOptions options, int device = -1);
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int node() const override { return control_->node(); }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_->get(); }

  WorkPtr allreduce_async(std::span<float> data, const CollectiveOptions& options) override;
  void broadcast(std::span<float> data, int root) override;
  void reduce(std::span<float> data, int root, ReduceOp op) override;
  void allgather(std::span<const float> mine, std::span<float> all,
                 const GatherOptions& options) override;
  void reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                      const GatherOptions& options) override;
  // Queued on stream() after the operations before them, as allreduce_async.
  WorkPtr allgather_async(std::span<const float> mine, std::span<float> all,
                          const GatherOptions& options) override;
  WorkPtr reduce_scatter_async(std::span<const float> in, std::span<float> out, ReduceOp op,
                               const GatherOptions& options) override;
  void barrier() override;
  void send(std::span<const float> data, int peer) override;
  void recv(std::span<float> data, int peer) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  // control's shared model (merges count in counters() through control's).
  std::unique_ptr<SharedModel> create_shared_model(std::span<const float> initial,
                                                   GlobalModelPlacement placement) override {
    return control_->create_shared_model(initial, placement);
  }
  CommCounters counters() const override;
  void set_default_timeout(double seconds) override { options_.watchdog_seconds = seconds; }
  double default_timeout() const override { return options_.watchdog_seconds; }

  // Device-resident forms: `data` holds count floats on device(); queued on stream() and
  // complete when the call returns (kAvg's division runs on the device, correctly rounded like
  // the host's).
  void allreduce_device(float* data, size_t count, const CollectiveOptions& options);
  void broadcast_device(float* data, size_t count, int root);

 private:
  friend class NcclWork;
  void init(int device);
  // Blocks until every operation queued so far has completed (watchdog applies).
  void synchronize(const char* what);
  void set_device() const;
  void check_open() const;
  void check_rank(int rank, const char* operation, const char* what, bool self_allowed) const;
  void check_block(size_t got, size_t n, const char* operation, const char* what) const;
  // This rank's steps of a schedule (the schedule cache's: kAuto resolved as every backend
  // does, from the bytes in `wire`), with scratch grown to fit them.
  const std::vector<Step>& steps_of(CollectiveKind kind, Algorithm algorithm, size_t count,
                                    int root, WireFormat wire = WireFormat::kFp32);
  // Queue NCCL operations and kernels on stream() (no finish()).
  void enqueue_allreduce(float* data, size_t count, const CollectiveOptions& options);
  void enqueue_steps(const std::vector<Step>& steps, float* data, ReduceOp op,
                     WireFormat wire = WireFormat::kFp32);
  // A 16-bit format over several ranks: data (count) divided (kAvg) and rounded on the device,
  // as core's prepare(); nothing otherwise.
  void enqueue_prepare(float* data, size_t count, ReduceOp op, WireFormat wire);
  // The encoded buffers (wire_out_, wire_in_) of at least count elements (grown after a
  // synchronize).
  void wire_room(size_t count);
  void broadcast_enqueue(float* data, size_t count, int root);
  // The gathers run the schedule that `algorithm` selects (the hierarchical one where the ranks
  // span nodes of equal size, numbered node by node, for kAuto and kHierarchical; else the
  // ring), in its layout (GatherLayout): the caller's buffers are permuted around it on the host.
  void enqueue_allgather(float* all, size_t count, Algorithm algorithm, WireFormat wire);
  void enqueue_reduce_scatter(float* in, size_t count, ReduceOp op, Algorithm algorithm,
                              WireFormat wire);
  void place_contribution(std::span<const float> mine, std::span<float> all,
                          const GatherLayout& layout) const;
  // The device staging buffer, at least count floats (grown after a synchronize).
  float* staging(size_t count);
  // Copies host to the device (unless !upload), queues enqueue(device copy), copies the result
  // back (unless !download) and waits for it with the watchdog.
  void staged(std::span<float> host, const char* what, bool upload, bool download,
              FunctionRef<void(float*)> enqueue);
  // Uploads `host` through a pinned buffer, queues enqueue(device copy) and the copy back; the
  // Work then copies out.size() floats from `offset` of the result into `out` (from `layout` to
  // the caller's when it is not in place) and finishes them (finish(op, size, out, wire)).
  WorkPtr staged_async(std::span<const float> host, std::span<float> out, size_t offset,
                       ReduceOp op, WireFormat wire, double timeout_s, const GatherLayout& layout,
                       FunctionRef<void(float*)> enqueue);
  // Throws NcclError if NCCL reported an asynchronous error.
  void check_async(const char* what);
  // Waits until `event` completed: polls with the timeout (kDefaultTimeout: the default) and
  // checks for NCCL errors.
  void wait_event(cudaEvent_t event, const char* what, double timeout_s = kDefaultTimeout);
  // ncclCommAbort (unblocks kernels that wait for a dead peer); later calls throw.
  void abort_comm() noexcept;

  std::unique_ptr<Communicator> owned_control_;  // first: destroyed last
  Communicator* control_;
  NcclOptions options_;
  int rank_ = 0, size_ = 1, device_ = 0;
  std::vector<int> node_of_rank_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<PinnedPool> pinned_;
  cudaEvent_t done_ = nullptr;
  DeviceBuffer<float> data_, scratch_;
  DeviceBuffer<uint16_t> wire_out_, wire_in_;  // a step's segments in a 16-bit format
  DeviceBuffer<uint64_t> header_;
  std::unique_ptr<ScheduleCache> cache_;
  std::vector<float> host_scratch_;
  uint64_t bytes_sent_ = 0, bytes_recv_ = 0;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
};

}  // namespace syncopate::cuda
#endif  // SYNCOPATE_HAVE_NCCL
