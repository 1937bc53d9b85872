#pragma once
// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
//
// A stream is keyed by (seed, worker, epoch, purpose); the n-th number of a stream depends only
// on the key and n, so any worker can reproduce any other's numbers, in any order, and results
// do not depend on how work is split or scheduled. Integer and uniform outputs are bit-identical
// on every platform; normal() goes through log/cos of the C library.
#include <array>
#include <cstdint>

namespace syncopate {

enum class RngPurpose : uint32_t {
  kInit = 1,
  kBlockPermutation = 2,
  kInBlockShuffle = 3,
  kGlobalPermutation = 4,
  kDropout = 5,
  kSynthetic = 6,
  kGlobalShuffle = 7,
  kComputeNoise = 8,
  kPartition = 9,          // data.partition: which samples each worker holds
  kPartitionShuffle = 10,  // a worker's partition, reordered per epoch
  kTestSplit = 11,         // csv: the rows held out for testing
  kPowerSgd = 12,          // PowerSGD's initial Q, drawn alike on every worker
  kWorkerSpeed = 13,       // the simulator: which worker gets which speed (worker_spread)
};

struct RngKey {
  uint64_t seed = 0;
  uint32_t worker = 0;
  uint32_t epoch = 0;
  RngPurpose purpose = RngPurpose::kInit;
  uint32_t extra = 0;  // e.g. layer index, block index
};

// The raw Philox4x32-10 block function.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

class Rng {
 public:
  explicit Rng(const RngKey& key);

  uint32_t next_u32();
  uint64_t next_u64();
  float uniform();          // [0, 1), 24 random bits
  double uniform_double();  // [0, 1), 53 random bits
  float uniform(float lo, float hi);
  float normal();                  // standard normal (Box-Muller)
  uint64_t below(uint64_t bound);  // uniform in [0, bound), unbiased (rejection)
  // Fisher-Yates shuffle of [first, first + n).
  template <typename T>
  void shuffle(T* first, uint64_t n) {
    for (uint64_t i = n; i > 1; --i) {
      const uint64_t j = below(i);
      T tmp = first[i - 1];
      first[i - 1] = first[j];
      first[j] = tmp;
    }
  }

 private:
  void refill();
  std::array<uint32_t, 2> key_{};
  std::array<uint32_t, 4> counter_{};
  std::array<uint32_t, 4> buffer_{};
  int used_ = 4;
};

}  // namespace syncopate
