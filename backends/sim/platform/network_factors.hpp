#pragma once
// The network model's software terms, as SMPI has them: a per-message send and receive overhead
// and size-dependent bandwidth and latency factors (piecewise tables), read from a recipe's
// [network] table; and one message's modelled seconds with them. The same table holds the local
// passes of a collective on a rank's memory (the reduction of a received segment, the copy of a
// contribution into place), which SMPI does not model: their speeds by size.
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "core/comm/collective_schedule.hpp"
#include "core/comm/compression.hpp"

namespace syncopate {
class TomlReader;
}

namespace syncopate::sim {

// From `from_bytes` up to the next entry's from_bytes (exclusive), the factor.
struct SizeFactor {
  double from_bytes = 0;
  double factor = 1;
};

// A 16-bit wire format's local passes ([network.fp16] or [network.bf16]), each a table of
// [from_bytes, bytes per second] over the floats' bytes (4 per element, as `reduce`'s): `encode`
// turns a segment into the format before its send, `decode` puts a copy step's received segment
// into the buffer, `reduce` adds a reduction step's received segment as it decodes it, and
// `round` rounds a whole buffer to the format before a reduction's first round (prepare()).
// Empty: free.
struct WirePasses {
  std::vector<SizeFactor> encode, decode, reduce, round;
  bool empty() const { return encode.empty() && decode.empty() && reduce.empty() && round.empty(); }
};

struct NetworkFactors {
  double send_overhead_s = 0;  // per message, on the sender before its transfer starts
  double recv_overhead_s = 0;  // per message, on the receiver after its transfer ends
  // Ascending from_bytes, the first 0; empty: 1 at every size. A message of s bytes over a route
  // of latency L and bandwidth B takes L x latency(s) + s / (B x bandwidth(s)) on the network.
  std::vector<SizeFactor> bandwidth, latency;
  // Local passes, as [from_bytes, bytes per second] (SizeFactor::factor is the speed): `reduce`
  // adds a received segment of s bytes into the buffer (a step whose action is kReduce), `copy`
  // moves s bytes into place (an allgather's contribution; a reduce-scatter's input and its
  // block). A pass of s bytes takes s / speed(s); empty: free, as before these tables.
  std::vector<SizeFactor> reduce, copy;
  // `copy` where no other rank touches the buffers, a one-rank collective's: they stay in the
  // rank's caches. Empty: `copy`'s speeds.
  std::vector<SizeFactor> solo_copy;
  // ReduceOp::kAvg's division of a reduction's buffer by the rank count p, the same way: `scale`
  // where p is a power of two (a multiplication by 1/p), `divide` otherwise (divide_by_ranks).
  std::vector<SizeFactor> scale, divide;
  WirePasses fp16, bf16;  // in place of `reduce` (and of a free copy) for a 16-bit wire format

  bool empty() const {  // the plain model: no overheads, every factor 1, free local passes
    return send_overhead_s == 0 && recv_overhead_s == 0 && bandwidth.empty() && latency.empty() &&
           reduce.empty() && copy.empty() && solo_copy.empty() && scale.empty() && divide.empty() &&
           fp16.empty() && bf16.empty();
  }
  // Whether a collective in `wire` pays any local pass besides an average's division (which
  // has its own speeds, `scale` and `divide`): its steps' passes or the copies around them.
  bool has_passes(WireFormat wire) const {
    return wire == WireFormat::kFp32 ? !reduce.empty() || !copy.empty()
                                     : !copy.empty() || !passes(wire).empty();
  }
  // fp16's or bf16's passes; kFp32 has none of these (an empty set).
  const WirePasses& passes(WireFormat wire) const;
  bool has_tables() const { return !bandwidth.empty() || !latency.empty(); }
  double overhead_s() const { return send_overhead_s + recv_overhead_s; }
};

// The factor of the last entry whose from_bytes <= bytes; 1 for an empty table.
double factor_at(std::span<const SizeFactor> table, double bytes);

// The network part of one message of `bytes` over a route of `latency_s` and `bandwidth_Bps`:
// latency_s x latency factor + bytes / (bandwidth_Bps x bandwidth factor); exactly
// latency_s + bytes / bandwidth_Bps when both tables are empty.
double transfer_seconds(const NetworkFactors& factors, double latency_s, double bandwidth_Bps,
                        double bytes);
// The whole message: send overhead + transfer_seconds + receive overhead.
double message_seconds(const NetworkFactors& factors, double latency_s, double bandwidth_Bps,
                       double bytes);

// A local pass over `bytes` at the speeds of `speeds` (NetworkFactors::reduce or copy): 0 for an
// empty table.
double local_pass_seconds(std::span<const SizeFactor> speeds, double bytes);

// The sender's pass before a message of `count` floats in `wire`: the encoding into a 16-bit
// format, none in fp32 or where the step forwards the segment as it received it
// (forwards_received).
double send_pass_seconds(const NetworkFactors& network, WireFormat wire, size_t count,
                         bool forwarded);
// The receiver's pass after it: in fp32 a reduction at `reduce` (a copy lands in place, free); in
// a 16-bit format the format's reduce, or decode for a copy. kMax's 16-bit reduction, which
// decodes into scratch before it reduces, is charged as a sum's.
double recv_pass_seconds(const NetworkFactors& network, WireFormat wire, RecvAction action,
                         size_t count);
// kAvg's division of `count` floats by p (divide_by_ranks): `scale` or `divide` by p; 0 for
// p <= 1, where nothing is divided.
double average_pass_seconds(const NetworkFactors& network, int p, size_t count);
// A reduction's passes before its first round over `count` floats on p ranks (prepare()): in a
// 16-bit format kAvg's division, then the format's rounding; nothing in fp32 or for p <= 1.
double prepare_pass_seconds(const NetworkFactors& network, ReduceOp op, WireFormat wire, int p,
                            size_t count);
// A reduction's pass after its last round over the `count` floats it finishes (finish()): kAvg's
// division in fp32; nothing otherwise.
double finish_pass_seconds(const NetworkFactors& network, ReduceOp op, WireFormat wire, int p,
                           size_t count);

namespace detail {
// The optional [network] table of a recipe: keys send_overhead, recv_overhead (times),
// bandwidth_factor, latency_factor (arrays of [from_bytes, factor] pairs, from_bytes ascending
// from 0), reduce_bandwidth, copy_bandwidth, solo_copy_bandwidth, scale_bandwidth,
// divide_bandwidth (arrays of [from_bytes, bytes per second]), and fp16.* and bf16.*
// (encode_bandwidth, decode_bandwidth, reduce_bandwidth, round_bandwidth, the same arrays).
// Absent: the plain model. Errors name file:line: key.
NetworkFactors read_network_factors(TomlReader& reader);
}  // namespace detail

}  // namespace syncopate::sim
