// The network model's software terms: evaluating and reading SMPI-style factor tables.
#include "backends/sim/platform/network_factors.hpp"

#include <cmath>
#include <string>

#include "backends/sim/platform/platform_reader.hpp"
#include "core/scenario/toml_reader.hpp"

namespace syncopate::sim {

double factor_at(std::span<const SizeFactor> table, double bytes) {
  double factor = 1;
  for (const SizeFactor& entry : table) {
    if (entry.from_bytes > bytes) break;
    factor = entry.factor;
  }
  return factor;
}

double transfer_seconds(const NetworkFactors& factors, double latency_s, double bandwidth_Bps,
                        double bytes) {
  if (!factors.has_tables()) return latency_s + bytes / bandwidth_Bps;
  return latency_s * factor_at(factors.latency, bytes) +
         bytes / (bandwidth_Bps * factor_at(factors.bandwidth, bytes));
}

double message_seconds(const NetworkFactors& factors, double latency_s, double bandwidth_Bps,
                       double bytes) {
  const double network = transfer_seconds(factors, latency_s, bandwidth_Bps, bytes);
  if (factors.overhead_s() == 0) return network;
  return factors.send_overhead_s + network + factors.recv_overhead_s;
}

double local_pass_seconds(std::span<const SizeFactor> speeds, double bytes) {
  if (speeds.empty() || bytes <= 0) return 0;
  return bytes / factor_at(speeds, bytes);
}

const WirePasses& NetworkFactors::passes(WireFormat wire) const {
  static const WirePasses kNone;
  switch (wire) {
    case WireFormat::kFp16:
      return fp16;
    case WireFormat::kBf16:
      return bf16;
    case WireFormat::kFp32:
      break;
  }
  return kNone;
}

namespace {
double float_bytes(size_t count) { return static_cast<double>(count * sizeof(float)); }
}  // namespace

double send_pass_seconds(const NetworkFactors& network, WireFormat wire, size_t count,
                         bool forwarded) {
  if (wire == WireFormat::kFp32 || forwarded) return 0;
  return local_pass_seconds(network.passes(wire).encode, float_bytes(count));
}

double recv_pass_seconds(const NetworkFactors& network, WireFormat wire, RecvAction action,
                         size_t count) {
  if (wire == WireFormat::kFp32)
    return action == RecvAction::kReduce ? local_pass_seconds(network.reduce, float_bytes(count))
                                         : 0;
  const WirePasses& passes = network.passes(wire);
  return local_pass_seconds(action == RecvAction::kReduce ? passes.reduce : passes.decode,
                            float_bytes(count));
}

double average_pass_seconds(const NetworkFactors& network, int p, size_t count) {
  if (p <= 1) return 0;
  const bool power_of_two = (p & (p - 1)) == 0;  // as divide_by_ranks
  return local_pass_seconds(power_of_two ? network.scale : network.divide, float_bytes(count));
}

double prepare_pass_seconds(const NetworkFactors& network, ReduceOp op, WireFormat wire, int p,
                            size_t count) {
  if (wire == WireFormat::kFp32 || p <= 1) return 0;  // as prepare()
  const double division = op == ReduceOp::kAvg ? average_pass_seconds(network, p, count) : 0.0;
  return division + local_pass_seconds(network.passes(wire).round, float_bytes(count));
}

double finish_pass_seconds(const NetworkFactors& network, ReduceOp op, WireFormat wire, int p,
                           size_t count) {
  if (op != ReduceOp::kAvg || wire != WireFormat::kFp32) return 0;  // as finish()
  return average_pass_seconds(network, p, count);
}

namespace detail {
namespace {

constexpr double kMaxBytes = 1e15;

// What a table's second column holds.
struct Column {
  const char* example;  // an entry, e.g. "[65536, 0.8]"
  const char* name;     // e.g. "factor"
  bool zero_ok;
  double max;
  const char* max_text;
};
constexpr Column kFactor{"[65536, 0.8]", "factor", false, 1e6, "1e6"};
constexpr Column kLatencyFactor{"[65536, 0.8]", "factor", true, 1e6, "1e6"};
constexpr Column kSpeed{"[65536, 2e10]", "bytes_per_second", false, 1e15, "1e15"};

double number_of(const toml::node& node, bool* ok) {
  *ok = true;
  if (node.is_integer()) return static_cast<double>(node.as_integer()->get());
  if (node.is_floating_point()) return node.as_floating_point()->get();
  *ok = false;
  return 0;
}

// One entry [from_bytes, factor] of `key`'s table, checked against the previous one.
SizeFactor read_entry(TomlReader& reader, const std::string& key, const toml::node& item,
                      size_t index, const std::vector<SizeFactor>& before, const Column& column) {
  const std::string at = "entry " + std::to_string(index + 1) + ": ";
  const toml::array* pair = item.as_array();
  bool from_ok = false, factor_ok = false;
  SizeFactor entry;
  if (pair != nullptr && pair->size() == 2) {
    entry.from_bytes = number_of(*pair->get(0), &from_ok);
    entry.factor = number_of(*pair->get(1), &factor_ok);
  }
  if (!from_ok || !factor_ok)
    reader.fail(key, at + "expected [from_bytes, " + column.name + "], two numbers, e.g. " +
                         column.example);
  if (!(entry.from_bytes >= 0 && entry.from_bytes <= kMaxBytes) ||
      entry.from_bytes != std::floor(entry.from_bytes))
    reader.fail(key, at + "from_bytes must be a whole number of bytes from 0 to 1e15");
  if (index == 0 && entry.from_bytes != 0) reader.fail(key, at + "the first entry must be from 0");
  if (index > 0 && entry.from_bytes <= before.back().from_bytes)
    reader.fail(key, at + "from_bytes must be larger than the previous entry's");
  const bool in_range = column.zero_ok ? entry.factor >= 0 : entry.factor > 0;
  if (!std::isfinite(entry.factor) || !in_range || entry.factor > column.max)
    reader.fail(key, at + "the " + column.name + " must be " + (column.zero_ok ? ">= 0" : "> 0") +
                         " and at most " + column.max_text);
  return entry;
}

std::vector<SizeFactor> read_table(TomlReader& reader, const std::string& key,
                                   const Column& column) {
  std::vector<SizeFactor> table;
  const toml::node* found = reader.node(key);
  if (found == nullptr) return table;
  const toml::array* array = found->as_array();
  if (array == nullptr || array->empty())
    reader.fail(key, "expected an array of [from_bytes, " + std::string(column.name) +
                         "] pairs, e.g. [[0, 1], " + column.example + "]");
  for (size_t i = 0; i < array->size(); ++i)
    table.push_back(read_entry(reader, key, *array->get(i), i, table, column));
  return table;
}

}  // namespace

NetworkFactors read_network_factors(TomlReader& reader) {
  NetworkFactors factors;
  factors.send_overhead_s = quantity(reader, "network.send_overhead", Quantity::kTime, 0.0, true);
  factors.recv_overhead_s = quantity(reader, "network.recv_overhead", Quantity::kTime, 0.0, true);
  factors.bandwidth = read_table(reader, "network.bandwidth_factor", kFactor);
  factors.latency = read_table(reader, "network.latency_factor", kLatencyFactor);
  factors.reduce = read_table(reader, "network.reduce_bandwidth", kSpeed);
  factors.copy = read_table(reader, "network.copy_bandwidth", kSpeed);
  factors.solo_copy = read_table(reader, "network.solo_copy_bandwidth", kSpeed);
  factors.scale = read_table(reader, "network.scale_bandwidth", kSpeed);
  factors.divide = read_table(reader, "network.divide_bandwidth", kSpeed);
  for (const auto& [name, passes] :
       {std::pair{"network.fp16.", &factors.fp16}, std::pair{"network.bf16.", &factors.bf16}}) {
    const std::string table = name;
    passes->encode = read_table(reader, table + "encode_bandwidth", kSpeed);
    passes->decode = read_table(reader, table + "decode_bandwidth", kSpeed);
    passes->reduce = read_table(reader, table + "reduce_bandwidth", kSpeed);
    passes->round = read_table(reader, table + "round_bandwidth", kSpeed);
  }
  return factors;
}

}  // namespace detail
}  // namespace syncopate::sim
