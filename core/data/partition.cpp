// The fixed, Dirichlet and shard partitions of a dataset over workers, their per-epoch order and
// class histograms.
#include "core/data/partition.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/base/check.hpp"
#include "core/data/ds_tensor.hpp"

namespace syncopate {
namespace {

// Sub-streams of RngPurpose::kPartition (the RngKey's `extra`).
constexpr uint32_t kFixedStream = 0, kShardStream = 1, kProportionStream = 2, kClassStream = 3;

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

void sort_each(Partition& p) {
  for (auto& samples : p.samples) std::sort(samples.begin(), samples.end());
}

// Gamma(a, 1), a > 0 (Marsaglia and Tsang; a < 1 through Gamma(a + 1) U^(1/a)).
double gamma_draw(Rng& rng, double a) {
  if (a < 1.0) return gamma_draw(rng, a + 1.0) * std::pow(rng.uniform_double(), 1.0 / a);
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = rng.normal(), v0 = 1.0 + c * x;
    if (v0 <= 0.0) continue;
    const double v = v0 * v0 * v0, u = rng.uniform_double();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (u > 0.0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

}  // namespace

std::vector<int> class_labels(const Dataset& data) {
  SYNC_CHECK(data.num_classes > 0 && data.y.numel() == data.size(),
             "class labels of " << data.name << ": " << data.num_classes << " classes, y of "
                                << data.y.numel() << " values for " << data.size() << " samples");
  std::vector<int> labels(static_cast<size_t>(data.size()));
  for (int64_t i = 0; i < data.size(); ++i) {
    labels[static_cast<size_t>(i)] = static_cast<int>(data.y.data()[i]);
    SYNC_CHECK(
        labels[static_cast<size_t>(i)] >= 0 && labels[static_cast<size_t>(i)] < data.num_classes,
        "label " << labels[static_cast<size_t>(i)] << " of sample " << i);
  }
  return labels;
}

Partition fixed_partition(int64_t n, int workers, uint64_t seed) {
  SYNC_CHECK(n >= 0 && workers >= 1, "n " << n << " workers " << workers);
  std::vector<int64_t> perm = iota(n);
  Rng rng({seed, 0, 0, RngPurpose::kPartition, kFixedStream});
  rng.shuffle(perm.data(), perm.size());
  Partition p;
  p.samples.resize(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w) {
    const auto [begin, end] = even_part(n, workers, w);
    p.samples[static_cast<size_t>(w)].assign(perm.begin() + begin, perm.begin() + end);
  }
  sort_each(p);
  return p;
}

std::vector<double> dirichlet_draw(Rng& rng, int k, double alpha) {
  SYNC_CHECK(k >= 1 && alpha > 0, "k " << k << " alpha " << alpha);
  std::vector<double> p(static_cast<size_t>(k));
  double sum = 0;
  for (double& x : p) sum += (x = gamma_draw(rng, alpha));
  if (!(sum > 0)) {
    std::fill(p.begin(), p.end(), 0.0);
    p[rng.below(static_cast<uint64_t>(k))] = 1.0;
    return p;
  }
  for (double& x : p) x /= sum;
  return p;
}

Partition dirichlet_partition(std::span<const int> labels, int num_classes, int workers,
                              double alpha, uint64_t seed) {
  SYNC_CHECK(num_classes >= 1 && workers >= 1 && alpha > 0,
             num_classes << " classes, " << workers << " workers, alpha " << alpha);
  std::vector<std::vector<int64_t>> of_class(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < labels.size(); ++i)
    of_class[static_cast<size_t>(labels[i])].push_back(static_cast<int64_t>(i));
  Partition p;
  p.samples.resize(static_cast<size_t>(workers));
  for (int c = 0; c < num_classes; ++c) {
    std::vector<int64_t>& members = of_class[static_cast<size_t>(c)];
    Rng order({seed, static_cast<uint32_t>(c), 0, RngPurpose::kPartition, kClassStream});
    order.shuffle(members.data(), members.size());
    Rng draw({seed, static_cast<uint32_t>(c), 0, RngPurpose::kPartition, kProportionStream});
    const std::vector<double> share = dirichlet_draw(draw, workers, alpha);
    // Worker w takes [round(n P_{w-1}), round(n P_w)) with P the cumulative shares.
    const auto n = static_cast<double>(members.size());
    double cumulative = 0;
    size_t begin = 0;
    for (int w = 0; w < workers; ++w) {
      cumulative += share[static_cast<size_t>(w)];
      const size_t end =
          w + 1 == workers
              ? members.size()
              : std::min(members.size(), static_cast<size_t>(std::llround(n * cumulative)));
      auto& mine = p.samples[static_cast<size_t>(w)];
      mine.insert(mine.end(), members.begin() + static_cast<std::ptrdiff_t>(begin),
                  members.begin() + static_cast<std::ptrdiff_t>(std::max(begin, end)));
      begin = std::max(begin, end);
    }
  }
  sort_each(p);
  return p;
}

Partition shards_partition(std::span<const int> labels, int workers, int64_t shards_per_worker,
                           uint64_t seed) {
  const auto n = static_cast<int64_t>(labels.size());
  const int64_t shards = int64_t{workers} * shards_per_worker;
  SYNC_CHECK(workers >= 1 && shards_per_worker >= 1 && shards <= n,
             workers << " workers x " << shards_per_worker << " shards for " << n << " samples");
  std::vector<int64_t> by_label = iota(n);
  std::stable_sort(by_label.begin(), by_label.end(), [&](int64_t a, int64_t b) {
    return labels[static_cast<size_t>(a)] < labels[static_cast<size_t>(b)];
  });
  std::vector<int64_t> deal = iota(shards);
  Rng rng({seed, 0, 0, RngPurpose::kPartition, kShardStream});
  rng.shuffle(deal.data(), deal.size());
  Partition p;
  p.samples.resize(static_cast<size_t>(workers));
  for (int64_t i = 0; i < shards; ++i) {
    const auto [begin, end] = even_part(n, shards, deal[static_cast<size_t>(i)]);
    auto& mine = p.samples[static_cast<size_t>(i / shards_per_worker)];
    mine.insert(mine.end(), by_label.begin() + begin, by_label.begin() + end);
  }
  sort_each(p);
  return p;
}

std::vector<int64_t> worker_epoch_order(const Partition& partition, int worker, uint64_t seed,
                                        uint32_t epoch, bool shuffle) {
  SYNC_CHECK(worker >= 0 && worker < partition.workers(),
             "worker " << worker << " of " << partition.workers());
  std::vector<int64_t> order = partition.samples[static_cast<size_t>(worker)];
  if (shuffle) {
    Rng rng({seed, static_cast<uint32_t>(worker), epoch, RngPurpose::kPartitionShuffle, 0});
    rng.shuffle(order.data(), order.size());
  }
  return order;
}

std::vector<std::vector<int64_t>> class_histogram(const Partition& partition,
                                                  std::span<const int> labels, int num_classes) {
  std::vector<std::vector<int64_t>> counts(
      partition.samples.size(), std::vector<int64_t>(static_cast<size_t>(num_classes), 0));
  for (size_t w = 0; w < partition.samples.size(); ++w)
    for (int64_t i : partition.samples[w]) {
      SYNC_CHECK(i >= 0 && static_cast<size_t>(i) < labels.size(), "sample " << i);
      ++counts[w][static_cast<size_t>(labels[static_cast<size_t>(i)])];
    }
  return counts;
}

std::string partitions_csv(const std::vector<std::vector<int64_t>>& histogram) {
  std::string out = "worker,class,count\n";
  for (size_t w = 0; w < histogram.size(); ++w)
    for (size_t c = 0; c < histogram[w].size(); ++c)
      out += std::to_string(w) + "," + std::to_string(c) + "," + std::to_string(histogram[w][c]) +
             "\n";
  return out;
}

}  // namespace syncopate
