#pragma once
// A job that a fault ended, as a real NCCL job ends when a peer dies or a link fails: the
// communicator is gone and every survivor stops. The simulator throws it for the faults of
// [[sim.faults]] (backends/sim/sim_faults.hpp) where the job cannot go on without the lost worker
// (every strategy but the elastic epoch_sync and epoch_async); `syncopate run` then exits with
// code 4 and leaves DIR.partial/ERROR and DIR.partial/fault.json (what failed, when, the time
// lost).
#include <string>

#include "core/comm/comm.hpp"

namespace syncopate {

struct FaultRecord {
  std::string kind;  // "host_failure", "link_failure" (the [[sim.faults]] kind)
  int worker = -1;   // the failed worker, or -1 (a link)
  std::string link;  // the failed link, or empty
  double at_s = 0;   // simulated date of the abort
  // The date of the last checkpoint set every worker wrote (0: none, the start); the work
  // since is lost. The simulator's caller fills it in (app/run_sim.cpp).
  double last_checkpoint_s = 0;
  double lost_seconds() const { return at_s - last_checkpoint_s; }
};

class FaultAbort : public PeerFailure {
 public:
  FaultAbort(const std::string& what, FaultRecord record)
      : PeerFailure(what), record_(std::move(record)) {}
  const FaultRecord& record() const { return record_; }

 private:
  FaultRecord record_;
};

}  // namespace syncopate
