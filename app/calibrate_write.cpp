// Fitting a host profile and a platform recipe to the calibration samples, and writing them.
#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/calibrate_fit.hpp"
#include "app/calibrate_mpi.hpp"
#include "app/spread.hpp"
#include "core/base/check.hpp"
#include "core/comm/mpi_settings.hpp"

namespace syncopate::app {
namespace {

namespace fs = std::filesystem;

std::string num(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", x);
  return text;
}

// "  # median of 60 samples, p10 1.2e-05, p90 1.5e-05"
std::string note(const Spread& s) {
  return "  # median of " + std::to_string(s.n) + " samples; p10 " + num(s.p10) + ", p90 " +
         num(s.p90);
}

std::string shape_text(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The measured layers, one per key (kind, input, output): layers that share a key pool samples.
std::vector<LayerSeries> distinct_layers(const ComputeSamples& c) {
  std::vector<LayerSeries> out;
  for (const LayerSeries& layer : c.layers) {
    auto same = std::ranges::find_if(out, [&](const LayerSeries& o) {
      return o.kind == layer.kind && o.input == layer.input && o.output == layer.output;
    });
    if (same == out.end()) {
      out.push_back(layer);
      continue;
    }
    auto& f = same->forward.seconds;
    f.insert(f.end(), layer.forward.seconds.begin(), layer.forward.seconds.end());
    auto& b = same->backward.seconds;
    b.insert(b.end(), layer.backward.seconds.begin(), layer.backward.seconds.end());
  }
  return out;
}

struct KindFit {
  double flops = 0, seconds = 0;
  std::string from;
};

// Per op kind: the measured flops over the median seconds of the passes of that kind.
std::array<KindFit, kNumOpKinds> fit_kinds(const ComputeSamples& c) {
  std::array<KindFit, kNumOpKinds> fit{};
  auto add = [&](const Series& s, const std::string& what) {
    if (s.cost.flops <= 0 || s.seconds.empty()) return;
    KindFit& k = fit[static_cast<size_t>(s.cost.kind)];
    k.flops += s.cost.flops;
    k.seconds += spread(s.seconds).median;
    k.from += (k.from.empty() ? "" : ", ") + what;
  };
  for (const LayerSeries& layer : c.layers) {
    add(layer.forward, layer.kind + " forward");
    add(layer.backward, layer.kind + " backward");
  }
  add(c.loss, "loss");
  add(c.optimizer, "optimizer");
  return fit;
}

void write_flops(std::ostream& out, const ComputeSamples& c) {
  const auto fit = fit_kinds(c);
  static constexpr std::array kFallback = {OpKind::kGemm, OpKind::kConv, OpKind::kElementwise,
                                           OpKind::kPool, OpKind::kLoss, OpKind::kOptimizer};
  const auto fallback = std::ranges::find_if(
      kFallback, [&](OpKind k) { return fit[static_cast<size_t>(k)].seconds > 0; });
  if (fallback == kFallback.end()) throw UserError("calibrate: no compute with flops measured");
  out << "\n# Fallback speeds for passes without a measured [[layer]]: flops / median seconds.\n"
         "[flops_per_s]\n";
  for (int kind = 0; kind < kNumOpKinds; ++kind) {
    const KindFit& k = fit[static_cast<size_t>(kind)];
    const KindFit& used = k.seconds > 0 ? k : fit[static_cast<size_t>(*fallback)];
    out << to_string(OpKind(kind)) << " = " << num(used.flops / used.seconds) << "  # "
        << (k.seconds > 0 ? "from " + k.from
                          : "not measured: as " + std::string(to_string(*fallback)))
        << "\n";
  }
}

void write_header(std::ostream& out, const Calibration& c, const std::string& what) {
  out << "# " << what << ", measured by `syncopate calibrate` (rerun it rather than edit).\n";
  for (const std::string& line : c.provenance.lines) out << "# " << line << "\n";
}

void write_profile(const std::string& path, const std::string& name, const Calibration& c) {
  std::ofstream out(path);
  if (!out) throw UserError("calibrate: cannot write " + path);
  write_header(out, c, "Host profile of one rank");
  const ComputeSamples& s = c.compute;
  const Spread zero = spread(s.zero_grad.seconds), overhead = spread(s.overhead.seconds);
  out << "name = \"" << name << "\"\n"
      << "description = \"one rank of " << c.name << ", measured at batch " << s.batch << "\"\n"
      << "# bytes/s: zeroing the gradients (" << num(s.zero_grad.cost.bytes) << " B) in "
      << num(zero.median) << " s" << note(zero) << "\n"
      << "memory_bandwidth = " << num(s.zero_grad.cost.bytes / zero.median) << "\n"
      << "# s: a whole step minus its timed parts (input copy, bookkeeping)\n"
      << "step_overhead = " << num(overhead.median) << note(overhead) << "\n";
  double sum_of_medians = 0;
  for (const LayerSeries& layer : s.layers)
    sum_of_medians += spread(layer.forward.seconds).median + spread(layer.backward.seconds).median;
  for (const Series* part : {&s.loss, &s.zero_grad, &s.optimizer})
    sum_of_medians += spread(part->seconds).median;
  const Spread parts = spread(s.parts.seconds);
  // analysis/validation/summarize.py reads a step's compute from this comment (STEP_LINE).
  out << "# every pass x: the median of a step's timed parts (" << num(parts.median) << " s; p10 "
      << num(parts.p10) << ", p90 " << num(parts.p90) << ")\n# over the sum of their medians ("
      << num(sum_of_medians) << " s): right-skewed timings sum to more than their medians\n"
      << "compute_skew = " << num(compute_skew(parts.median, sum_of_medians)) << "\n";
  if (!s.rank_pace_s.empty()) {
    out << "# the ranks' paces, each running whole steps for " << num(kPaceWindowS)
        << " s, all at once: s per step";
    for (size_t r = 0; r < s.rank_pace_s.size(); ++r)
      out << (r ? ", " : " ") << num(s.rank_pace_s[r]);
    // Not set: on the validation's runs it overshot (README, "Unequal workers").
    out << "\n# the spread of workers' speeds (sd of their log) that their difference estimates, "
           "not set\n# (README, \"Unequal workers\"): worker_spread = "
        << num(worker_spread(s.rank_pace_s)) << "\n";
  }
  write_flops(out, s);
  out << "\n# Measured layer passes, seconds at these shapes (batch first); a pass whose layer\n"
         "# matches kind, input and output takes this time instead of the fallback speed.\n";
  for (const LayerSeries& layer : distinct_layers(s)) {
    const Spread f = spread(layer.forward.seconds), b = spread(layer.backward.seconds);
    out << "\n[[layer]]\nkind = \"" << layer.kind << "\"\ninput = " << shape_text(layer.input)
        << "\noutput = " << shape_text(layer.output) << "\nforward_s = " << num(f.median) << note(f)
        << "\nbackward_s = " << num(b.median) << note(b) << "\n";
  }
  if (!out) throw UserError("calibrate: cannot write " + path);
}

// The ping-pong medians through the communicator's schedules (as the simulated collectives send
// their messages) and the overheads' medians, fitted (app/calibrate_fit.hpp).
TransportFit fit_link(const TransportSamples& t) {
  std::vector<PingPongPoint> points;
  for (const TransportSeries& s : t.channel_ping_pong)
    points.push_back({static_cast<double>(s.bytes), spread(s.seconds).median});
  return fit_transport(points, spread(t.send_overhead.seconds).median,
                       spread(t.recv_overhead.seconds).median);
}

// The bandwidth factors, each with the size and median time it reproduces.
void write_bandwidth_factors(std::ostream& out, const TransportFit& fit) {
  out << "bandwidth_factor = [\n";
  for (size_t i = 0; i < fit.bandwidth_factor.size(); ++i) {
    const FactorEntry& e = fit.bandwidth_factor[i];
    const PingPongPoint& p = fit.points[i + 1];
    char line[160];
    std::snprintf(line, sizeof line, "  [%.0f, %s],  # %.0f B: %s s\n", e.from_bytes,
                  num(e.factor).c_str(), p.bytes, num(p.seconds).c_str());
    out << line;
  }
  out << "]\n";
}

// Every series of the transport after the overheads, in the order the tables list them.
std::vector<const std::vector<TransportSeries>*> measured(const TransportSamples& t) {
  std::vector<const std::vector<TransportSeries>*> lists{
      &t.ping_pong,   &t.channel_ping_pong, &t.channel_exchange, &t.turn,          &t.copy_pass,
      &t.reduce_pass, &t.scale_pass,        &t.divide_pass,      &t.solo_copy_pass};
  for (const WirePassSamples& passes : t.wire_passes)
    lists.insert(lists.end(), {&passes.encode, &passes.decode, &passes.reduce, &passes.round});
  lists.push_back(&t.collectives);
  return lists;
}

// A local pass's speeds, each with the size and median time it reproduces.
void write_speeds(std::ostream& out, const char* key, const std::vector<TransportSeries>& passes) {
  std::vector<PingPongPoint> points;
  for (const TransportSeries& s : passes)
    points.push_back({static_cast<double>(s.bytes), spread(s.seconds).median});
  const std::vector<FactorEntry> speeds = fit_speeds(points);
  out << key << " = [\n";
  for (size_t i = 0; i < speeds.size(); ++i) {
    char line[160];
    std::snprintf(line, sizeof line, "  [%.0f, %s],  # %.0f B: %s s\n", speeds[i].from_bytes,
                  num(speeds[i].factor).c_str(), points[i].bytes, num(points[i].seconds).c_str());
    out << line;
  }
  out << "]\n";
}

// The [network] table: overheads and the piecewise factors, each line with what it came from.
void write_network(std::ostream& out, const TransportSamples& t, const TransportFit& fit) {
  const Spread send = spread(t.send_overhead.seconds), recv = spread(t.recv_overhead.seconds);
  out << "[network]  # fitted to the channel's ping-pong, as SMPI's smpi/os, smpi/or, "
         "smpi/bw-factor and smpi/lat-factor\n"
      << "send_overhead = " << num(fit.send_overhead_s) << "  # s: a blocking 8 B send (eager); "
      << note(send).substr(4) << "\n"
      << "recv_overhead = " << num(fit.recv_overhead_s)
      << "  # s: receiving an 8 B message that has arrived; " << note(recv).substr(4) << "\n"
      << "# [from_bytes, factor]: a message of s bytes takes send_overhead + recv_overhead +\n"
      << "# gpu_link.latency + s / (gpu_link.bandwidth x bandwidth_factor(s)); each entry\n"
      << "# reproduces one channel_ping_pong size's median (lowered to any larger size's), from\n"
      << "# halfway (geometric mean) to the size before. latency_factor (same form) is 1: not\n"
      << "# fitted.\n";
  write_bandwidth_factors(out, fit);
  out << "# Local passes on a rank's memory, [from_bytes, bytes per second]: a pass of s bytes\n"
      << "# takes s / speed(s). Timed on rank 0 right after rank 1 received the buffer, as a\n"
      << "# collective's next call finds it: reduce_bandwidth adds a received segment into it,\n"
      << "# copy_bandwidth moves a contribution into place, and an average (kAvg) divides it by\n"
      << "# the rank count p: scale_bandwidth where p is a power of two (times 1/p, timed at 2),\n"
      << "# divide_bandwidth otherwise (timed at 3). solo_copy_bandwidth is the copy timed\n"
      << "# with no other rank touching the buffer, as a one-rank collective's copies run.\n"
      << "# Each entry is one size's median, from halfway (geometric mean) to the size before.\n";
  write_speeds(out, "reduce_bandwidth", t.reduce_pass);
  write_speeds(out, "copy_bandwidth", t.copy_pass);
  write_speeds(out, "scale_bandwidth", t.scale_pass);
  write_speeds(out, "divide_bandwidth", t.divide_pass);
  write_speeds(out, "solo_copy_bandwidth", t.solo_copy_pass);
  for (const WirePassSamples& passes : t.wire_passes) {
    if (passes.encode.empty()) continue;
    out << "\n[network." << to_string(passes.wire) << "]  # a collective in "
        << to_string(passes.wire)
        << " on the wire, in place of reduce_bandwidth: encode_bandwidth turns a segment into\n"
        << "# the format before its send, decode_bandwidth puts a received one into place,\n"
        << "# reduce_bandwidth adds one as it decodes it, round_bandwidth rounds a reduction's "
           "buffer\n"
        << "# before its first round. Bytes of floats (4 per element), as above.\n";
    write_speeds(out, "encode_bandwidth", passes.encode);
    write_speeds(out, "decode_bandwidth", passes.decode);
    write_speeds(out, "reduce_bandwidth", passes.reduce);
    write_speeds(out, "round_bandwidth", passes.round);
  }
  out << "\n";
}

// The exchanges against the one-way times at the same sizes, both through the communicator's
// schedules (app/calibrate_fit.hpp).
DuplexFit fit_link_duplex(const TransportSamples& t) {
  std::vector<PingPongPoint> one_way, both_ways;
  for (const TransportSeries& s : t.channel_ping_pong)
    one_way.push_back({static_cast<double>(s.bytes), spread(s.seconds).median});
  for (const TransportSeries& s : t.channel_exchange)
    both_ways.push_back({static_cast<double>(s.bytes), spread(s.seconds).median});
  return fit_duplex(one_way, both_ways);
}

void write_platform(const std::string& path, const std::string& profile, const Calibration& c) {
  std::ofstream out(path);
  if (!out) throw UserError("calibrate: cannot write " + path);
  write_header(out, c, "Platform of this machine");
  const TransportFit link = fit_link(c.transport);
  const int ranks = c.transport.ranks;
  // Ranks 0 and 1 on one host (the turn measured): their messages are the cores' copies.
  const bool shares_host = c.cores > 0 && !c.transport.turn.empty();
  const DuplexFit duplex = fit_link_duplex(c.transport);
  out << "name = \"" << c.name << "\"\n"
      << "description = \"this machine, calibrated: " << ranks
      << " MPI ranks on one node, shared-memory link, local master\"\n"
      << "topology = \"star\"\nnodes = 1\ngpus_per_node = " << ranks << "\nprofile = \"" << profile
      << "\"\n";
  if (c.cores > 0) {
    out << "cores_per_node = " << c.cores
        << "  # cores online: more workers than this on the node time-share them\n";
    const std::vector<TransportSeries>& turn = c.transport.turn;
    if (!turn.empty()) {  // on two cores, then on one
      const double apart = spread(turn[0].seconds).median;
      const double shared = spread(turn[1].seconds).median;
      out << "turn_latency = " << num(std::max(0.0, shared - apart))
          << "  # s: a round of the communicator's 2-rank allreduce of " << turn[1].bytes
          << " B with ranks 0 and 1 on one core, " << num(shared) << " s, less on two, "
          << num(apart) << " s: a message's wait for its receiver's turn on a core\n";
    }
    // Two copies at once, on two cores, take `ratio` times as long as one alone: each goes at
    // 1 / ratio of a lone message's speed, and so does each core's of cores_per_node (on a
    // machine of more than two cores, an extrapolation). Bounded to [1, 2]: two copies at once
    // go no faster than one each, and together no slower than one; beyond that, something else
    // took the cores.
    if (shares_host && duplex.sizes > 0) {
      const double ratio = std::clamp(duplex.ratio, 1.0, 2.0);
      char line[300];
      std::snprintf(line, sizeof line,
                    "  # B/s: cores_per_node x gpu_link.bandwidth / %.2f: an exchange took %.2fx "
                    "the one-way time (median over %zu sizes from 32 KiB; 1: two copies go as "
                    "fast as one each, 2: together no faster than one)\n",
                    ratio, duplex.ratio, duplex.sizes);
      out << "cores_bandwidth = " << num(c.cores * link.bandwidth_Bps / ratio) << line;
    }
  }
  out << "\n"
      << "[gpu_link]  # one way, end to end: ping-pong between ranks 0 and 1 through the "
         "communicator's schedules\n"
      << "bandwidth = " << num(link.bandwidth_Bps) << "  # B/s: the largest size's, effective\n"
      << "latency = " << num(link.latency_s)
      << "  # s: the two smallest sizes' line at 0 B, less the overheads\n";
  char ratio[200];
  std::snprintf(ratio, sizeof ratio,
                "  # an exchange took %.2fx the one-way time (median over %zu sizes from 32 KiB)\n",
                duplex.ratio, duplex.sizes);
  out << "duplex = \"" << (duplex.shared && !shares_host ? "shared" : "split") << "\""
      << (shares_host && duplex.sizes > 0
              ? "  # the two directions' sharing is the cores': cores_bandwidth\n"
              : (duplex.sizes > 0 ? ratio : "  # no exchange measured\n"))
      << "\n"
      << "[master]  # a process on the same machine: the same transport\n"
      << "bandwidth = " << num(link.bandwidth_Bps) << "\nlatency = " << num(link.latency_s)
      << "\nnode_bandwidth = " << num(link.bandwidth_Bps) << "\n\n"
      << "[calibrated_under]  # the MPI settings measured under: compare flags a measured run "
         "under others\n"
      << mpi_settings::kSingleCopy << " = " << (c.shared_memory_single_copy ? "true" : "false")
      << "  # btl_vader_single_copy_mechanism\n";
  if (c.mpi_yield_when_idle)
    out << mpi_settings::kYieldWhenIdle << " = " << (*c.mpi_yield_when_idle ? "true" : "false")
        << "\n";
  out << "\n";
  write_network(out, c.transport, link);
  out << "# Measured (seconds: ping_pong one way, exchange per exchange, a local pass per pass, a "
         "collective per call on the slowest rank):\n";
  for (const TransportSeries* s : {&c.transport.send_overhead, &c.transport.recv_overhead}) {
    const Spread sp = spread(s->seconds);
    out << "#   " << s->name << " " << s->bytes << " B: " << num(sp.median) << " s  ("
        << note(sp).substr(4) << ")\n";
  }
  for (const auto* list : measured(c.transport))
    for (const TransportSeries& s : *list) {
      const Spread sp = spread(s.seconds);
      out << "#   " << s.name << " " << s.bytes << " B: " << num(sp.median) << " s  ("
          << note(sp).substr(4) << ")\n";
    }
  if (!out) throw UserError("calibrate: cannot write " + path);
}

}  // namespace

std::string write_calibration(const Calibration& c, const std::string& platform_path) {
  const fs::path platform(platform_path);
  const std::string profile = c.name + "-cpu";
  const fs::path dir = platform.parent_path() / "profiles";
  fs::create_directories(dir);
  const std::string profile_path = (dir / (profile + ".toml")).string();
  write_profile(profile_path, profile, c);
  write_platform(platform_path, profile, c);
  return profile_path;
}

void print_calibration(const Calibration& c) {
  std::printf("%-34s %12s %12s %12s %6s\n", "figure (seconds)", "median", "p10", "p90", "n");
  auto row = [](const std::string& name, const std::vector<double>& seconds) {
    const Spread s = spread(seconds);
    std::printf("%-34s %12.4g %12.4g %12.4g %6zu\n", name.c_str(), s.median, s.p10, s.p90, s.n);
  };
  for (const LayerSeries& layer : c.compute.layers) {
    row(layer.kind + " " + shape_text(layer.input) + " fwd", layer.forward.seconds);
    row(layer.kind + " " + shape_text(layer.input) + " bwd", layer.backward.seconds);
  }
  for (const Series* s : {&c.compute.loss, &c.compute.zero_grad, &c.compute.optimizer,
                          &c.compute.overhead, &c.compute.parts})
    row(s->name, s->seconds);
  for (const TransportSeries* s : {&c.transport.send_overhead, &c.transport.recv_overhead})
    row(s->name + " " + std::to_string(s->bytes) + " B", s->seconds);
  for (const auto* list : measured(c.transport))
    for (const TransportSeries& s : *list)
      row(s.name + " " + std::to_string(s.bytes) + " B", s.seconds);
}

}  // namespace syncopate::app
