// Timing the MPI transport: ping-pong and exchanges between ranks 0 and 1, and allreduce,
// broadcast and allgather over all ranks, each over a range of message sizes.
#if defined(SYNCOPATE_HAVE_MPI)
#include <mpi.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "app/calibrate_mpi.hpp"

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

// One sample of an exchange between ranks 0 and 1 (each sends the buffer to the other and
// receives the other's, at once): seconds per exchange, rank 0's.
double exchange(MPI_Comm comm, int rank, std::vector<char>& out, std::vector<char>& in) {
  const int n = static_cast<int>(out.size());
  const int iters = iterations(out.size());
  MPI_Barrier(comm);
  const double start = MPI_Wtime();
  if (rank < 2) {
    for (int i = 0; i < iters; ++i)
      MPI_Sendrecv(out.data(), n, MPI_CHAR, 1 - rank, 2, in.data(), n, MPI_CHAR, 1 - rank, 2, comm,
                   MPI_STATUS_IGNORE);
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

TransportSamples time_transport(MPI_Comm comm, int repeats) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
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
  // Exchanges from 32 KiB (the size of a 2-rank ring allreduce's messages from 64 KiB), where
  // bandwidth rather than latency sets the time.
  for (size_t bytes = size_t{32} << 10; bytes <= (size_t{4} << 20); bytes *= 4) {
    std::vector<char> out(bytes, 1), in(bytes);
    TransportSeries series{"exchange", bytes, {}};
    exchange(comm, rank, out, in);  // warm-up
    for (int r = 0; r < repeats; ++r) series.seconds.push_back(exchange(comm, rank, out, in));
    t.exchange.push_back(std::move(series));
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
