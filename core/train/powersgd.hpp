#pragma once
// PowerSGD (Vogels et al., NeurIPS 2019; PyTorch's powerSGD_hook): ddp's gradients sent as
// rank-r factors. Per parameter matrix M (n x m, a tensor reshaped to (shape[0], rest)):
//   M += e;  P = M Q;  allreduce(P);  orthogonalise P (Gram-Schmidt);  Q = M^T P;
//   e = M - P Q^T (this worker's residual, the error feedback added to its next gradient);
//   allreduce(Q);  M = P Q^T.
// Q starts from a seeded normal draw that every worker makes alike (RngPurpose::kPowerSgd) and
// is warm-started from the previous step's allreduced Q. Vectors (biases, norms) are summed
// uncompressed, as PyTorch does. r = min(n, m, strategy.powersgd_rank). Each step runs three
// allreduces: the vectors, every P, every Q: (n + m) r elements per matrix.
//
// Every worker holds its share of the gradient (ddp's gradient_scale), so the allreduces sum:
// the applied update P Q^T approximates the mean gradient, identically on every worker.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/base/bytes.hpp"
#include "core/comm/comm.hpp"
#include "core/nn/model.hpp"
#include "core/nn/model_spec.hpp"

namespace syncopate {

// One parameter tensor of the flat buffer: a rows x cols matrix, or a vector (cols == 1).
struct ParamTensor {
  size_t offset = 0, rows = 0, cols = 1;
  size_t count() const { return rows * cols; }
};
// The tensors of a model built from `spec`, in buffer order (dense and conv2d weights, embedding
// tables, attention and swiglu projections are matrices; the rest are vectors). A layer whose
// layout is not known here is one vector.
std::vector<ParamTensor> param_tensors(const ModelSpec& spec, const Model& model);

enum class ErrorFeedback { kOn, kOff };

// What ddp needs to build its PowerSgd once it has the model.
struct PowerSgdSettings {
  ModelSpec spec;
  int rank = 1;
  uint64_t seed = 0;
};

class PowerSgd {
 public:
  PowerSgd(std::vector<ParamTensor> tensors, int rank, uint64_t seed,
           ErrorFeedback feedback = ErrorFeedback::kOn);
  // Replaces grads (this worker's share) by the approximation of the sum over comm's workers.
  // Cost-only: no arithmetic; the allreduces run on `scratch` (at least elements_per_step()
  // floats), and the matrix products are charged to exec.
  void reduce(std::span<float> grads, Communicator& comm, Executor& exec, Algorithm algorithm,
              std::span<float> scratch = {});
  // Elements each step allreduces: sum of (n + m) r over the matrices, plus the vectors.
  size_t elements_per_step() const { return p_size_ + q_size_ + vector_count_; }
  // Floats it holds once it has run a step on a gradient buffer of `grads` floats: the error
  // feedback (one per gradient, with ErrorFeedback::kOn), every P and Q, the packed vectors.
  size_t state_floats(size_t grads) const {
    return (feedback_ == ErrorFeedback::kOn ? grads : 0) + elements_per_step();
  }
  // Checkpoints: what one step hands the next, the error feedback and every Q (both empty
  // before the first step).
  void save_state(ByteWriter& out) const;
  void restore_state(ByteReader& in);

 private:
  struct Matrix {
    size_t offset, n, m, r, p_offset, q_offset;
  };
  void allocate();
  void compress(std::span<float> grads);
  void orthogonalise();
  void project(std::span<float> grads);
  void decompress(std::span<float> grads) const;
  Cost matrix_cost(double passes) const;

  std::vector<Matrix> matrices_;
  std::vector<ParamTensor> vectors_;
  size_t vector_count_ = 0, p_size_ = 0, q_size_ = 0;
  ErrorFeedback feedback_;
  uint64_t seed_;
  std::vector<float> error_;        // per matrix element (offsets as in grads); empty: none yet
  std::vector<float> p_, q_, vec_;  // every P, every Q, the packed vectors
};

}  // namespace syncopate
