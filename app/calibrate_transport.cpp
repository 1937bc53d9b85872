// Timing the MPI transport: ping-pong and exchanges between ranks 0 and 1 (also with the two on
// one core), and allreduce, broadcast and allgather over all ranks, each over a range of message
// sizes.
#if defined(SYNCOPATE_HAVE_MPI)
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/calibrate_mpi.hpp"
#include "core/base/function_ref.hpp"
#include "core/comm/collective_schedule.hpp"
#include "core/comm/compression.hpp"

namespace syncopate::app {
namespace {

// The largest ping-pong: the largest message of a 64 MiB collective (a broadcast's).
constexpr size_t kLargestPingPong = size_t{64} << 20;

// Repetitions per sample: enough that small messages are not lost in the clock.
int iterations(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>((1 << 20) / (bytes + 1), 1, 200));
}

// One sample of ping-pong between ranks 0 and 1: seconds one way (half a round trip).
double ping_pong(MPI_Comm comm, int rank, std::vector<char>& buffer) {
  const int n = static_cast<int>(buffer.size());
  const int iters = iterations(buffer.size());
  MPI_Barrier(comm);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    if (rank == 0) {
      MPI_Send(buffer.data(), n, MPI_CHAR, 1, 0, comm);
      MPI_Recv(buffer.data(), n, MPI_CHAR, 1, 0, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buffer.data(), n, MPI_CHAR, 0, 0, comm, MPI_STATUS_IGNORE);
      MPI_Send(buffer.data(), n, MPI_CHAR, 0, 0, comm);
    }
  }
  double seconds = (MPI_Wtime() - start) / (2.0 * iters);
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, comm);
  return seconds;
}

// While it lives, ranks 0 and 1 run on one core, rank 0's, as two workers on a node with fewer
// cores than workers take turns on theirs: each message between them then waits until the
// scheduler gives its receiver the core (with Open MPI's mpi_yield_when_idle, as soon as the
// spinning sender yields). Only the calling threads are pinned, and each gets its own affinity
// back. `active()` is false on every rank where ranks 0 and 1 do not share a host.
class SharedCore {
 public:
  SharedCore(MPI_Comm comm, int rank) {
    std::array<char, MPI_MAX_PROCESSOR_NAME> mine{}, first{};
    int length = 0;
    MPI_Get_processor_name(mine.data(), &length);
    first = mine;
    MPI_Bcast(first.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, comm);
    int cpu = sched_getcpu();
    MPI_Bcast(&cpu, 1, MPI_INT, 0, comm);
    const int mine_ok = rank > 1 || (cpu >= 0 && std::strcmp(mine.data(), first.data()) == 0);
    int all_ok = 0;
    MPI_Allreduce(&mine_ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    int pinned = 1;
    if (all_ok == 1 && rank < 2) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pinned_ = sched_getaffinity(0, sizeof saved_, &saved_) == 0 &&
                sched_setaffinity(0, sizeof one, &one) == 0;
      pinned = pinned_ ? 1 : 0;
    }
    int both = 0;
    MPI_Allreduce(&pinned, &both, 1, MPI_INT, MPI_MIN, comm);
    active_ = all_ok == 1 && both == 1;
  }
  SharedCore(const SharedCore&) = delete;
  SharedCore& operator=(const SharedCore&) = delete;
  ~SharedCore() {
    if (pinned_) sched_setaffinity(0, sizeof saved_, &saved_);
  }
  bool active() const { return active_; }

 private:
  bool active_ = false, pinned_ = false;
  cpu_set_t saved_{};
};

// One sample of ping-pong between ranks 0 and 1 through the training communicator (`pair`, those
// two ranks; null on the others): a broadcast from rank 0, then one from rank 1, each one
// message as a schedule's step sends it (chunked, polled: ScheduleChannel). Seconds one way.
double channel_ping_pong(MPI_Comm comm, Communicator* pair, std::vector<float>& buffer) {
  const int iters = iterations(buffer.size() * sizeof(float));
  MPI_Barrier(comm);
  const double start = MPI_Wtime();
  if (pair != nullptr)
    for (int i = 0; i < iters; ++i) {
      pair->broadcast(buffer, 0);
      pair->broadcast(buffer, 1);
    }
  double seconds = (MPI_Wtime() - start) / (2.0 * iters);
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, comm);
  return seconds;
}

// One sample of `calls` allreduces of `buffer` over `pair` (ranks 0 and 1; null on the others):
// seconds per call.
double channel_round(MPI_Comm comm, Communicator* pair, std::vector<float>& buffer, int calls) {
  MPI_Barrier(comm);
  const double start = MPI_Wtime();
  if (pair != nullptr)
    for (int i = 0; i < calls; ++i) pair->allreduce(buffer);
  double seconds = (MPI_Wtime() - start) / calls;
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, comm);
  return seconds;
}

// One sample of an exchange through `pair` (ranks 0 and 1; null on the others): a 2-rank
// allgather, each rank sending its half of `all` to the other at once, as a collective's rounds
// do. Seconds per exchange, rank 0's.
double channel_exchange(MPI_Comm comm, Communicator* pair, std::vector<float>& all) {
  const size_t half = all.size() / 2;
  const int iters = iterations(half * sizeof(float));
  MPI_Barrier(comm);
  const double start = MPI_Wtime();
  if (pair != nullptr) {
    const std::span<const float> mine(all.data() + pair->rank() * half, half);
    for (int i = 0; i < iters; ++i) pair->allgather(mine, all, {});
  }
  double seconds = (MPI_Wtime() - start) / iters;
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, comm);
  return seconds;
}

// One sample of the software overheads of 8-byte messages, seconds per message: rank 0's
// blocking sends (eager: they return once copied), then, after a barrier that makes sure they
// were sent, rank 1's receives of messages that are there already. As SMPI's smpi/os and smpi/or.
std::pair<double, double> overheads(MPI_Comm comm, int rank) {
  constexpr int kMessages = 32;
  std::array<char, 8> byte{};
  MPI_Barrier(comm);
  double send = 0, recv = 0;
  if (rank == 0) {
    const double start = MPI_Wtime();
    for (int i = 0; i < kMessages; ++i) MPI_Send(byte.data(), 8, MPI_CHAR, 1, 1, comm);
    send = (MPI_Wtime() - start) / kMessages;
  }
  MPI_Barrier(comm);
  if (rank == 1) {
    const double start = MPI_Wtime();
    for (int i = 0; i < kMessages; ++i)
      MPI_Recv(byte.data(), 8, MPI_CHAR, 0, 1, comm, MPI_STATUS_IGNORE);
    recv = (MPI_Wtime() - start) / kMessages;
  }
  MPI_Bcast(&send, 1, MPI_DOUBLE, 0, comm);
  MPI_Bcast(&recv, 1, MPI_DOUBLE, 1, comm);
  return {send, recv};
}

// One sample of a local pass on rank 0 over `buffer`. With `peer_reads`, each pass comes right
// after rank 1 received the buffer, as an fp32 collective's next call finds it: the peer has just
// read it (shared memory: copied out of it) into `received`. Without, as a 16-bit format's
// passes find it: the peer reads the encoded copy, not the buffer. `pass` works on the buffer:
// a copy into it (an allgather's contribution put in place), a reduction into it (apply_action,
// as a step's received segment), or a 16-bit wire format's pass. Seconds per pass, rank 0's;
// only the passes are timed.
double local_pass(MPI_Comm comm, int rank, std::vector<float>& buffer, bool peer_reads,
                  std::vector<float>& received, FunctionRef<void()> pass) {
  const int n = static_cast<int>(buffer.size());
  const int iters = iterations(buffer.size() * sizeof(float));
  MPI_Barrier(comm);
  double total = 0;
  for (int i = 0; i < iters; ++i) {
    if (rank == 0) {
      if (peer_reads) {
        MPI_Send(buffer.data(), n, MPI_FLOAT, 1, 3, comm);
        MPI_Recv(nullptr, 0, MPI_CHAR, 1, 4, comm, MPI_STATUS_IGNORE);  // rank 1 has it
      }
      const double start = MPI_Wtime();
      pass();
      total += MPI_Wtime() - start;
    } else if (rank == 1 && peer_reads) {
      MPI_Recv(received.data(), n, MPI_FLOAT, 0, 3, comm, MPI_STATUS_IGNORE);
      MPI_Send(nullptr, 0, MPI_CHAR, 0, 4, comm);
    }
  }
  double seconds = total / iters;
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, comm);
  return seconds;
}

// One sample of a collective over `count` floats: the slowest rank's seconds per call.
double collective(MPI_Comm comm, int size, CollectiveKind kind, size_t count) {
  const int n = static_cast<int>(count);
  std::vector<float> send(count, 1.0f);
  std::vector<float> receive(kind == CollectiveKind::kAllgather ? count * size : count);
  const int iters = iterations(4 * count);
  MPI_Barrier(comm);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    switch (kind) {
      case CollectiveKind::kAllreduce:
        MPI_Allreduce(send.data(), receive.data(), n, MPI_FLOAT, MPI_SUM, comm);
        break;
      case CollectiveKind::kBroadcast:
        MPI_Bcast(send.data(), n, MPI_FLOAT, 0, comm);
        break;
      case CollectiveKind::kAllgather:
        MPI_Allgather(send.data(), n, MPI_FLOAT, receive.data(), n, MPI_FLOAT, comm);
        break;
    }
  }
  const double mine = (MPI_Wtime() - start) / iters;
  double slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
  return slowest;
}

}  // namespace

TransportSamples time_transport(mpi::MpiCommunicator& world, int repeats) {
  MPI_Comm comm = world.handle();
  const int rank = world.rank(), size = world.size();
  TransportSamples t;
  t.ranks = size;
  overheads(comm, rank);  // warm-up
  for (int r = 0; r < repeats; ++r) {
    const auto [send, recv] = overheads(comm, rank);
    t.send_overhead.seconds.push_back(send);
    t.recv_overhead.seconds.push_back(recv);
  }
  // Every power of two: the fit takes them in pairs, one segment of its factor tables each.
  for (size_t bytes = 8; bytes <= kLargestPingPong; bytes *= 2) {
    std::vector<char> buffer(bytes, 1);
    TransportSeries series{"ping_pong", bytes, {}};
    ping_pong(comm, rank, buffer);  // warm-up
    for (int r = 0; r < repeats; ++r) series.seconds.push_back(ping_pong(comm, rank, buffer));
    t.ping_pong.push_back(std::move(series));
  }
  {
    const std::unique_ptr<Communicator> pair = world.split(rank < 2 ? 0 : 1, rank);
    Communicator* mine = rank < 2 ? pair.get() : nullptr;
    for (size_t bytes = 8; bytes <= kLargestPingPong; bytes *= 2) {
      std::vector<float> buffer((bytes + sizeof(float) - 1) / sizeof(float), 1.0f);
      TransportSeries series{"channel_ping_pong", bytes, {}};
      channel_ping_pong(comm, mine, buffer);  // warm-up
      for (int r = 0; r < repeats; ++r)
        series.seconds.push_back(channel_ping_pong(comm, mine, buffer));
      t.channel_ping_pong.push_back(std::move(series));
    }
    // Exchanges from 32 KiB (a 2-rank ring allreduce's messages from 64 KiB) to buffers that
    // outgrow the caches, as a node's cores copy in a collective's rounds; each buffer holds
    // both ranks' halves.
    for (size_t bytes = size_t{32} << 10; bytes <= size_t{32} << 20; bytes *= 2) {
      std::vector<float> all(2 * bytes / sizeof(float), 1.0f);
      TransportSeries series{"channel_exchange", bytes, {}};
      channel_exchange(comm, mine, all);  // warm-up
      for (int r = 0; r < repeats; ++r) series.seconds.push_back(channel_exchange(comm, mine, all));
      t.channel_exchange.push_back(std::move(series));
    }
    // A round of a collective (a 2-rank allreduce of 8 B: one exchange), with ranks 0 and 1
    // on two cores and then on one. Calls per sample: each message may wait a whole time slice
    // (milliseconds) for its turn where the MPI library spins without yielding.
    constexpr int kRoundCalls = 20;
    std::vector<float> buffer(2, 1.0f);
    const auto rounds = [&](std::string name) {
      TransportSeries series{std::move(name), buffer.size() * sizeof(float), {}};
      channel_round(comm, mine, buffer, kRoundCalls);  // warm-up
      for (int r = 0; r < repeats; ++r)
        series.seconds.push_back(channel_round(comm, mine, buffer, kRoundCalls));
      return series;
    };
    TransportSeries apart = rounds("round");
    const SharedCore core(comm, rank);
    if (core.active()) t.turn = {std::move(apart), rounds("turn_round")};
  }
  // Local passes from 1 KiB to the largest segment of a 64 MiB collective (a 2-rank reduction's
  // half, an allgather's contribution), every power of two.
  const auto sample = [&](std::string name, size_t bytes, std::vector<float>& buffer,
                          bool peer_reads, std::vector<float>& received, FunctionRef<void()> pass) {
    TransportSeries series{std::move(name), bytes, {}};
    local_pass(comm, rank, buffer, peer_reads, received, pass);  // warm-up
    for (int r = 0; r < repeats; ++r)
      series.seconds.push_back(local_pass(comm, rank, buffer, peer_reads, received, pass));
    return series;
  };
  for (size_t bytes = size_t{1} << 10; bytes <= (size_t{32} << 20); bytes *= 2) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> buffer(count, 1.0f), source(count, 0.5f), received(rank == 1 ? count : 0);
    const auto copy = [&] { std::memmove(buffer.data(), source.data(), bytes); };
    t.copy_pass.push_back(sample("copy_pass", bytes, buffer, true, received, copy));
    t.solo_copy_pass.push_back(sample("solo_copy_pass", bytes, buffer, false, received, copy));
    t.reduce_pass.push_back(sample("reduce_pass", bytes, buffer, true, received, [&] {
      apply_action(RecvAction::kReduce, ReduceOp::kSum, buffer, source);
    }));
    // kAvg's division by 2 (a multiplication) and by 3. Every 64th pass first refills the buffer
    // with ones, inside the timing (about 1/128 of a pass more), so that repeated division never
    // reaches subnormal floats, whose slow arithmetic no collective meets.
    for (const int p : {2, 3}) {
      int passes = 0;
      (p == 2 ? t.scale_pass : t.divide_pass)
          .push_back(
              sample(p == 2 ? "scale_pass" : "divide_pass", bytes, buffer, true, received, [&] {
                if (++passes % 64 == 0) std::fill(buffer.begin(), buffer.end(), 1.0f);
                divide_by_ranks(p, buffer);
              }));
    }
  }
  // The 16-bit wire formats' passes over the same buffers (sizes in the floats' bytes), every
  // fourth power of two: a format's speeds change little between.
  for (WirePassSamples& passes : t.wire_passes) {
    const WireFormat wire = passes.wire;
    const std::string name(to_string(wire));
    for (size_t bytes = size_t{1} << 10; bytes <= (size_t{16} << 20); bytes *= 4) {
      const size_t count = bytes / sizeof(float);
      std::vector<float> buffer(count, 1.0f), source(count, 0.5f), none;
      std::vector<uint16_t> encoded(count);
      encode_wire(source, wire, encoded);
      passes.encode.push_back(sample(name + "_encode_pass", bytes, buffer, false, none,
                                     [&] { encode_wire(buffer, wire, encoded); }));
      passes.decode.push_back(sample(name + "_decode_pass", bytes, buffer, false, none,
                                     [&] { decode_wire(encoded, wire, buffer); }));
      passes.reduce.push_back(sample(name + "_reduce_pass", bytes, buffer, false, none,
                                     [&] { add_decoded(buffer, encoded, wire); }));
      passes.round.push_back(sample(name + "_round_pass", bytes, buffer, false, none,
                                    [&] { round_to_wire(buffer, wire); }));
    }
  }
  for (CollectiveKind kind :
       {CollectiveKind::kAllreduce, CollectiveKind::kBroadcast, CollectiveKind::kAllgather}) {
    for (size_t count = 256; count <= (size_t{4} << 20); count *= 16) {
      TransportSeries series{std::string(to_string(kind)), 4 * count, {}};
      collective(comm, size, kind, count);  // warm-up
      for (int r = 0; r < repeats; ++r)
        series.seconds.push_back(collective(comm, size, kind, count));
      t.collectives.push_back(std::move(series));
    }
  }
  return t;
}

}  // namespace syncopate::app
#endif
