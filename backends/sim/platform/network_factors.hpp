#pragma once
// The network model's software terms, as SMPI has them: a per-message send and receive overhead
// and size-dependent bandwidth and latency factors (piecewise tables), read from a recipe's
// [network] table; and one message's modelled seconds with them.
#include <span>
#include <string_view>
#include <vector>

namespace syncopate {
class TomlReader;
}

namespace syncopate::sim {

// From `from_bytes` up to the next entry's from_bytes (exclusive), the factor.
struct SizeFactor {
  double from_bytes = 0;
  double factor = 1;
};

struct NetworkFactors {
  double send_overhead_s = 0;  // per message, on the sender before its transfer starts
  double recv_overhead_s = 0;  // per message, on the receiver after its transfer ends
  // Ascending from_bytes, the first 0; empty: 1 at every size. A message of s bytes over a route
  // of latency L and bandwidth B takes L x latency(s) + s / (B x bandwidth(s)) on the network.
  std::vector<SizeFactor> bandwidth, latency;

  bool empty() const {  // the plain model: no overheads, every factor 1
    return send_overhead_s == 0 && recv_overhead_s == 0 && bandwidth.empty() && latency.empty();
  }
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

namespace detail {
// The optional [network] table of a recipe: keys send_overhead, recv_overhead (times) and
// bandwidth_factor, latency_factor (arrays of [from_bytes, factor] pairs, from_bytes ascending
// from 0). Absent: the plain model. Errors name file:line: key.
NetworkFactors read_network_factors(TomlReader& reader);
}  // namespace detail

}  // namespace syncopate::sim
