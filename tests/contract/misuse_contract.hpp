#pragma once
// The error contract (core/comm/comm.hpp) as contract-suite cases: misuse raises UserError on
// every backend alike, and the communicator stays usable after the caller's own misuse. Called
// collectively by check_communicator_contract; each case is misused the same way on every rank
// (or in matched pairs), so that no rank is left waiting for another.
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/check.hpp"
#include "core/comm/comm.hpp"
#include "tests/contract/recorder.hpp"

namespace syncopate::contract {
namespace detail {

enum class Expect { kUserError, kTypedFailure };  // kTypedFailure: UserError or PeerFailure

// Runs `call`, which must throw what `expect` says; records anything else (no error, another
// type) as a failure of this rank.
inline void expect_error(Recorder& rec, const std::string& what, Expect expect,
                         const std::function<void()>& call) {
  try {
    call();
    rec.expect(false, what, "returned normally; expected an error");
  } catch (const UserError&) {
  } catch (const PeerFailure& e) {
    rec.expect(expect == Expect::kTypedFailure, what,
               std::string("PeerFailure instead of UserError: ") + e.what());
  } catch (const std::exception& e) {
    rec.expect(false, what, std::string("untyped or internal error: ") + e.what());
  }
}

// Two ranks issue an allreduce of different sizes: every member must get a typed error (the
// group is unusable afterwards and destroyed). Ranks 0 and 1 form the group; the others a
// group of their own that does nothing.
inline void check_mismatched_collectives(Communicator& comm, Recorder& rec) {
  const int me = comm.rank();
  const std::unique_ptr<Communicator> pair = comm.split(me < 2 ? 0 : 1, me);
  if (me >= 2) return;
  std::vector<float> data(me == 0 ? 10 : 12, 1.0f);
  // A backend that cannot see the mismatch must still end the wait: 10 s, not the default.
  expect_error(rec, "allreduce of 10 vs 12 floats", Expect::kTypedFailure,
               [&] { pair->allreduce(data, {.algorithm = Algorithm::kRing, .timeout_s = 10}); });
}

// Sizes that break a collective's rule, roots and peers out of range, the caller as its own
// peer: detected before any message, on every rank; the communicator stays usable.
inline void check_local_misuse(Communicator& comm, Recorder& rec, bool shared_model) {
  const int p = comm.size(), me = comm.rank();
  std::vector<float> buffer(3 * static_cast<size_t>(p) + 2, 1.0f);
  const std::span<float> all(buffer);
  expect_error(rec, "allgather with one float too many", Expect::kUserError, [&] {
    std::vector<float> mine(block_of(all.size(), p, me).count + 1, 1.0f);
    comm.allgather(mine, all, WireFormat::kFp32);
  });
  expect_error(rec, "reduce_scatter into one float too few", Expect::kUserError, [&] {
    std::vector<float> out(block_of(all.size(), p, me).count - 1);  // 3p + 2 floats: count >= 3
    comm.reduce_scatter(all, out, ReduceOp::kSum, WireFormat::kFp32);
  });
  expect_error(rec, "broadcast from root size()", Expect::kUserError,
               [&] { comm.broadcast(all, p); });
  expect_error(rec, "reduce to root -1", Expect::kUserError,
               [&] { comm.reduce(all, -1, ReduceOp::kSum); });
  expect_error(rec, "send to self", Expect::kUserError, [&] { comm.send(all, me); });
  expect_error(rec, "recv from self", Expect::kUserError, [&] { comm.recv(all, me); });
  expect_error(rec, "send to rank size()", Expect::kUserError, [&] { comm.send(all, p); });
  if (shared_model) {
    const std::unique_ptr<SharedModel> model =
        comm.create_shared_model(all, GlobalModelPlacement::kMaster);
    expect_error(rec, "shared model merge of the wrong size", Expect::kUserError, [&] {
      std::vector<float> local(all.size() + 1);
      model->merge(local, {});
    });
  }
}

// Pairs (0,1), (2,3), ...: the even rank sends 5 then 3 floats, the odd one receives both
// into 4 floats: a UserError on the receiver each time, the sends complete, and a matched pair
// goes through afterwards.
inline void check_mismatched_recv(Communicator& comm, Recorder& rec) {
  const int p = comm.size(), me = comm.rank();
  if (p < 2 || (p % 2 == 1 && me == p - 1)) return;
  const int peer = me % 2 == 0 ? me + 1 : me - 1;
  for (size_t count : {size_t{5}, size_t{3}}) {
    std::vector<float> message(count, static_cast<float>(me));
    std::vector<float> got(4);
    const std::string what = "recv of 4 floats from a send of " + std::to_string(count);
    if (me % 2 == 0)
      comm.send(message, peer);
    else
      expect_error(rec, what, Expect::kUserError, [&] { comm.recv(got, peer); });
  }
  std::vector<float> message(4, static_cast<float>(me)), got(4, -1.0f);
  if (me % 2 == 0) {
    comm.send(message, peer);
  } else {
    comm.recv(got, peer);
    rec.expect_equal("send/recv after a mismatched recv", got,
                     std::vector<float>(4, static_cast<float>(peer)));
  }
}

}  // namespace detail

inline void check_misuse(Communicator& comm, detail::Recorder& rec, bool shared_model) {
  using detail::Expect;
  const int p = comm.size(), me = comm.rank();
  detail::check_local_misuse(comm, rec, shared_model);
  comm.barrier();
  detail::check_mismatched_recv(comm, rec);
  comm.barrier();
  if (p >= 2 && shared_model) {  // sizes that differ across ranks: a UserError on every rank
    std::vector<float> initial(me == 0 ? 4 : 5, 0.0f);
    detail::expect_error(rec, "create_shared_model of 4 vs 5 floats", Expect::kUserError, [&] {
      static_cast<void>(comm.create_shared_model(initial, GlobalModelPlacement::kMaster));
    });
  }
  if (p >= 2) detail::check_mismatched_collectives(comm, rec);
  comm.barrier();
}

}  // namespace syncopate::contract
