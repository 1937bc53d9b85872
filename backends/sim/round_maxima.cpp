// RoundMaxima: a schedule's analytic duration, ring phases in closed form.
#include "backends/sim/round_maxima.hpp"

#include <algorithm>
#include <bit>

namespace syncopate::sim {
namespace {

// Maxima of ranges of a fixed array in O(1) each after O(n log n) (a sparse table).
class RangeMax {
 public:
  explicit RangeMax(std::vector<double> values) {
    levels_.push_back(std::move(values));
    for (size_t width = 2; width <= levels_[0].size(); width *= 2) {
      const std::vector<double>& below = levels_.back();
      std::vector<double> level(levels_[0].size() - width + 1);
      for (size_t i = 0; i < level.size(); ++i) level[i] = std::max(below[i], below[i + width / 2]);
      levels_.push_back(std::move(level));
    }
  }
  // The largest of values[first, first + count), count >= 1.
  double max(size_t first, size_t count) const {
    const size_t level = std::bit_width(count) - 1;
    const std::vector<double>& v = levels_[level];
    return std::max(v[first], v[first + count - (size_t{1} << level)]);
  }

 private:
  std::vector<std::vector<double>> levels_;  // level l: maxima of windows of 2^l values
};

}  // namespace

double& RoundMaxima::round(size_t k) {
  if (longest_.size() <= k) longest_.resize(k + 1, 0.0);
  return longest_[k];
}

double RoundMaxima::seconds(int from, int to, size_t count, RecvAction action, bool forwarded) {
  return seconds_(from, to, count) + (passes_ ? passes_(action, count, forwarded) : 0.0);
}

bool RoundMaxima::forwarded(const ScheduledMessage& m) const {
  const auto from = static_cast<size_t>(m.from);
  if (!forwarding_ || m.round == 0 || from >= received_.size()) return false;
  for (const Received& r : received_[from])
    if (r.round == m.round - 1)
      return r.action == RecvAction::kCopy && r.segment.offset == m.segment.offset &&
             r.segment.count == m.segment.count;
  return false;
}

void RoundMaxima::received(const ScheduledMessage& m) {
  if (!forwarding_) return;
  const auto to = static_cast<size_t>(m.to);
  if (received_.size() <= to) received_.resize(to + 1);
  std::array<Received, 2>& latest = received_[to];
  if (latest[0].round != m.round) latest[1] = latest[0];
  latest[0] = {m.round, m.segment, m.action};
}

void RoundMaxima::message(const ScheduledMessage& m) {
  double& longest = round(m.round);
  longest = std::max(longest, seconds(m.from, m.to, m.segment.count, m.action, forwarded(m)));
  received(m);
}

void RoundMaxima::ring(const RingPhase& phase) {
  const size_t m = phase.ring.size(), rounds = phase.rounds();
  if (rounds == 0) return;
  const size_t base = phase.segment.count / m, extra = phase.segment.count % m;
  // In a phase that copies, each rank sends on in round k the block it received in round k - 1.
  const bool forwards = forwarding_ && phase.action == RecvAction::kCopy;
  if (forwards) {  // the first round's senders encode: its longest message, pair by pair
    double& first = round(phase.round0);
    for (size_t i = 0; i < m; ++i) {
      const size_t block = (i + m - static_cast<size_t>(phase.shift) % m) % m;
      first = std::max(first, seconds(phase.ring[i], phase.ring[(i + 1) % m],
                                      base + (block < extra ? 1 : 0), phase.action, false));
    }
  }
  // Per pair i (twice over, so that a cyclic range is a plain one): a base-size block's time,
  // and a larger one's.
  std::vector<double> small(2 * m), large(extra > 0 ? 2 * m : 0);
  for (size_t i = 0; i < m; ++i) {
    const int from = phase.ring[i], to = phase.ring[(i + 1) % m];
    small[i] = small[i + m] = seconds(from, to, base, phase.action, forwards);
    if (extra > 0) large[i] = large[i + m] = seconds(from, to, base + 1, phase.action, forwards);
  }
  if (extra == 0) {  // every block alike: every round's longest is the longest pair's
    const double longest = *std::max_element(small.begin(), small.begin() + m);
    for (size_t k = 0; k < rounds; ++k)
      round(phase.round0 + k) = std::max(round(phase.round0 + k), longest);
    return;
  }
  const RangeMax small_max(std::move(small)), large_max(std::move(large));
  for (size_t k = 0; k < rounds; ++k) {
    // Pair i carries block (i - k - shift) mod m, of base + 1 elements when that is < extra.
    const size_t first = (k + static_cast<size_t>(phase.shift)) % m;
    const double longest =  // extra < m: some pairs carry base-size blocks
        std::max(large_max.max(first, extra), small_max.max(first + extra, m - extra));
    double& r = round(phase.round0 + k);
    r = std::max(r, longest);
  }
}

double RoundMaxima::total() const {
  double total = 0;
  for (double round : longest_) total += round;
  return total;
}

}  // namespace syncopate::sim
