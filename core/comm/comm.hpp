#pragma once
// The two interfaces the training core targets. Strategies and the Trainer only ever see these;
// each backend (simulated, MPI, in-process) implements them, and one contract suite tests them.
//
// Data is always float, one span per call. In the simulator's cost-only mode the spans point at
// scratch memory whose contents are meaningless and the backend moves no data, only time.
//
// The error contract, the same on every backend (the contract suite checks it):
//   - UserError (core/base/check.hpp): the caller misused the interface. Raised on the calling
//     rank, before it communicates, for a root or peer out of range, a send or recv to itself,
//     spans whose sizes break a collective's rule (allgather, reduce_scatter), a shared-model
//     merge of the wrong size; raised by the receiver for a recv whose size differs from the
//     matching send (the send completes normally); raised on the members that see it for
//     collectives issued differently by the members (kind, size, root, op), which leaves that
//     communicator unusable (only destroy it). The message names the operation, the rank and
//     what is allowed.
//   - PeerFailure (below): the operation could not complete because of another rank or the
//     transport: a peer died or hangs (PeerTimeout, after the timeout), the network library
//     reported an error. The communicator is unusable afterwards.
//   - InternalError (SYNC_CHECK): an invariant of Syncopate itself broke; a bug.
// No backend swallows an error: an error raised while an asynchronous operation ran is
// rethrown by its Work::wait().
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "core/base/check.hpp"
#include "core/base/function_ref.hpp"
#include "core/comm/compression.hpp"
#include "core/nn/cost.hpp"

namespace syncopate {

enum class ReduceOp { kSum, kAvg, kMax };

enum class Algorithm {
  kAuto,
  kRing,
  kRabenseifner,  // reduce-scatter by recursive halving + allgather by recursive doubling
  kRecursiveDoubling,
  kBinomialTree,  // binomial-tree reduce to rank 0, then binomial-tree broadcast
  kHierarchical,  // inside each node, then across nodes, then inside each node
  kMaster,        // every rank to one master, reduced there, sent back (the paper's runtime)
};

std::string_view to_string(ReduceOp op);
std::string_view to_string(Algorithm algorithm);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);
std::optional<Algorithm> parse_algorithm(std::string_view name);

// The communication could not complete because of a peer or the transport (see the contract).
class PeerFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A blocking wait lasted longer than its timeout: a peer died or hangs.
class PeerTimeout : public PeerFailure {
 public:
  using PeerFailure::PeerFailure;
};

// timeout_s of CollectiveOptions and Communicator::set_default_timeout.
inline constexpr double kDefaultTimeout = -1;  // the communicator's default
inline constexpr double kNoTimeout = 0;        // wait forever

struct CollectiveOptions {
  ReduceOp op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
  // Longest wait (seconds) for this call before it throws PeerTimeout; kDefaultTimeout: the
  // communicator's default_timeout(); kNoTimeout: none. Wall seconds on real backends; the
  // simulator has no timeouts (a hang there is reported as a deadlock as soon as it happens).
  double timeout_s = kDefaultTimeout;
  // What the allreduce sends: fp32, or fp16 / bf16 with the reduction in that format (see
  // core/comm/compression.hpp): 2 bytes per element on the wire, in the counters and in time.
  WireFormat wire = WireFormat::kFp32;
};

// What a reduce_scatter or allgather sends, and how. A WireFormat converts to it (the common
// call: `comm.allgather(mine, all, WireFormat::kFp32)`).
struct GatherOptions {
  GatherOptions(WireFormat wire_format = WireFormat::kFp32,  // NOLINT(google-explicit-constructor)
                Algorithm requested = Algorithm::kAuto)
      : wire(wire_format), algorithm(requested) {}
  // What travels: in fp16 or bf16 every block, this rank's own too, arrives rounded to it, and a
  // reduction runs in that format (core/comm/compression.hpp).
  WireFormat wire;
  // kAuto or kHierarchical: where the members span nodes of equal size, numbered node by node, a
  // ring inside every node and one across nodes per local index (GatherLayout in
  // core/comm/collective_schedule.hpp); otherwise, and for any other algorithm, the ring.
  Algorithm algorithm;
};

// Handle of an asynchronous operation. wait() blocks until it completes and rethrows any error
// raised while it ran. Destroying a Work that was not waited for waits for it.
class Work {
 public:
  // What the backend can tell of a completed operation (for the in-flight accounting and the
  // trace): seconds from the call that started it to its completion (negative: unknown; the
  // end of wait() then bounds it) and the algorithm it ran (kAuto: unknown).
  struct Completion {
    double elapsed_s = -1;
    Algorithm algorithm = Algorithm::kAuto;
  };
  virtual ~Work() = default;
  virtual void wait() = 0;
  // Valid after wait() returned.
  virtual Completion completion() const { return {}; }
};
using WorkPtr = std::unique_ptr<Work>;

// A Work that is already complete (for backends whose operation finished in the call).
class CompletedWork final : public Work {
 public:
  CompletedWork() = default;
  explicit CompletedWork(Completion completion) : completion_(completion) {}
  void wait() override {}
  Completion completion() const override { return completion_; }

 private:
  Completion completion_;
};

// The exclusive merge of epoch_async: global = global_weight*global + local_weight*local.
struct MergeRule {
  float global_weight = 0.5f;
  float local_weight = 0.5f;
};

// Where the shared global model lives (strategy.global_model). kMaster: on one owner, the
// platform's master host (simulator) or rank 0's window (MPI); each merge sends the local model
// there and the merged model back. kMigrating: the paper's runtime moving data to where a task
// runs: each merge runs on the merging worker, which fetches the global model from the worker
// that merged last (nothing to fetch when that is itself) and then holds it. The arithmetic is
// the same in both; only where the model sits, and so the transfers, differ.
enum class GlobalModelPlacement { kMaster, kMigrating };

// The shared global model of epoch_async, made by Communicator::create_shared_model. merge() is
// not collective: it runs under mutual exclusion, in arrival order, global = rule(global, local),
// then copies the new global into `local` (the worker's snapshot). local.size() must be the size
// of the initial model (else UserError). Must not outlive the communicator that made it; the
// destructor is collective (every member destroys its handle).
class SharedModel {
 public:
  virtual ~SharedModel() = default;
  virtual size_t size() const = 0;
  virtual void merge(std::span<float> local, const MergeRule& rule) = 0;
};

// The contract's UserError for a merge of `local` floats into a shared model of `global` floats
// on `rank` (`backend` names the backend in the message); nothing when the sizes agree.
void check_merge_size(size_t local, size_t global, const char* backend, int rank);

// global = global_weight*global + local_weight*local, element by element, written as one fma so
// that every backend rounds it identically.
void apply_merge_rule(const MergeRule& rule, std::span<float> global, std::span<const float> local);

// Bytes this worker put on / took off the network since creation (not counting self-copies).
struct CommCounters {
  uint64_t bytes_sent = 0;
  uint64_t bytes_recv = 0;
};

// The block of an n-element buffer that rank i owns in reduce_scatter/allgather: blocks are as
// even as possible, the first n % p ranks get one extra element.
struct BlockRange {
  size_t offset = 0;
  size_t count = 0;
};
constexpr BlockRange block_of(size_t n, int p, int i) {
  const size_t base = n / static_cast<size_t>(p), extra = n % static_cast<size_t>(p);
  const size_t ui = static_cast<size_t>(i);
  return {ui * base + (ui < extra ? ui : extra), base + (ui < extra ? 1 : 0)};
}

// One per worker. Collectives are over all workers of this communicator (or of a split group)
// and every member must call them in the same order. All reductions are deterministic: the same
// inputs give bit-identical outputs on every rank and every run.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The node (shared-memory / NVLink domain) this worker sits in; 0..num_nodes-1.
  virtual int node() const = 0;

  virtual WorkPtr allreduce_async(std::span<float> data, const CollectiveOptions& options) = 0;
  void allreduce(std::span<float> data, const CollectiveOptions& options = {}) {
    allreduce_waited(data, options);
  }
  // What allreduce() runs: allreduce_async() waited for at once, ordered with the asynchronous
  // collectives in flight and bit-identical to them. A backend overrides it where a call that
  // is waited for at once can skip the asynchronous machinery (MPI: its helper thread's
  // hand-off). Returns the algorithm that ran (kAuto: not known).
  virtual Algorithm allreduce_waited(std::span<float> data, const CollectiveOptions& options) {
    WorkPtr work = allreduce_async(data, options);
    work->wait();
    return work->completion().algorithm;
  }
  virtual void broadcast(std::span<float> data, int root) = 0;
  // Result on root only; other ranks' buffers are left unspecified.
  virtual void reduce(std::span<float> data, int root, ReduceOp op) = 0;
  // mine.size() == block_of(all.size(), size(), rank()).count; `all` receives every block. In
  // fp16 or bf16 (GatherOptions::wire) every block arrives rounded to it, this rank's own too,
  // so that every member holds the same `all`.
  virtual void allgather(std::span<const float> mine, std::span<float> all,
                         const GatherOptions& options) = 0;
  // out.size() == block_of(in.size(), size(), rank()).count; out receives the reduced block.
  // In fp16 or bf16 the reduction runs in that format, as an allreduce's does
  // (core/comm/compression.hpp).
  virtual void reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                              const GatherOptions& options) = 0;
  // The same two, asynchronous: they return at once (misuse is still a UserError of the call)
  // and complete in wait(), with the blocking calls' result bit for bit. `mine` and `in` are
  // read by the call (they may change afterwards); `all` and `out` belong to the operation until
  // wait() returns. They are ordered with this communicator's other asynchronous collectives
  // (allreduce_async) in issue order. By default (a backend with no overlap to offer) they run
  // the blocking call and return a completed Work.
  virtual WorkPtr allgather_async(std::span<const float> mine, std::span<float> all,
                                  const GatherOptions& options) {
    allgather(mine, all, options);
    return std::make_unique<CompletedWork>();
  }
  virtual WorkPtr reduce_scatter_async(std::span<const float> in, std::span<float> out, ReduceOp op,
                                       const GatherOptions& options) {
    reduce_scatter(in, out, op, options);
    return std::make_unique<CompletedWork>();
  }
  virtual void barrier() = 0;
  virtual void send(std::span<const float> data, int peer) = 0;
  virtual void recv(std::span<float> data, int peer) = 0;
  // Collective: members with the same color form a group, ranked by (key, old rank). The group
  // starts with this communicator's default timeout.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Collective: the shared model of epoch_async (see SharedModel), starting from `initial`,
  // which every member passes with the same size (else UserError on every member), placed as
  // `placement` says (every member passes the same).
  virtual std::unique_ptr<SharedModel> create_shared_model(std::span<const float> initial,
                                                           GlobalModelPlacement placement) = 0;

  virtual CommCounters counters() const = 0;

  // The timeout of every call that has no CollectiveOptions, and of those whose timeout_s is
  // kDefaultTimeout (seconds; kNoTimeout: none). Set once, from the scenario or the command
  // line; a backend starts from its own default (MPI: SYNCOPATE_MPI_WATCHDOG_S, else 600 s).
  virtual void set_default_timeout(double seconds) = 0;
  virtual double default_timeout() const = 0;
  // options.timeout_s, or default_timeout() for kDefaultTimeout.
  double timeout_of(const CollectiveOptions& options) const {
    return options.timeout_s == kDefaultTimeout ? default_timeout() : options.timeout_s;
  }
};

// Where math runs and what time it is.
class Executor {
 public:
  virtual ~Executor() = default;
  // Simulated seconds (simulator) or wall seconds since the run began (real backends).
  virtual double now() const = 0;
  // Accounts `cost` and runs `math` unless cost_only(): the simulator advances this worker's
  // clock by the modelled time of `cost`; a real backend runs and measures.
  virtual void compute(const Cost& cost, FunctionRef<void()> math) = 0;
  // True when tensors are shape-only and no arithmetic happens (simulated time only).
  virtual bool cost_only() const { return false; }
  // A training step begins (called outside any compute(), before its first layer pass): the
  // simulator advances this worker's clock by the step's fixed cost outside the layer passes
  // (the batch copy, bookkeeping: the profile's step overhead), which a measured run spends
  // between its timed passes and so counts as idle. Real backends spend it and do nothing here.
  virtual void begin_step() {}

  // Steady-state fast-forward (simulator, cost-only). Every worker calls all_agree() at the same
  // point with its own vote; it returns true iff every worker voted yes and takes no simulated
  // time. advance() then moves this worker's clock forward by `seconds` of skipped, identical
  // steps. Real backends never fast-forward.
  virtual bool all_agree(bool /*vote*/) { return false; }
  virtual void advance(double /*seconds*/) {}

  // Checkpoints (core/train/checkpoint.hpp): the clock and whatever else this executor counts,
  // as numbers; restore_clock() makes now() continue from a saved state (simulator: the worker
  // sleeps to the saved time; real backends: their wall clock is offset to continue from it).
  virtual std::vector<double> clock_state() const { return {now()}; }
  virtual void restore_clock(std::span<const double> /*state*/) {}
};

}  // namespace syncopate
