#pragma once
// Data partitions for federated and non-IID studies: which samples each worker trains on.
//
// Every partition is a pure function of its arguments (the seed among them), computed once per
// run: each of W workers (or MPI rank) computes all of them on its own and all agree.
//   fixed      worker w holds the w-th nearly even contiguous share of one seed-fixed
//              permutation of the N samples (shares differ by at most one sample);
//   dirichlet  Hsu et al. 2019: per class c, proportions p_c ~ Dir(alpha, ..., alpha) over the
//              workers, and class c's samples (in a seeded order) split by them; small alpha
//              gives each worker few classes, large alpha tends to iid;
//   shards     McMahan et al. 2017: the samples sorted by label (ties by index), cut into W * k
//              nearly even shards, and worker w gets shards perm[w k .. w k + k) of a seeded
//              permutation of the shards.
// Each worker's samples are held in ascending index order; the order it trains them in per
// epoch is worker_epoch_order() (RngPurpose::kPartitionShuffle, keyed by seed, worker, epoch).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/base/rng.hpp"
#include "core/data/data.hpp"

namespace syncopate {

// The samples of each worker: samples[w] holds dataset indices, ascending. Every sample of the
// dataset is in exactly one worker's list.
struct Partition {
  std::vector<std::vector<int64_t>> samples;
  int workers() const { return static_cast<int>(samples.size()); }
};

// The class index of every sample of a classification dataset (y holds them as floats).
std::vector<int> class_labels(const Dataset& data);

Partition fixed_partition(int64_t n, int workers, uint64_t seed);
// alpha > 0; labels in 0..num_classes-1.
Partition dirichlet_partition(std::span<const int> labels, int num_classes, int workers,
                              double alpha, uint64_t seed);
// 1 <= workers * shards_per_worker <= labels.size().
Partition shards_partition(std::span<const int> labels, int workers, int64_t shards_per_worker,
                           uint64_t seed);

// One draw of Dir(alpha, ..., alpha) over k parts (Gamma draws by Marsaglia and Tsang 2000,
// normalised); sums to 1. When every Gamma draw underflows (tiny alpha), all of the mass goes
// to one part drawn uniformly, the distribution's limit.
std::vector<double> dirichlet_draw(Rng& rng, int k, double alpha);

// Worker w's samples in the order it trains them in epoch `epoch`: its list shuffled
// (RngPurpose::kPartitionShuffle, keyed by seed, worker and epoch) or as held.
std::vector<int64_t> worker_epoch_order(const Partition& partition, int worker, uint64_t seed,
                                        uint32_t epoch, bool shuffle);

// counts[w][c]: how many samples of class c worker w holds.
std::vector<std::vector<int64_t>> class_histogram(const Partition& partition,
                                                  std::span<const int> labels, int num_classes);
// "worker,class,count" and one row per (worker, class), zeros included, workers then classes.
std::string partitions_csv(const std::vector<std::vector<int64_t>>& histogram);

}  // namespace syncopate
