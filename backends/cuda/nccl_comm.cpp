// NcclCommunicator: the core's schedules as NCCL send/recv rounds, NCCL's own collectives, staging.
#include "backends/cuda/nccl_comm.hpp"

#if defined(SYNCOPATE_HAVE_NCCL)
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "backends/cuda/kernels.hpp"
#include "backends/cuda/nccl_placement.hpp"
#include "core/base/check.hpp"

namespace syncopate::cuda {
namespace {

void check_nccl(ncclResult_t result, const char* file, int line, const char* expr) {
  if (result == ncclSuccess) return;
  std::ostringstream message;
  message << file << ":" << line << ": " << expr << ": " << ncclGetErrorString(result);
  throw NcclError(message.str());
}

#define SYNC_NCCL_CHECK(expr) check_nccl((expr), __FILE__, __LINE__, #expr)

// Sum and avg are sums (avg divides afterwards, in finish()); max is NCCL's max, which agrees
// with the commutative max except on NaN payloads and signed zeros (native mode only).
ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kMax ? ncclMax : ncclSum; }

// The NCCL unique id travels through the control communicator as one float per byte: integers
// 0..255 are exact in float and survive any copy or transport.
ncclUniqueId bootstrap_id(Communicator& control) {
  ncclUniqueId id{};
  std::vector<float> bytes(sizeof(id.internal));
  if (control.rank() == 0) {
    SYNC_NCCL_CHECK(ncclGetUniqueId(&id));
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<float>(static_cast<unsigned char>(id.internal[i]));
  }
  control.broadcast(bytes, 0);
  for (size_t i = 0; i < bytes.size(); ++i)
    id.internal[i] = static_cast<char>(static_cast<unsigned char>(bytes[i]));
  return id;
}

// Every rank's PCI location, through the control communicator (each field is exact in a float).
std::vector<PciLocation> gather_gpus(Communicator& control, int device, bool has_device) {
  PciLocation mine;
  if (has_device) {
    SYNC_CUDA_CHECK(cudaDeviceGetAttribute(&mine.domain, cudaDevAttrPciDomainId, device));
    SYNC_CUDA_CHECK(cudaDeviceGetAttribute(&mine.bus, cudaDevAttrPciBusId, device));
    SYNC_CUDA_CHECK(cudaDeviceGetAttribute(&mine.device, cudaDevAttrPciDeviceId, device));
  }
  const std::array<float, 3> packed{static_cast<float>(mine.domain), static_cast<float>(mine.bus),
                                    static_cast<float>(mine.device)};
  std::vector<float> all(packed.size() * static_cast<size_t>(control.size()));
  control.allgather(packed, all, WireFormat::kFp32);
  std::vector<PciLocation> gpus(static_cast<size_t>(control.size()));
  for (size_t r = 0; r < gpus.size(); ++r)
    gpus[r] = {static_cast<int>(all[3 * r]), static_cast<int>(all[3 * r + 1]),
               static_cast<int>(all[3 * r + 2])};
  return gpus;
}

bool overlaps(Segment a, Segment b) {
  return a.offset < b.offset + b.count && b.offset < a.offset + a.count;
}

bool is_bf16(WireFormat wire) { return wire == WireFormat::kBf16; }

// NCCL's type of an element on the wire (16-bit formats only move bits in send and recv).
ncclDataType_t nccl_type(WireFormat wire) {
  switch (wire) {
    case WireFormat::kFp32:
      return ncclFloat32;
    case WireFormat::kFp16:
      return ncclFloat16;
    case WireFormat::kBf16:
      return ncclBfloat16;
  }
  throw InternalError("unknown wire format");
}

WireAction wire_action(RecvAction action, ReduceOp op) {
  if (action == RecvAction::kCopy) return WireAction::kCopy;
  return op == ReduceOp::kMax ? WireAction::kMax : WireAction::kAdd;
}

}  // namespace

// ---- pinned host staging ---------------------------------------------------------------------

// Page-locked host buffers, reused: cudaMemcpyAsync from and to them is truly asynchronous
// (pageable copies would block the host, outside the watchdog, behind a hung collective).
class PinnedPool {
 public:
  struct Buffer {
    float* data = nullptr;
    size_t capacity = 0;
  };
  PinnedPool() = default;
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;
  ~PinnedPool() {
    for (const Buffer& b : free_) static_cast<void>(cudaFreeHost(b.data));
  }
  // The smallest free buffer of at least count floats, or a new one.
  Buffer take(size_t count) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->capacity >= count && (best == free_.end() || it->capacity < best->capacity))
        best = it;
    if (best != free_.end()) {
      const Buffer b = *best;
      free_.erase(best);
      return b;
    }
    Buffer b;
    b.capacity = std::max<size_t>(count, 1024);
    void* pointer = nullptr;
    SYNC_CUDA_CHECK(cudaMallocHost(&pointer, b.capacity * sizeof(float)));
    b.data = static_cast<float*>(pointer);
    return b;
  }
  void give(Buffer b) { free_.push_back(b); }

 private:
  std::vector<Buffer> free_;
};

namespace {

// A pinned buffer borrowed for the length of one blocking call.
class Lease {
 public:
  Lease(PinnedPool& pool, size_t count) : pool_(pool), buffer_(pool.take(count)) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { pool_.give(buffer_); }
  float* data() const { return buffer_.data; }

 private:
  PinnedPool& pool_;
  PinnedPool::Buffer buffer_;
};

}  // namespace

// ---- asynchronous allreduce --------------------------------------------------------------

// Everything is queued on the communicator's stream; wait() polls the event recorded after the
// copy back into the pinned buffer, then copies the result (from `offset` of the buffer: a
// reduce-scatter's block; an allgather's blocks from `layout` to the caller's) into the caller's
// span and finishes.
class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator& comm, std::span<float> data, ReduceOp op, WireFormat wire,
           double timeout_s, PinnedPool::Buffer buffer, cudaEvent_t event, size_t offset,
           GatherLayout layout)
      : comm_(comm),
        data_(data),
        op_(op),
        wire_(wire),
        timeout_s_(timeout_s),
        buffer_(buffer),
        event_(event),
        offset_(offset),
        layout_(layout) {}
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;
  ~NcclWork() override {
    if (!waited_) {
      // Destroying an unwaited Work waits for it. A destructor cannot throw: report the error
      // (the communicator is unusable after it, so the next operation fails too).
      try {
        wait();
      } catch (const std::exception& e) {
        std::fprintf(stderr,
                     "syncopate nccl: error in a collective whose Work was never waited: %s\n",
                     e.what());
      }
    }
    release();
  }

  void wait() override {
    if (waited_) return;
    waited_ = true;
    comm_.set_device();
    comm_.wait_event(event_, "asynchronous collective", timeout_s_);
    if (layout_.in_place())
      std::memcpy(data_.data(), buffer_.data + offset_, data_.size_bytes());
    else
      layout_.to_caller(std::span<const float>(buffer_.data, data_.size()), data_);
    finish(op_, comm_.size(), data_, wire_);
    release();
  }

 private:
  void release() noexcept {
    if (event_ != nullptr) {
      static_cast<void>(cudaEventDestroy(event_));
      event_ = nullptr;
      comm_.pinned_->give(buffer_);
    }
  }

  NcclCommunicator& comm_;
  std::span<float> data_;
  ReduceOp op_;
  WireFormat wire_;
  double timeout_s_;
  PinnedPool::Buffer buffer_;
  cudaEvent_t event_;
  size_t offset_;
  GatherLayout layout_;
  bool waited_ = false;
};

// ---- NcclCommunicator --------------------------------------------------------------------

NcclCommunicator::NcclCommunicator(Communicator& control, NcclOptions options)
    : control_(&control), options_(options) {
  init(-1);
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> control, NcclOptions options,
                                   int device)
    : owned_control_(std::move(control)), control_(owned_control_.get()), options_(options) {
  SYNC_CHECK(control_ != nullptr, "null control communicator");
  init(device);
}

void NcclCommunicator::init(int device) {
  rank_ = control_->rank();
  size_ = control_->size();
  // Every rank's node (for the schedules) and machine (for the GPUs: nodes may be pretend ones).
  // A rank's device is its index among the ranks of its machine, modulo the devices it sees.
  constexpr size_t kPer = 5;  // the node, then the host id's four quarters
  std::array<float, kPer> mine{static_cast<float>(control_->node())};
  const std::array<float, 4> host = pack_host(this_host_id());
  std::copy(host.begin(), host.end(), mine.begin() + 1);
  std::vector<float> all(kPer * static_cast<size_t>(size_));
  control_->allgather(mine, all, WireFormat::kFp32);
  std::vector<uint64_t> host_of_rank(static_cast<size_t>(size_));
  node_of_rank_.resize(static_cast<size_t>(size_));
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    node_of_rank_[r] = static_cast<int>(all[kPer * r]);
    host_of_rank[r] = unpack_host(std::span<const float, 4>(all.data() + kPer * r + 1, 4));
  }
  const int devices = device_count();
  device_ = device >= 0 ? device : devices > 0 ? index_on_host(host_of_rank, rank_) % devices : 0;
  // Every rank sees every rank's GPU and reaches the same verdict, so all fail alike instead of
  // leaving the others blocked in the NCCL set-up.
  const std::vector<PciLocation> gpus = gather_gpus(*control_, device_, devices > 0);
  const std::string problem = placement_problem(node_of_rank_, host_of_rank, gpus);
  if (!problem.empty())
    throw UserError("NCCL needs one CUDA device per rank: " + problem +
                    "; allowed: at most as many ranks per machine as GPUs");
  set_device();
  stream_ = std::make_unique<Stream>();
  pinned_ = std::make_unique<PinnedPool>();
  SYNC_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  header_.resize(1);
  cache_ = std::make_unique<ScheduleCache>(node_of_rank_, CacheScope::kOneRank, rank_);
  const ncclUniqueId id = bootstrap_id(*control_);
  SYNC_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) {
    bool clean = std::uncaught_exceptions() == 0;
    if (clean) {
      try {
        synchronize("shutdown");
      } catch (const std::exception& e) {  // a destructor cannot throw: report, then abort
        std::fprintf(stderr, "syncopate nccl: %s; aborting the communicator\n", e.what());
        clean = false;
      }
    }
    if (clean)
      static_cast<void>(ncclCommDestroy(comm_));
    else
      abort_comm();
  }
  if (done_ != nullptr) static_cast<void>(cudaEventDestroy(done_));
}

void NcclCommunicator::set_device() const { SYNC_CUDA_CHECK(cudaSetDevice(device_)); }

void NcclCommunicator::check_open() const {
  if (aborted_)
    throw NcclError("NCCL communicator (rank " + std::to_string(rank_) + " of " +
                    std::to_string(size_) + ") was aborted after an earlier error");
}

void NcclCommunicator::abort_comm() noexcept {
  if (comm_ != nullptr) static_cast<void>(ncclCommAbort(comm_));
  comm_ = nullptr;
  aborted_ = true;
}

void NcclCommunicator::check_async(const char* what) {
  ncclResult_t state = ncclSuccess;
  SYNC_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
  if (state == ncclSuccess || state == ncclInProgress) return;
  abort_comm();
  throw NcclError(std::string("NCCL ") + what + " on rank " + std::to_string(rank_) + " of " +
                  std::to_string(size_) + ": " + ncclGetErrorString(state) +
                  "; the NCCL communicator was aborted");
}

void NcclCommunicator::wait_event(cudaEvent_t event, const char* what, double timeout_s) {
  check_open();
  if (timeout_s == kDefaultTimeout) timeout_s = options_.watchdog_seconds;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t polls = 0;; ++polls) {
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) SYNC_CUDA_CHECK(status);
    check_async(what);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_s > 0 && waited > timeout_s) {
      abort_comm();
      std::ostringstream message;
      message << "NCCL " << what << " on rank " << rank_ << " of " << size_
              << " did not complete within " << timeout_s
              << " s (timeout): a peer died or hangs; the NCCL communicator was aborted";
      throw PeerTimeout(message.str());
    }
    // Spin briefly (short collectives), then poll gently to leave the core to other work.
    if (polls < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclCommunicator::synchronize(const char* what) {
  set_device();
  check_open();
  SYNC_CUDA_CHECK(cudaEventRecord(done_, stream()));
  wait_event(done_, what);
}

float* NcclCommunicator::staging(size_t count) {
  if (count > data_.size()) {
    synchronize("staging");  // queued operations may still use the old buffer
    data_.resize(count);
  }
  return data_.data();
}

const std::vector<Step>& NcclCommunicator::steps_of(CollectiveKind kind, Algorithm algorithm,
                                                    size_t count, int root, WireFormat wire) {
  // Steps are read while they are queued (kernel arguments are copied): a cache that starts
  // afresh leaves nothing queued pointing into it.
  const CachedSchedule& entry = cache_->entry(cache_->key(kind, algorithm, count, root, wire));
  if (entry.max_recv > scratch_.size()) {
    synchronize("scratch");  // queued steps may still use the old scratch
    scratch_.resize(entry.max_recv);
  }
  return entry.steps;
}

void NcclCommunicator::check_rank(int rank, const char* operation, const char* what,
                                  bool self_allowed) const {
  if (rank >= 0 && rank < size_ && (self_allowed || rank != rank_)) return;
  throw UserError("nccl: " + std::string(operation) + ": " + what + " " + std::to_string(rank) +
                  " from rank " + std::to_string(rank_) + "; allowed: 0.." +
                  std::to_string(size_ - 1) + (self_allowed ? "" : " other than the caller"));
}

void NcclCommunicator::check_block(size_t got, size_t n, const char* operation,
                                   const char* what) const {
  const size_t want = block_of(n, size_, rank_).count;
  if (got != want)
    throw UserError("nccl: " + std::string(operation) + ": rank " + std::to_string(rank_) + " " +
                    what + " has " + std::to_string(got) + " floats of " + std::to_string(n) +
                    "; allowed: block_of(n, size(), rank()).count = " + std::to_string(want));
}

// One ncclGroup per step, so that its send and receive progress together; the step's reduction
// follows on the same stream, so it runs after the send read the data (the schedule's rule that
// sends see the buffer as it was before the round). A copy that does not overlap this step's
// send lands in place; everything else lands in scratch first. In a 16-bit format the send is
// encoded first and the receive lands encoded, then decoded into place (copy) or reduced.
// Zero-length messages are skipped on both sides (the schedules are symmetric: a peer's count
// is zero exactly when ours is).
void NcclCommunicator::enqueue_steps(const std::vector<Step>& steps, float* data, ReduceOp op,
                                     WireFormat wire) {
  const bool half = wire != WireFormat::kFp32;
  const uint64_t element = element_bytes(wire);
  for (const Step& step : steps) {
    const bool send = step.send_to >= 0 && step.send.count > 0;
    const bool recv = step.recv_from >= 0 && step.recv.count > 0;
    const bool direct =
        step.action == RecvAction::kCopy && !(send && recv && overlaps(step.send, step.recv));
    if (half && send)
      wire_encode(data + step.send.offset, wire_out_.data(), static_cast<int64_t>(step.send.count),
                  is_bf16(wire), stream());
    void* from = half ? static_cast<void*>(wire_out_.data()) : data + step.send.offset;
    void* target = half     ? static_cast<void*>(wire_in_.data())
                   : direct ? data + step.recv.offset
                            : scratch_.data();
    SYNC_NCCL_CHECK(ncclGroupStart());
    if (send)
      SYNC_NCCL_CHECK(
          ncclSend(from, step.send.count, nccl_type(wire), step.send_to, comm_, stream()));
    if (recv)
      SYNC_NCCL_CHECK(
          ncclRecv(target, step.recv.count, nccl_type(wire), step.recv_from, comm_, stream()));
    SYNC_NCCL_CHECK(ncclGroupEnd());
    if (recv && half) {
      wire_apply(data + step.recv.offset, wire_in_.data(), static_cast<int64_t>(step.recv.count),
                 wire_action(step.action, op), is_bf16(wire), stream());
    } else if (recv && !direct) {
      if (step.action == RecvAction::kCopy)
        copy_device_to_device(scratch_.data(), data + step.recv.offset, step.recv.count, stream());
      else
        collective_reduce(data + step.recv.offset, scratch_.data(),
                          static_cast<int64_t>(step.recv.count), op == ReduceOp::kMax, stream());
    }
    if (send && step.send_to != rank_) bytes_sent_ += step.send.count * element;
    if (recv && step.recv_from != rank_) bytes_recv_ += step.recv.count * element;
  }
}

void NcclCommunicator::enqueue_prepare(float* data, size_t count, ReduceOp op, WireFormat wire) {
  if (wire == WireFormat::kFp32 || size_ == 1 || count == 0) return;
  wire_prepare(data, op == ReduceOp::kAvg ? static_cast<float>(size_) : 1.0f,
               static_cast<int64_t>(count), is_bf16(wire), stream());
}

void NcclCommunicator::wire_room(size_t count) {
  if (count <= wire_out_.size()) return;
  synchronize("wire buffers");  // queued steps may still use the old ones
  wire_out_.resize(count);
  wire_in_.resize(count);
}

void NcclCommunicator::enqueue_allreduce(float* data, size_t count,
                                         const CollectiveOptions& options) {
  if (count == 0) return;
  const WireFormat wire = size_ > 1 ? options.wire : WireFormat::kFp32;
  if (wire != WireFormat::kFp32) wire_room(count);
  enqueue_prepare(data, count, options.op, wire);
  if (options_.native) {
    if (wire == WireFormat::kFp32) {
      SYNC_NCCL_CHECK(
          ncclAllReduce(data, data, count, ncclFloat32, nccl_op(options.op), comm_, stream()));
    } else {
      const auto n = static_cast<int64_t>(count);
      wire_encode(data, wire_out_.data(), n, is_bf16(wire), stream());
      SYNC_NCCL_CHECK(ncclAllReduce(wire_out_.data(), wire_out_.data(), count, nccl_type(wire),
                                    nccl_op(options.op), comm_, stream()));
      wire_apply(data, wire_out_.data(), n, WireAction::kCopy, is_bf16(wire), stream());
    }
    // NCCL picks its algorithm at run time; count what a ring moves (2 (p-1)/p of the data).
    const uint64_t ring = 2 * static_cast<uint64_t>(size_ - 1) * count * element_bytes(wire) /
                          static_cast<uint64_t>(size_);
    bytes_sent_ += ring;
    bytes_recv_ += ring;
    return;
  }
  enqueue_steps(steps_of(CollectiveKind::kAllreduce, options.algorithm, count, 0, wire), data,
                options.op, wire);
}

void NcclCommunicator::staged(std::span<float> host, const char* what, bool upload, bool download,
                              FunctionRef<void(float*)> enqueue) {
  set_device();
  check_open();
  if (host.empty()) return;
  const Lease pinned(*pinned_, host.size());
  float* device = staging(host.size());
  if (upload) {
    std::memcpy(pinned.data(), host.data(), host.size_bytes());
    SYNC_CUDA_CHECK(cudaMemcpyAsync(device, pinned.data(), host.size_bytes(),
                                    cudaMemcpyHostToDevice, stream()));
  }
  enqueue(device);
  if (download)
    SYNC_CUDA_CHECK(cudaMemcpyAsync(pinned.data(), device, host.size_bytes(),
                                    cudaMemcpyDeviceToHost, stream()));
  synchronize(what);
  if (download) std::memcpy(host.data(), pinned.data(), host.size_bytes());
}

WorkPtr NcclCommunicator::allreduce_async(std::span<float> data, const CollectiveOptions& options) {
  return staged_async(data, data, 0, options.op, options.wire, timeout_of(options), {},
                      [&](float* device) { enqueue_allreduce(device, data.size(), options); });
}

WorkPtr NcclCommunicator::staged_async(std::span<const float> host, std::span<float> out,
                                       size_t offset, ReduceOp op, WireFormat wire,
                                       double timeout_s, const GatherLayout& layout,
                                       FunctionRef<void(float*)> enqueue) {
  set_device();
  check_open();
  if (host.empty()) return std::make_unique<CompletedWork>();
  float* device = staging(host.size());
  const PinnedPool::Buffer buffer = pinned_->take(host.size());
  cudaEvent_t event = nullptr;
  try {
    std::memcpy(buffer.data, host.data(), host.size_bytes());
    SYNC_CUDA_CHECK(
        cudaMemcpyAsync(device, buffer.data, host.size_bytes(), cudaMemcpyHostToDevice, stream()));
    enqueue(device);
    SYNC_CUDA_CHECK(
        cudaMemcpyAsync(buffer.data, device, host.size_bytes(), cudaMemcpyDeviceToHost, stream()));
    SYNC_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    SYNC_CUDA_CHECK(cudaEventRecord(event, stream()));
  } catch (...) {
    if (event != nullptr) static_cast<void>(cudaEventDestroy(event));
    pinned_->give(buffer);
    throw;
  }
  return std::make_unique<NcclWork>(*this, out, op, wire, timeout_s, buffer, event, offset, layout);
}

// The contribution is rounded on the device (a 16-bit format delivers every block rounded, this
// rank's own too), then the schedule's copies. `all` is in the schedule's layout.
void NcclCommunicator::enqueue_allgather(float* all, size_t count, Algorithm algorithm,
                                         WireFormat wire) {
  if (wire != WireFormat::kFp32) wire_room(count);
  const Segment block = cache_->gather_layout(algorithm).block(count, rank_);
  enqueue_prepare(all + block.offset, block.count, ReduceOp::kSum, wire);
  enqueue_steps(steps_of(CollectiveKind::kAllgather, algorithm, count, 0, wire), all,
                ReduceOp::kSum, wire);
}

void NcclCommunicator::enqueue_reduce_scatter(float* in, size_t count, ReduceOp op,
                                              Algorithm algorithm, WireFormat wire) {
  if (wire != WireFormat::kFp32) wire_room(count);
  enqueue_prepare(in, count, op, wire);
  enqueue_steps(steps_of(CollectiveKind::kReduceScatter, algorithm, count, 0, wire), in, op, wire);
}

// This rank's contribution, moved into its block of `all` in the schedule's layout.
void NcclCommunicator::place_contribution(std::span<const float> mine, std::span<float> all,
                                          const GatherLayout& layout) const {
  check_block(mine.size(), all.size(), "allgather", "contribution");
  const Segment block = layout.block(all.size(), rank_);
  if (!mine.empty() && mine.data() != all.data() + block.offset)
    std::memmove(all.data() + block.offset, mine.data(), mine.size_bytes());
}

WorkPtr NcclCommunicator::allgather_async(std::span<const float> mine, std::span<float> all,
                                          const GatherOptions& options) {
  const GatherLayout layout = cache_->gather_layout(options.algorithm);
  place_contribution(mine, all, layout);
  return staged_async(all, all, 0, ReduceOp::kSum, options.wire, default_timeout(), layout,
                      [&](float* device) {
                        enqueue_allgather(device, all.size(), options.algorithm, options.wire);
                      });
}

// The input is permuted into host_scratch_, which staged_async copies before it returns.
WorkPtr NcclCommunicator::reduce_scatter_async(std::span<const float> in, std::span<float> out,
                                               ReduceOp op, const GatherOptions& options) {
  check_block(out.size(), in.size(), "reduce_scatter", "output");
  const GatherLayout layout = cache_->gather_layout(options.algorithm);
  layout.into_schedule(in, host_scratch_);
  return staged_async(host_scratch_, out, layout.block(in.size(), rank_).offset, op, options.wire,
                      default_timeout(), {}, [&](float* device) {
                        enqueue_reduce_scatter(device, in.size(), op, options.algorithm,
                                               options.wire);
                      });
}

void NcclCommunicator::broadcast(std::span<float> data, int root) {
  check_rank(root, "broadcast", "root", true);
  staged(data, "broadcast", rank_ == root, rank_ != root,
         [&](float* device) { broadcast_enqueue(device, data.size(), root); });
}

void NcclCommunicator::broadcast_enqueue(float* data, size_t count, int root) {
  SYNC_NCCL_CHECK(ncclBroadcast(data, data, count, ncclFloat32, root, comm_, stream()));
  const uint64_t bytes = count * sizeof(float);
  if (rank_ == root && size_ > 1) bytes_sent_ += bytes;
  if (rank_ != root) bytes_recv_ += bytes;
}

void NcclCommunicator::reduce(std::span<float> data, int root, ReduceOp op) {
  check_rank(root, "reduce", "root", true);
  staged(data, "reduce", true, rank_ == root, [&](float* device) {
    if (options_.native) {
      SYNC_NCCL_CHECK(
          ncclReduce(device, device, data.size(), ncclFloat32, nccl_op(op), root, comm_, stream()));
      const uint64_t bytes = data.size() * sizeof(float);
      if (rank_ != root) bytes_sent_ += bytes;
      if (rank_ == root) bytes_recv_ += bytes * static_cast<uint64_t>(size_ - 1);
    } else {
      enqueue_steps(steps_of(CollectiveKind::kReduce, Algorithm::kBinomialTree, data.size(), root),
                    device, op);
    }
  });
  if (rank_ == root) finish(op, size_, data);
}

void NcclCommunicator::allgather(std::span<const float> mine, std::span<float> all,
                                 const GatherOptions& options) {
  const GatherLayout layout = cache_->gather_layout(options.algorithm);
  place_contribution(mine, all, layout);
  staged(all, "allgather", true, true, [&](float* device) {
    enqueue_allgather(device, all.size(), options.algorithm, options.wire);
  });
  layout.back_to_caller(all, host_scratch_);
}

void NcclCommunicator::reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                                      const GatherOptions& options) {
  check_block(out.size(), in.size(), "reduce_scatter", "output");
  const GatherLayout layout = cache_->gather_layout(options.algorithm);
  layout.into_schedule(in, host_scratch_);
  staged(host_scratch_, "reduce_scatter", true, true, [&](float* device) {
    enqueue_reduce_scatter(device, in.size(), op, options.algorithm, options.wire);
  });
  const Segment block = layout.block(in.size(), rank_);
  const std::span<float> reduced(host_scratch_.data() + block.offset, block.count);
  finish(op, size_, reduced, options.wire);
  std::copy(reduced.begin(), reduced.end(), out.begin());
}

void NcclCommunicator::barrier() { control_->barrier(); }

// A message is its length (one uint64) followed by the data, so that recv() can check the size
// (NCCL cannot: a mismatch would hang or corrupt).
void NcclCommunicator::send(std::span<const float> data, int peer) {
  check_rank(peer, "send", "peer", false);
  set_device();
  check_open();
  const Lease pinned(*pinned_, std::max<size_t>(data.size(), 2));
  const uint64_t count = data.size();
  std::memcpy(pinned.data(), &count, sizeof(count));
  SYNC_CUDA_CHECK(cudaMemcpyAsync(header_.data(), pinned.data(), sizeof(count),
                                  cudaMemcpyHostToDevice, stream()));
  SYNC_NCCL_CHECK(ncclSend(header_.data(), 1, ncclUint64, peer, comm_, stream()));
  synchronize("send");  // the pinned buffer is reused for the data below
  if (data.empty()) return;
  float* device = staging(data.size());
  std::memcpy(pinned.data(), data.data(), data.size_bytes());
  SYNC_CUDA_CHECK(
      cudaMemcpyAsync(device, pinned.data(), data.size_bytes(), cudaMemcpyHostToDevice, stream()));
  SYNC_NCCL_CHECK(ncclSend(device, data.size(), ncclFloat32, peer, comm_, stream()));
  synchronize("send");
  bytes_sent_ += data.size_bytes();
}

void NcclCommunicator::recv(std::span<float> data, int peer) {
  check_rank(peer, "recv", "peer", false);
  set_device();
  check_open();
  const Lease pinned(*pinned_, std::max<size_t>(data.size(), 2));
  SYNC_NCCL_CHECK(ncclRecv(header_.data(), 1, ncclUint64, peer, comm_, stream()));
  SYNC_CUDA_CHECK(cudaMemcpyAsync(pinned.data(), header_.data(), sizeof(uint64_t),
                                  cudaMemcpyDeviceToHost, stream()));
  synchronize("recv");
  uint64_t count = 0;
  std::memcpy(&count, pinned.data(), sizeof(count));
  if (count != data.size()) {
    // Take the sender's data all the same (so that its send completes), then refuse it.
    if (count > 0) {
      SYNC_NCCL_CHECK(ncclRecv(staging(count), count, ncclFloat32, peer, comm_, stream()));
      synchronize("recv");
    }
    throw UserError("nccl: recv: rank " + std::to_string(rank_) + " expected " +
                    std::to_string(data.size()) + " floats from rank " + std::to_string(peer) +
                    " which sent " + std::to_string(count) +
                    "; allowed: send and recv of the same size");
  }
  if (data.empty()) return;
  float* device = staging(data.size());
  SYNC_NCCL_CHECK(ncclRecv(device, data.size(), ncclFloat32, peer, comm_, stream()));
  SYNC_CUDA_CHECK(
      cudaMemcpyAsync(pinned.data(), device, data.size_bytes(), cudaMemcpyDeviceToHost, stream()));
  synchronize("recv");
  std::memcpy(data.data(), pinned.data(), data.size_bytes());
  bytes_recv_ += data.size_bytes();
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  return std::make_unique<NcclCommunicator>(control_->split(color, key), options_, device_);
}

CommCounters NcclCommunicator::counters() const {
  const CommCounters control = control_->counters();
  return {control.bytes_sent + bytes_sent_, control.bytes_recv + bytes_recv_};
}

void NcclCommunicator::allreduce_device(float* data, size_t count,
                                        const CollectiveOptions& options) {
  set_device();
  check_open();
  enqueue_allreduce(data, count, options);
  // A 16-bit format divided before the schedule (enqueue_prepare), as core's finish() knows.
  if (options.op == ReduceOp::kAvg && count > 0 && options.wire == WireFormat::kFp32)
    divide(data, static_cast<float>(size_), static_cast<int64_t>(count), stream());
  synchronize("allreduce");
}

void NcclCommunicator::broadcast_device(float* data, size_t count, int root) {
  check_rank(root, "broadcast_device", "root", true);
  set_device();
  check_open();
  if (count > 0) broadcast_enqueue(data, count, root);
  synchronize("broadcast");
}

}  // namespace syncopate::cuda
#endif  // SYNCOPATE_HAVE_NCCL
