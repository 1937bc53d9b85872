// Tensor: shapes, owning and shape-only tensors, views, copies and moves.
#include "core/tensor/tensor.hpp"

#include <algorithm>
#include <sstream>

#include "core/base/check.hpp"

namespace syncopate {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    SYNC_CHECK(d >= 0, "negative dimension in " << to_string(shape));
    n *= d;
  }
  return n;
}

std::string to_string(const Shape& shape) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? "," : "") << shape[i];
  out << ")";
  return out.str();
}

Tensor::Tensor(Shape shape) : shape_(std::move(shape)), numel_(syncopate::numel(shape_)) {
  storage_.assign(static_cast<size_t>(numel_), 0.0f);
  data_ = storage_.data();
}

Tensor::Tensor(Shape shape, std::vector<float> values)
    : shape_(std::move(shape)), numel_(syncopate::numel(shape_)), storage_(std::move(values)) {
  SYNC_CHECK(static_cast<int64_t>(storage_.size()) == numel_,
             storage_.size() << " values for shape " << to_string(shape_));
  data_ = storage_.data();
}

Tensor Tensor::shape_only(Shape shape) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = syncopate::numel(t.shape_);
  t.kind_ = Kind::kShapeOnly;
  return t;
}

Tensor Tensor::view(Shape shape, float* data) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = syncopate::numel(t.shape_);
  t.kind_ = Kind::kView;
  t.data_ = data;
  return t;
}

Tensor::Tensor(const Tensor& other)
    : shape_(other.shape_), numel_(other.numel_), kind_(other.kind_), storage_(other.storage_) {
  data_ = kind_ == Kind::kOwning ? storage_.data() : other.data_;
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  shape_ = other.shape_;
  numel_ = other.numel_;
  kind_ = other.kind_;
  storage_ = other.storage_;
  data_ = kind_ == Kind::kOwning ? storage_.data() : other.data_;
  return *this;
}

Tensor::Tensor(Tensor&& other) noexcept
    : shape_(std::move(other.shape_)),
      numel_(other.numel_),
      kind_(other.kind_),
      storage_(std::move(other.storage_)),
      data_(kind_ == Kind::kOwning ? storage_.data() : other.data_) {
  other.numel_ = 0;
  other.data_ = nullptr;
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this == &other) return *this;
  shape_ = std::move(other.shape_);
  numel_ = other.numel_;
  kind_ = other.kind_;
  storage_ = std::move(other.storage_);
  data_ = kind_ == Kind::kOwning ? storage_.data() : other.data_;
  other.numel_ = 0;
  other.data_ = nullptr;
  return *this;
}

void Tensor::resize(const Shape& shape) {
  const int64_t n = syncopate::numel(shape);
  switch (kind_) {
    case Kind::kShapeOnly:
      break;
    case Kind::kView:
      SYNC_CHECK(n == numel_,
                 "cannot resize a view from " << to_string(shape_) << " to " << to_string(shape));
      break;
    case Kind::kOwning:
      if (static_cast<size_t>(n) > storage_.size()) storage_.resize(static_cast<size_t>(n));
      data_ = storage_.data();
      break;
  }
  shape_ = shape;
  numel_ = n;
}

void Tensor::reshape(const Shape& shape) {
  SYNC_CHECK(syncopate::numel(shape) == numel_,
             "reshape " << to_string(shape_) << " to " << to_string(shape));
  shape_ = shape;
}

void Tensor::fill(float value) {
  if (data_) std::fill(data_, data_ + numel_, value);
}

}  // namespace syncopate
