// Bit-reproducibility: the same data must give the same bits wherever it sits in memory.
// (Vectorised reductions that peel to an aligned address do not: the summation order, and so
// the rounding, then depends on the address, and two runs of one scenario could differ.)
#include <gtest/gtest.h>

#include <vector>

#include "core/base/rng.hpp"
#include "core/tensor/gemm.hpp"

namespace syncopate {
namespace {

TEST(Determinism, RowAndColumnSumsDoNotDependOnAlignment) {
  const int64_t rows = 37, cols = 203;
  Rng rng({5});
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (float& v : values) v = rng.normal();
  std::vector<float> reference_rows, reference_cols;
  for (int shift = 0; shift < 16; ++shift) {
    std::vector<float> storage(values.size() + 16);
    std::copy(values.begin(), values.end(), storage.begin() + shift);
    const MatrixView a{storage.data() + shift, rows, cols, cols};
    std::vector<float> row_sums(static_cast<size_t>(rows)), col_sums(static_cast<size_t>(cols));
    add_row_sums(a, row_sums);
    add_column_sums(a, col_sums);
    if (shift == 0) {
      reference_rows = row_sums;
      reference_cols = col_sums;
      double check = 0;
      for (int64_t j = 0; j < cols; ++j) check += values[static_cast<size_t>(j)];
      EXPECT_NEAR(row_sums[0], check, 1e-4);
    } else {
      EXPECT_EQ(row_sums, reference_rows) << "shift " << shift;
      EXPECT_EQ(col_sums, reference_cols) << "shift " << shift;
    }
  }
}

}  // namespace
}  // namespace syncopate
