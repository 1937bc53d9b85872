// PowerSGD: the parameter matrices of a model, and the rank-r compression with error feedback.
#include "core/train/powersgd.hpp"

#include <algorithm>
#include <cmath>

#include "core/base/check.hpp"
#include "core/base/rng.hpp"
#include "core/tensor/gemm.hpp"

namespace syncopate {
namespace {

void add_matrix(std::vector<ParamTensor>& out, size_t& offset, int64_t rows, int64_t cols) {
  out.push_back({offset, static_cast<size_t>(rows), static_cast<size_t>(cols)});
  offset += static_cast<size_t>(rows * cols);
}
void add_vector(std::vector<ParamTensor>& out, size_t& offset, int64_t count) {
  if (count > 0) add_matrix(out, offset, count, 1);
}

// The tensors of one layer description from `offset` on, in the order its CPU layer binds them.
void tensors_of(const LayerSpec& l, size_t& offset, std::vector<ParamTensor>& out) {
  const bool bias = l.bias == Bias::kYes;
  switch (l.kind) {
    case LayerKind::kDense:
      add_matrix(out, offset, l.out, l.in);
      if (bias) add_vector(out, offset, l.out);
      return;
    case LayerKind::kConv2d:
      add_matrix(out, offset, l.out, l.in * l.kernel * l.kernel);
      if (bias) add_vector(out, offset, l.out);
      return;
    case LayerKind::kEmbedding:
      add_matrix(out, offset, l.in, l.out);
      if (l.positions > 0) add_matrix(out, offset, l.positions, l.out);
      return;
    case LayerKind::kAttention:
      add_matrix(out, offset, 3 * l.in, l.in);
      if (bias) add_vector(out, offset, 3 * l.in);
      add_matrix(out, offset, l.in, l.in);
      if (bias) add_vector(out, offset, l.in);
      return;
    case LayerKind::kSwiglu:
      if (bias) return;  // layout of its biases not known here: the caller's fallback
      for (int i = 0; i < 3; ++i) add_matrix(out, offset, l.width, l.in);
      return;
    case LayerKind::kLayerNorm:
    case LayerKind::kBatchNorm2d:
      add_vector(out, offset, l.in);  // scale, then shift
      add_vector(out, offset, l.in);
      return;
    case LayerKind::kRmsNorm:
      add_vector(out, offset, l.in);
      return;
    case LayerKind::kResidual:
      for (const LayerSpec& inner : l.layers) tensors_of(inner, offset, out);
      return;
    default:
      return;  // vectors or no parameters: the caller's fallback covers what is left
  }
}

}  // namespace

std::vector<ParamTensor> param_tensors(const ModelSpec& spec, const Model& model) {
  std::vector<ParamTensor> all;
  const bool same_layers = static_cast<int>(spec.layers.size()) == model.num_layers();
  for (int i = 0; i < model.num_layers(); ++i) {
    const BlockRange range = model.param_range(i);
    if (range.count == 0) continue;
    std::vector<ParamTensor> mine;
    size_t offset = range.offset;
    if (same_layers) tensors_of(spec.layers[static_cast<size_t>(i)], offset, mine);
    if (offset != range.offset + range.count) {  // unknown layout: one vector
      mine.clear();
      mine.push_back({range.offset, range.count, 1});
    }
    all.insert(all.end(), mine.begin(), mine.end());
  }
  return all;
}

PowerSgd::PowerSgd(std::vector<ParamTensor> tensors, int rank, uint64_t seed,
                   ErrorFeedback feedback)
    : feedback_(feedback), seed_(seed) {
  SYNC_CHECK(rank >= 1, "rank " << rank);
  size_t p_size = 0, q_size = 0;
  for (const ParamTensor& t : tensors) {
    if (t.rows < 2 || t.cols < 2) {
      vectors_.push_back(t);
      vector_count_ += t.count();
      continue;
    }
    const size_t r = std::min({t.rows, t.cols, static_cast<size_t>(rank)});
    matrices_.push_back({t.offset, t.rows, t.cols, r, p_size, q_size});
    p_size += t.rows * r;
    q_size += t.cols * r;
  }
  p_size_ = p_size;
  q_size_ = q_size;
}

// The factors and the first Q, on the first step that computes (never in cost-only runs, where
// a thousand workers' factors would not fit).
void PowerSgd::allocate() {
  if (p_.size() == p_size_ && q_.size() == q_size_ && vec_.size() == vector_count_) return;
  p_.resize(p_size_);
  q_.resize(q_size_);
  vec_.resize(vector_count_);
  for (size_t i = 0; i < matrices_.size(); ++i) {  // the same draw on every worker
    Rng rng({.seed = seed_, .purpose = RngPurpose::kPowerSgd, .extra = static_cast<uint32_t>(i)});
    const Matrix& mat = matrices_[i];
    for (size_t k = 0; k < mat.m * mat.r; ++k) q_[mat.q_offset + k] = rng.normal();
  }
}

void PowerSgd::save_state(ByteWriter& out) const {
  out.put_span<float>(error_);
  out.put_span<float>(q_);
}

void PowerSgd::restore_state(ByteReader& in) {
  error_ = in.get_vector<float>();
  std::vector<float> q = in.get_vector<float>();
  if (q.empty()) return;  // no step yet: the first one draws Q
  allocate();
  if (q.size() != q_.size())
    throw UserError("checkpoint: PowerSGD state of " + std::to_string(q.size()) +
                    " Q values where the model has " + std::to_string(q_.size()));
  q_ = std::move(q);
}

Cost PowerSgd::matrix_cost(double passes) const {
  double flops = 0, bytes = 0;
  for (const Matrix& mat : matrices_) {
    const double nm = static_cast<double>(mat.n * mat.m), r = static_cast<double>(mat.r);
    flops += passes * 2 * nm * r + (passes > 1 ? 4 * static_cast<double>(mat.n) * r * r : 0);
    bytes += passes * 4 * (nm + static_cast<double>(mat.n + mat.m) * r);
  }
  return {.flops = flops, .bytes = bytes, .kind = OpKind::kGemm};
}

// M += e, then P = M Q for every matrix.
void PowerSgd::compress(std::span<float> grads) {
  if (feedback_ == ErrorFeedback::kOn && error_.size() == grads.size())
    for (const Matrix& mat : matrices_)
      for (size_t k = mat.offset; k < mat.offset + mat.n * mat.m; ++k) grads[k] += error_[k];
  for (const Matrix& mat : matrices_) {
    const auto n = static_cast<int64_t>(mat.n), m = static_cast<int64_t>(mat.m),
               r = static_cast<int64_t>(mat.r);
    gemm(Trans::kNo, Trans::kNo, 1.0f, matrix(grads.subspan(mat.offset, mat.n * mat.m), n, m),
         matrix(std::span<const float>(q_).subspan(mat.q_offset, mat.m * mat.r), m, r), 0.0f,
         matrix(std::span(p_).subspan(mat.p_offset, mat.n * mat.r), n, r));
  }
}

// Gram-Schmidt on the columns of every P, each column orthogonalised twice against the ones
// before it, then normalised (epsilon keeps a zero column zero). PyTorch's single pass loses
// orthogonality once P is rank-deficient (a gradient of rank below r: a layer's gradient has at
// most the batch's rank), and P P^T M then strays from M; twice is enough (Giraud et al. 2005).
void PowerSgd::orthogonalise() {
  constexpr double kEpsilon = 1e-8;
  for (const Matrix& mat : matrices_) {
    float* p = p_.data() + mat.p_offset;
    const auto at = [&](size_t i, size_t j) -> float& { return p[i * mat.r + j]; };
    for (size_t j = 0; j < mat.r; ++j) {
      for (int pass = 0; pass < 2; ++pass)
        for (size_t k = 0; k < j; ++k) {
          double dot = 0;
          for (size_t i = 0; i < mat.n; ++i) dot += double{at(i, k)} * at(i, j);
          const auto d = static_cast<float>(dot);
          for (size_t i = 0; i < mat.n; ++i) at(i, j) -= d * at(i, k);
        }
      double norm = 0;
      for (size_t i = 0; i < mat.n; ++i) norm += double{at(i, j)} * at(i, j);
      const auto scale = static_cast<float>(1.0 / (std::sqrt(norm) + kEpsilon));
      for (size_t i = 0; i < mat.n; ++i) at(i, j) *= scale;
    }
  }
}

// Q = M^T P, and the residual e = M - P Q^T of this worker.
void PowerSgd::project(std::span<float> grads) {
  if (feedback_ == ErrorFeedback::kOn && error_.size() != grads.size())
    error_.assign(grads.size(), 0.0f);
  for (const Matrix& mat : matrices_) {
    const auto n = static_cast<int64_t>(mat.n), m = static_cast<int64_t>(mat.m),
               r = static_cast<int64_t>(mat.r);
    const std::span<const float> p =
        std::span<const float>(p_).subspan(mat.p_offset, mat.n * mat.r);
    const std::span<float> q = std::span(q_).subspan(mat.q_offset, mat.m * mat.r);
    gemm(Trans::kYes, Trans::kNo, 1.0f, matrix(grads.subspan(mat.offset, mat.n * mat.m), n, m),
         matrix(p, n, r), 0.0f, matrix(q, m, r));
    if (feedback_ == ErrorFeedback::kOff) continue;
    const std::span<float> e = std::span(error_).subspan(mat.offset, mat.n * mat.m);
    std::copy_n(grads.begin() + static_cast<std::ptrdiff_t>(mat.offset), mat.n * mat.m, e.begin());
    gemm(Trans::kNo, Trans::kYes, -1.0f, matrix(p, n, r), matrix(std::span<const float>(q), m, r),
         1.0f, matrix(e, n, m));
  }
}

// M = P Q^T with the allreduced Q.
void PowerSgd::decompress(std::span<float> grads) const {
  for (const Matrix& mat : matrices_) {
    const auto n = static_cast<int64_t>(mat.n), m = static_cast<int64_t>(mat.m),
               r = static_cast<int64_t>(mat.r);
    gemm(Trans::kNo, Trans::kYes, 1.0f,
         matrix(std::span<const float>(p_).subspan(mat.p_offset, mat.n * mat.r), n, r),
         matrix(std::span<const float>(q_).subspan(mat.q_offset, mat.m * mat.r), m, r), 0.0f,
         matrix(grads.subspan(mat.offset, mat.n * mat.m), n, m));
  }
}

void PowerSgd::reduce(std::span<float> grads, Communicator& comm, Executor& exec,
                      Algorithm algorithm, std::span<float> scratch) {
  const CollectiveOptions sum{.op = ReduceOp::kSum, .algorithm = algorithm};
  if (exec.cost_only()) {  // time only: three allreduces of the right sizes on scratch
    SYNC_CHECK(scratch.size() >= elements_per_step(),
               "scratch " << scratch.size() << " < " << elements_per_step());
    WorkPtr vectors = comm.allreduce_async(scratch.first(vector_count_), sum);
    exec.compute(matrix_cost(1), [] {});
    comm.allreduce(scratch.first(p_size_), sum);
    exec.compute(matrix_cost(2), [] {});
    comm.allreduce(scratch.first(q_size_), sum);
    exec.compute(matrix_cost(1), [] {});
    vectors->wait();
    return;
  }
  allocate();
  for (size_t i = 0, k = 0; i < vectors_.size(); k += vectors_[i++].count())
    std::copy_n(grads.begin() + static_cast<std::ptrdiff_t>(vectors_[i].offset),
                vectors_[i].count(), vec_.begin() + static_cast<std::ptrdiff_t>(k));
  WorkPtr vectors = comm.allreduce_async(vec_, sum);
  exec.compute(matrix_cost(1), [&] { compress(grads); });
  comm.allreduce(p_, sum);
  exec.compute(matrix_cost(2), [&] {
    orthogonalise();
    project(grads);
  });
  comm.allreduce(q_, sum);
  exec.compute(matrix_cost(1), [&] { decompress(grads); });
  vectors->wait();
  for (size_t i = 0, k = 0; i < vectors_.size(); k += vectors_[i++].count())
    std::copy_n(vec_.begin() + static_cast<std::ptrdiff_t>(k), vectors_[i].count(),
                grads.begin() + static_cast<std::ptrdiff_t>(vectors_[i].offset));
}

}  // namespace syncopate
