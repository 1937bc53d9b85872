#pragma once
// Deadline: a watchdog bound on a blocking MPI call that cannot be polled.
#include <cstdint>
#include <string>

namespace syncopate::mpi {

// Bounds a blocking MPI call that cannot be polled (window creation and locks, communicator
// creation, gathers): if the scope lasts longer than the watchdog, a background thread prints
// what this rank was waiting for and ends the process; mpirun then ends the job. One thread
// serves every deadline; arming one costs a mutex and a map insertion, fine for per-epoch calls
// (per-message waits poll instead: see wait_all). No deadline when the watchdog is off.
class Deadline {
 public:
  // Bounded by the process default (Runtime::watchdog_seconds()).
  explicit Deadline(const char* operation);
  // Bounded by `seconds` (kDefaultTimeout: the process default; 0: not armed).
  Deadline(const char* operation, double seconds);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  // Tests: what an expired deadline does with its message instead of ending the process
  // (nullptr restores the default).
  using Action = void (*)(const std::string& message);
  static void set_action_for_tests(Action action);

 private:
  uint64_t id_ = 0;  // 0: not armed
};

}  // namespace syncopate::mpi
