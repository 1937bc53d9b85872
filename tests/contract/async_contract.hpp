#pragma once
// The Communicator contract of the asynchronous allgather and reduce-scatter: on non-integer
// data (sums then depend on the order), each result equals the blocking call's bit for bit and
// moves the same bytes, with several in flight at once (an allreduce_async among them), their
// inputs overwritten right after the call, waited in reverse order. Called collectively by
// check_communicator_contract.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm/comm.hpp"
#include "tests/contract/recorder.hpp"

namespace syncopate::contract::detail {

// What one rank sends and gets in the async check.
struct AsyncCase {
  std::vector<float> in;            // reduce-scatter input (and the allreduce's)
  std::vector<float> contribution;  // allgather: this rank's block
  std::vector<float> sum, avg;      // reduce-scatter outputs
  std::vector<float> all;           // allgather output
  std::vector<float> reduced;       // allreduce
};

inline AsyncCase async_case(int me, int p) {
  const size_t n = 3 * static_cast<size_t>(p) + 2;
  const BlockRange mine = block_of(n, p, me);
  AsyncCase c;
  for (size_t i = 0; i < n; ++i)
    c.in.push_back(static_cast<float>(me + 1) / 3.0f + static_cast<float>(i) / 7.0f);
  for (size_t i = 0; i < mine.count; ++i)
    c.contribution.push_back(static_cast<float>(me + 2) / 9.0f + static_cast<float>(i) / 5.0f);
  c.sum.assign(mine.count, -99.0f);
  c.avg.assign(mine.count, -99.0f);
  c.all.assign(n, -99.0f);
  c.reduced = c.in;
  return c;
}

inline uint64_t traffic(const CommCounters& before, const CommCounters& after) {
  return (after.bytes_sent - before.bytes_sent) + (after.bytes_recv - before.bytes_recv);
}

inline void check_async_collectives(Communicator& comm, Recorder& rec) {
  const int p = comm.size(), me = comm.rank();
  AsyncCase blocking = async_case(me, p);
  const CommCounters start = comm.counters();
  comm.reduce_scatter(blocking.in, blocking.sum, ReduceOp::kSum, WireFormat::kFp32);
  comm.allgather(blocking.contribution, blocking.all, WireFormat::kFp32);
  comm.allreduce(blocking.reduced, {});
  comm.reduce_scatter(blocking.in, blocking.avg, ReduceOp::kAvg, WireFormat::kFp32);
  const CommCounters middle = comm.counters();

  AsyncCase async = async_case(me, p);
  std::vector<float> in = async.in, contribution = async.contribution;
  std::vector<WorkPtr> works;
  works.push_back(comm.reduce_scatter_async(in, async.sum, ReduceOp::kSum, WireFormat::kFp32));
  works.push_back(comm.allgather_async(contribution, async.all, WireFormat::kFp32));
  std::fill(contribution.begin(), contribution.end(), 1e30f);  // read by the call already
  works.push_back(comm.allreduce_async(async.reduced, {}));
  works.push_back(comm.reduce_scatter_async(in, async.avg, ReduceOp::kAvg, WireFormat::kFp32));
  std::fill(in.begin(), in.end(), 1e30f);
  for (size_t k = works.size(); k-- > 0;) works[k]->wait();
  const CommCounters end = comm.counters();

  rec.expect_equal("reduce_scatter_async(sum) = reduce_scatter", async.sum, blocking.sum);
  rec.expect_equal("reduce_scatter_async(avg) = reduce_scatter", async.avg, blocking.avg);
  rec.expect_equal("allgather_async = allgather", async.all, blocking.all);
  rec.expect_equal("allreduce_async among them = allreduce", async.reduced, blocking.reduced);
  rec.expect(traffic(start, middle) == traffic(middle, end), "async collectives' bytes",
             std::to_string(traffic(middle, end)) + ", blocking " +
                 std::to_string(traffic(start, middle)));
  // The reduce-scatter's block is the sum of every rank's inputs (up to rounding).
  const BlockRange mine = block_of(blocking.in.size(), p, me);
  for (size_t i = 0; i < mine.count; ++i) {
    double want = 0;
    for (int r = 0; r < p; ++r) want += (r + 1) / 3.0 + static_cast<double>(mine.offset + i) / 7.0;
    rec.expect(std::abs(async.sum[i] - want) <= 1e-5 * std::max(1.0, std::abs(want)),
               "reduce_scatter_async value", std::to_string(async.sum[i]));
  }
}

}  // namespace syncopate::contract::detail
