#pragma once
// The Communicator contract, shared by every backend's tests (simulator actors, MPI processes).
//
// check_communicator_contract(comm) must be called collectively by every rank of `comm`. It runs
// every collective and algorithm on sizes not divisible by the rank count, with inputs that are
// small integers (so any summation order is exact and every result must equal a serial reduction
// bit for bit), plus non-integer inputs for the cross-rank bit-identity check. It never throws
// on a wrong result and never skips a collective (so ranks stay in step): it returns the failure
// messages of this rank, empty when the contract holds. No test framework inside. It checks
// the asynchronous allgather and reduce-scatter (tests/contract/async_contract.hpp) and ends
// with the error contract of core/comm/comm.hpp: misuse must raise the same typed errors on every
// backend (tests/contract/misuse_contract.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/comm/comm.hpp"
#include "core/comm/compression.hpp"
#include "tests/contract/async_contract.hpp"
#include "tests/contract/misuse_contract.hpp"
#include "tests/contract/recorder.hpp"

namespace syncopate::contract {

struct ContractOptions {
  // Allreduce algorithms to check (all by default).
  std::vector<Algorithm> algorithms{Algorithm::kAuto,         Algorithm::kRing,
                                    Algorithm::kRabenseifner, Algorithm::kRecursiveDoubling,
                                    Algorithm::kBinomialTree, Algorithm::kHierarchical,
                                    Algorithm::kMaster};
  bool check_shared_model = true;
  // Misuse must raise the contract's errors (tests/contract/misuse_contract.hpp).
  bool check_misuse = true;
};

namespace detail {

// Small integers in [-11, 11]: a sum over <= 1000 ranks stays exact in float.
inline float value(int rank, size_t i, int salt) {
  const int64_t v = (static_cast<int64_t>(rank + 1) * 7 + static_cast<int64_t>(i) * 13 + salt) % 23;
  return static_cast<float>(v - 11);
}

inline float reference(ReduceOp op, int p, size_t i, int salt) {
  double acc = value(0, i, salt);
  for (int r = 1; r < p; ++r) {
    const double v = value(r, i, salt);
    acc = op == ReduceOp::kMax ? std::max(acc, v) : acc + v;
  }
  const float result = static_cast<float>(acc);  // exact: a small integer
  return op == ReduceOp::kAvg ? result / static_cast<float>(p) : result;
}

inline std::string name(Algorithm a, ReduceOp op, size_t n) {
  return "allreduce(" + std::string(to_string(a)) + ", " + std::string(to_string(op)) +
         ", n=" + std::to_string(n) + ")";
}

inline std::vector<float> inputs(int rank, size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value(rank, i, salt);
  return v;
}

inline std::vector<float> expected(ReduceOp op, int p, size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = reference(op, p, i, salt);
  return v;
}

// Rank r merges (r + 1) + i / 8 in turn (barriers between turns) with the paper's rule 1/2,
// 1/2: each snapshot must be the serial chain's, bit for bit, whatever the placement, on every
// backend; each merge's bytes (more than one rank) are the placement's (master: the model up and
// back; migrating: the model fetched from the previous merger, none on rank 0, which holds the
// initial model).
inline void check_merges_in_rank_order(Communicator& comm, Recorder& rec,
                                       GlobalModelPlacement placement) {
  const size_t n = 5;
  const int p = comm.size(), me = comm.rank();
  std::vector<float> chain(n, 3.0f);
  const std::unique_ptr<SharedModel> global = comm.create_shared_model(chain, placement);
  const bool master = placement == GlobalModelPlacement::kMaster;
  const std::string tag = master ? " (master)" : " (migrating)";
  for (int turn = 0; turn < p; ++turn) {
    std::vector<float> local(n);
    for (size_t i = 0; i < n; ++i)
      local[i] = static_cast<float>(turn + 1) + static_cast<float>(i) / 8.0f;
    apply_merge_rule({}, chain, local);  // every rank follows the chain serially
    if (turn == me) {
      const CommCounters before = comm.counters();
      global->merge(local, {});
      const CommCounters after = comm.counters();
      rec.expect_equal("merge in rank order" + tag, local, chain);
      const uint64_t model = n * sizeof(float);
      const uint64_t sent = after.bytes_sent - before.bytes_sent;
      const uint64_t recv = after.bytes_recv - before.bytes_recv;
      // One rank: whether a backend counts the trip to its own master varies (not checked).
      rec.expect(p == 1 || sent == (master ? model : 0), "merge bytes sent" + tag,
                 std::to_string(sent));
      rec.expect(p == 1 || recv == (master || turn > 0 ? model : 0), "merge bytes recv" + tag,
                 std::to_string(recv));
    }
    comm.barrier();
  }
}

}  // namespace detail

inline std::vector<std::string> check_communicator_contract(Communicator& comm,
                                                            const ContractOptions& options = {}) {
  using detail::expected;
  using detail::inputs;
  const int p = comm.size();
  const int me = comm.rank();
  detail::Recorder rec(me);
  rec.expect(p >= 1 && me >= 0 && me < p, "rank/size",
             std::to_string(me) + " of " + std::to_string(p));
  rec.expect(comm.node() >= 0, "node", std::to_string(comm.node()));
  const size_t up = static_cast<size_t>(p);
  const std::vector<size_t> sizes{1, 7, 3 * up + 1};
  const std::vector<ReduceOp> ops{ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};
  int salt = 0;

  // Allreduce: every algorithm, op and size against the serial reduction, bit for bit.
  const CommCounters before = comm.counters();
  for (Algorithm algorithm : options.algorithms)
    for (ReduceOp op : ops)
      for (size_t n : sizes) {
        std::vector<float> data = inputs(me, n, ++salt);
        comm.allreduce(data, {.op = op, .algorithm = algorithm});
        rec.expect_equal(detail::name(algorithm, op, n), data, expected(op, p, n, salt));
      }
  {
    std::vector<float> empty;
    comm.allreduce(empty, {});
    rec.expect(empty.empty(), "allreduce(n=0)", "size changed");
  }
  const CommCounters after = comm.counters();
  rec.expect((p == 1) == (after.bytes_sent == before.bytes_sent), "counters.bytes_sent",
             std::to_string(before.bytes_sent) + " -> " + std::to_string(after.bytes_sent));
  rec.expect((p == 1) == (after.bytes_recv == before.bytes_recv), "counters.bytes_recv",
             std::to_string(before.bytes_recv) + " -> " + std::to_string(after.bytes_recv));

  // Several asynchronous allreduces in flight, waited in reverse order.
  {
    std::vector<std::vector<float>> data;
    std::vector<WorkPtr> works;
    const int first_salt = salt + 1;
    for (int k = 0; k < 3; ++k) {
      data.push_back(inputs(me, 5 + static_cast<size_t>(k) * up, ++salt));
      works.push_back(comm.allreduce_async(data.back(), {}));
    }
    for (int k = 2; k >= 0; --k) works[static_cast<size_t>(k)]->wait();
    for (int k = 0; k < 3; ++k)
      rec.expect_equal(
          "allreduce_async #" + std::to_string(k), data[static_cast<size_t>(k)],
          expected(ReduceOp::kSum, p, data[static_cast<size_t>(k)].size(), first_salt + k));
  }

  // Bit identity across ranks on non-integer data (sums then depend on the order).
  for (Algorithm algorithm : options.algorithms) {
    const size_t n = 2 * up + 3;
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i)
      data[i] = static_cast<float>(me + 1) / 3.0f + static_cast<float>(i) / 7.0f;
    comm.allreduce(data, {.op = ReduceOp::kAvg, .algorithm = algorithm});
    std::vector<float> all(n * up);
    comm.allgather(data, all, WireFormat::kFp32);
    for (int r = 0; r < p; ++r)
      rec.expect(n == 0 || std::memcmp(all.data() + static_cast<size_t>(r) * n, data.data(),
                                       n * sizeof(float)) == 0,
                 "allreduce(" + std::string(to_string(algorithm)) + ", avg) bit identity",
                 "rank " + std::to_string(r) + " differs");
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
      double mean = 0;
      for (int r = 0; r < p; ++r) mean += (r + 1) / 3.0 + static_cast<double>(i) / 7.0;
      mean /= p;
      worst = std::max(worst, std::abs(data[i] - mean) / std::max(1.0, std::abs(mean)));
    }
    rec.expect(worst < 1e-5, "allreduce(" + std::string(to_string(algorithm)) + ", avg) value",
               "relative error " + std::to_string(worst));
  }

  // Broadcast from several roots.
  for (int root : {0, p - 1, p / 2})
    for (size_t n : {size_t{5}, 3 * up + 1}) {
      const int s = ++salt;
      std::vector<float> data = me == root ? inputs(root, n, s) : std::vector<float>(n, -99.0f);
      comm.broadcast(data, root);
      rec.expect_equal("broadcast(root=" + std::to_string(root) + ", n=" + std::to_string(n) + ")",
                       data, inputs(root, n, s));
    }

  // Reduce: the result on the root only.
  for (int root : {0, p - 1})
    for (ReduceOp op : ops) {
      const size_t n = 2 * up + 1;
      std::vector<float> data = inputs(me, n, ++salt);
      comm.reduce(data, root, op);
      if (me == root)
        rec.expect_equal(
            "reduce(root=" + std::to_string(root) + ", " + std::string(to_string(op)) + ")", data,
            expected(op, p, n, salt));
    }

  // Allgather: rank r contributes block_of(n, p, r), holding the values of its owner.
  for (size_t n : {size_t{1}, 2 * up + 3}) {
    const int s = ++salt;
    const BlockRange mine = block_of(n, p, me);
    std::vector<float> contribution(mine.count);
    for (size_t i = 0; i < mine.count; ++i) contribution[i] = detail::value(me, mine.offset + i, s);
    std::vector<float> all(n, -99.0f);
    comm.allgather(contribution, all, WireFormat::kFp32);
    std::vector<float> want(n);
    for (int r = 0; r < p; ++r) {
      const BlockRange b = block_of(n, p, r);
      for (size_t i = 0; i < b.count; ++i) want[b.offset + i] = detail::value(r, b.offset + i, s);
    }
    rec.expect_equal("allgather(n=" + std::to_string(n) + ")", all, want);
  }

  // Reduce-scatter: rank r gets block_of(n, p, r) of the reduction.
  for (ReduceOp op : ops)
    for (size_t n : {size_t{5}, 3 * up + 2}) {
      const std::vector<float> in = inputs(me, n, ++salt);
      const BlockRange mine = block_of(n, p, me);
      std::vector<float> out(mine.count, -99.0f);
      comm.reduce_scatter(in, out, op, WireFormat::kFp32);
      const std::vector<float> full = expected(op, p, n, salt);
      rec.expect_equal(
          "reduce_scatter(" + std::string(to_string(op)) + ", n=" + std::to_string(n) + ")", out,
          std::span<const float>(full).subspan(mine.offset, mine.count));
    }

  // In a 16-bit wire format every block of an allgather arrives rounded to it, this rank's own
  // too; a reduce-scatter of small integers stays exact (every partial sum is representable).
  // One rank sends nothing and rounds nothing.
  for (WireFormat wire : {WireFormat::kFp16, WireFormat::kBf16}) {
    const size_t n = 2 * up + 3;
    const int s = ++salt;
    const BlockRange mine = block_of(n, p, me);
    const auto sent = [&](int r, size_t i) {
      const float v = detail::value(r, i, s) + 0.1f;  // 0.1 is not representable in either
      return p == 1 ? v : round_to_wire(v, wire);
    };
    std::vector<float> contribution(mine.count);
    for (size_t i = 0; i < mine.count; ++i)
      contribution[i] = detail::value(me, mine.offset + i, s) + 0.1f;
    std::vector<float> all(n, -99.0f), want(n);
    comm.allgather(contribution, all, wire);
    for (int r = 0; r < p; ++r) {
      const BlockRange b = block_of(n, p, r);
      for (size_t i = 0; i < b.count; ++i) want[b.offset + i] = sent(r, b.offset + i);
    }
    rec.expect_equal("allgather(" + std::string(to_string(wire)) + ")", all, want);
    const std::vector<float> in = inputs(me, n, ++salt);
    std::vector<float> out(mine.count, -99.0f);
    comm.reduce_scatter(in, out, ReduceOp::kSum, wire);
    const std::vector<float> full = expected(ReduceOp::kSum, p, n, salt);
    rec.expect_equal("reduce_scatter(sum, " + std::string(to_string(wire)) + ")", out,
                     std::span<const float>(full).subspan(mine.offset, mine.count));
  }

  detail::check_async_collectives(comm, rec);
  comm.barrier();
  comm.barrier();

  // Point to point: even ranks send first, odd ranks receive first (no cycle of blocked sends).
  if (p >= 2) {
    const int next = (me + 1) % p, prev = (me + p - 1) % p;
    const std::vector<float> mine = inputs(me, 9, ++salt);
    std::vector<float> got(9, -99.0f);
    if (me % 2 == 0) {
      comm.send(mine, next);
      comm.recv(got, prev);
    } else {
      comm.recv(got, prev);
      comm.send(mine, next);
    }
    rec.expect_equal("send/recv from " + std::to_string(prev), got, inputs(prev, 9, salt));
  }

  // Split by parity, ranked in reverse order; a collective inside each half.
  {
    std::unique_ptr<Communicator> half = comm.split(me % 2, p - me);
    int members = 0, position = 0;
    for (int r = 0; r < p; ++r)
      if (r % 2 == me % 2) {
        ++members;
        if (r > me) ++position;
      }
    rec.expect(half->size() == members && half->rank() == position, "split(parity) rank/size",
               std::to_string(half->rank()) + "/" + std::to_string(half->size()) + ", expected " +
                   std::to_string(position) + "/" + std::to_string(members));
    rec.expect(half->node() == comm.node(), "split(parity) node", std::to_string(half->node()));
    std::vector<float> data{static_cast<float>(me + 1)};
    half->allreduce(data);
    float want = 0;
    for (int r = me % 2; r < p; r += 2) want += static_cast<float>(r + 1);
    rec.expect_equal("split(parity) allreduce", data, std::vector<float>{want});
    half->barrier();
  }

  // Shared model, for both placements: exclusive read-modify-write. Adding (rank + 1) from
  // every rank, in any order, must lose no update; each snapshot includes the caller's own
  // addition. Then merges in rank order follow the rule bit for bit, as computed serially.
  for (const GlobalModelPlacement placement :
       {GlobalModelPlacement::kMaster, GlobalModelPlacement::kMigrating}) {
    if (!options.check_shared_model) break;
    const size_t n = 6;
    std::vector<float> initial(n);
    for (size_t i = 0; i < n; ++i) initial[i] = static_cast<float>(i);
    const std::unique_ptr<SharedModel> global = comm.create_shared_model(initial, placement);
    rec.expect(global->size() == n, "shared model size", std::to_string(global->size()));
    const float total = static_cast<float>(p) * static_cast<float>(p + 1) / 2;
    std::vector<float> local(n, static_cast<float>(me + 1));
    global->merge(local, {.global_weight = 1.0f, .local_weight = 1.0f});
    for (size_t i = 0; i < n; ++i) {
      const float added = local[i] - initial[i];
      rec.expect(added >= static_cast<float>(me + 1) && added <= total, "shared model snapshot",
                 std::string("[")
                     .append(std::to_string(i))
                     .append("] added ")
                     .append(std::to_string(added)));
    }
    comm.barrier();
    std::vector<float> snapshot(n, 0.0f);
    global->merge(snapshot, {.global_weight = 1.0f, .local_weight = 0.0f});
    std::vector<float> want(n);
    for (size_t i = 0; i < n; ++i) want[i] = initial[i] + total;
    rec.expect_equal("shared model final", snapshot, want);
    comm.barrier();
    detail::check_merges_in_rank_order(comm, rec, placement);
  }

  if (options.check_misuse) check_misuse(comm, rec, options.check_shared_model);
  return rec.take();
}

}  // namespace syncopate::contract
