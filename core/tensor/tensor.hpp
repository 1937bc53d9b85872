#pragma once
// n-dimensional float tensor: row-major, contiguous.
//
// Three kinds:
//   owning     - holds its storage (zero-filled on construction);
//   view       - points into storage owned elsewhere (e.g. a slice of a model's flat buffer);
//   shape-only - no storage at all; the model code then yields shapes and costs without
//                arithmetic (the simulator's cost-only mode).
// Copying an owning tensor copies its data; copying a view copies the pointer.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace syncopate {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& shape);
std::string to_string(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape);  // owning, zero-filled
  Tensor(Shape shape, std::vector<float> values);

  static Tensor shape_only(Shape shape);
  static Tensor view(Shape shape, float* data);

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor() = default;

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int axis) const { return shape_[static_cast<size_t>(axis)]; }
  int64_t numel() const { return numel_; }
  bool shape_only() const { return kind_ == Kind::kShapeOnly; }
  bool is_view() const { return kind_ == Kind::kView; }

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::span<float> span() { return {data_, static_cast<size_t>(data_ ? numel_ : 0)}; }
  std::span<const float> span() const { return {data_, static_cast<size_t>(data_ ? numel_ : 0)}; }
  float& operator[](int64_t i) { return data_[i]; }
  float operator[](int64_t i) const { return data_[i]; }

  // Changes the shape. An owning tensor reallocates only when it must grow (contents are then
  // unspecified); a shape-only tensor stays shape-only; a view must keep its element count.
  void resize(const Shape& shape);
  // Same storage, new shape with the same element count.
  void reshape(const Shape& shape);
  void fill(float value);

 private:
  enum class Kind { kOwning, kView, kShapeOnly };
  Shape shape_;
  int64_t numel_ = 0;
  Kind kind_ = Kind::kOwning;
  std::vector<float> storage_;
  float* data_ = nullptr;
};

}  // namespace syncopate
