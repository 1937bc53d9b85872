#pragma once
// The transport half of `syncopate calibrate` (MPI) and what the files are written from.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/calibrate.hpp"
#include "app/collectives.hpp"
#include "core/comm/compression.hpp"

#if defined(SYNCOPATE_HAVE_MPI)
#include <mpi.h>

#include <functional>

#include "backends/mpi/mpi_communicator.hpp"
#endif

namespace syncopate::app {

struct TransportSeries {
  std::string name;  // "ping_pong" (seconds one way) or a collective (seconds per call)
  size_t bytes = 0;  // message size (a collective: each rank's contribution)
  std::vector<double> seconds;
};

// A 16-bit wire format's local passes (sim::WirePasses), as TransportSamples::copy_pass: sizes
// in the floats' bytes, ascending.
struct WirePassSamples {
  WireFormat wire;
  std::vector<TransportSeries> encode, decode, reduce, round;
};

struct TransportSamples {
  int ranks = 0;
  std::vector<TransportSeries> ping_pong;  // raw MPI_Send / MPI_Recv; sizes ascending
  // The same through the training communicator's schedules (a broadcast from rank 0, then one
  // from rank 1): one-way messages as every collective's steps send them. The link is fitted to
  // these; sizes ascending, as ping_pong's.
  std::vector<TransportSeries> channel_ping_pong;
  // Ranks 0 and 1 sending to each other at once through the communicator (a 2-rank allgather,
  // as a collective's rounds send), seconds per exchange; every power of two from 32 KiB to
  // 32 MiB. Against channel_ping_pong at the same sizes: whether the link's two directions, or
  // the node's cores, share their speed.
  std::vector<TransportSeries> channel_exchange;
  // A collective's round through the communicator (a 2-rank allreduce of 8 B: one exchange),
  // seconds per call: "round", ranks 0 and 1 on two cores, then "turn_round", the two on one
  // core, where each message waits for its receiver's turn. Empty where they share no host.
  std::vector<TransportSeries> turn;
  TransportSeries send_overhead{"send_overhead", 8, {}};  // seconds per blocking eager send
  TransportSeries recv_overhead{"recv_overhead", 8, {}};  // seconds per receive of an arrived one
  std::vector<TransportSeries> collectives;               // per kind, sizes ascending
  // Local passes on rank 0 over a buffer that rank 1 has just received, seconds per pass; sizes
  // ascending: a copy into it ("copy_pass"), a reduction into it ("reduce_pass"), and kAvg's
  // division of it by 2 ("scale_pass", a multiplication) and by 3 ("divide_pass").
  std::vector<TransportSeries> copy_pass, reduce_pass, scale_pass, divide_pass;
  // The copy again over buffers that no other rank touches, as a one-rank collective's are
  // ("solo_copy_pass"): they stay in rank 0's caches, several times faster up to a few MiB.
  std::vector<TransportSeries> solo_copy_pass;
  std::vector<WirePassSamples> wire_passes{{WireFormat::kFp16, {}, {}, {}, {}},
                                           {WireFormat::kBf16, {}, {}, {}, {}}};
};

// When, where and how: the files' header lines (without the comment marks).
struct Provenance {
  std::vector<std::string> lines;
};

struct Calibration {
  std::string name;  // the platform's name (the --out file's stem)
  Provenance provenance;
  ComputeSamples compute;  // every rank's samples, pooled
  TransportSamples transport;
  int cores = 0;  // the node's cores online: its cores_per_node
  // The MPI settings the transport was measured under (Runtime): the platform's
  // [calibrated_under], which compare checks against a measured run's.
  bool shared_memory_single_copy = false;
  std::optional<bool> mpi_yield_when_idle;  // none: the MPI has no such setting
};

// Writes the profile (returned path) and the platform recipe `platform_path`.
std::string write_calibration(const Calibration& c, const std::string& platform_path);
// The table of medians and spreads on stdout.
void print_calibration(const Calibration& c);

#if defined(SYNCOPATE_HAVE_MPI)
// Collective over comm; every rank returns the same samples.
TransportSamples time_transport(mpi::MpiCommunicator& comm, int repeats);

// The scenario that `resolve` reads, on every rank, or false on every rank after each printed
// its error (a rank that cannot read its scenario, or ranks given different scenarios).
// `command` names the subcommand in the messages.
bool agreed_scenario(mpi::MpiCommunicator& comm, const std::function<Scenario()>& resolve,
                     const std::string& command, Scenario& scenario);
#endif

}  // namespace syncopate::app
