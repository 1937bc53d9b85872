// The Accelerator that runs a model's forward and backward passes on the CUDA device.
#include "backends/cuda/cuda_accelerator.hpp"

#include "backends/cuda/cuda_model.hpp"
#include "backends/cuda/device.hpp"
#include "core/base/check.hpp"
#include "core/nn/model.hpp"

namespace syncopate::cuda {
namespace {

class CudaAccelerator final : public Accelerator {
 public:
  // Built from the description the CPU model was built from. The trainer passes the CPU model's
  // own parameters and gradients every step: page-locked, their copies take a quarter of the
  // time. The CPU model outlives its accelerator (the trainer's worker owns both).
  explicit CudaAccelerator(const Model& model)
      : model_(CudaModel::from_cpu(model, *model.spec())),
        params_lock_(model.params().data(), model.params().size_bytes()),
        grads_lock_(model.grads().data(), model.grads().size_bytes()) {}

  LossResult forward_backward(std::span<const float> params, const Tensor& x, const Tensor& y,
                              bool classify, float grad_scale, const StepContext& ctx,
                              std::span<float> grads) override {
    model_->set_params(params);
    model_->set_batch(x.dim(0));
    model_->set_input(x.span());
    model_->forward(ctx);
    const LossResult r = classify ? model_->softmax_cross_entropy(y.span()) : model_->mse(y.span());
    model_->zero_grads();
    model_->backward();
    model_->get_grads(grads);
    // Backward is linear in the output gradient: scaling the result scales the loss.
    if (grad_scale != 1.0f)
      for (float& g : grads) g *= grad_scale;
    return r;
  }

  void forward(std::span<const float> params, const Tensor& x, const StepContext& ctx,
               Tensor& out) override {
    model_->set_params(params);
    model_->set_batch(x.dim(0));
    model_->set_input(x.span());
    model_->forward(ctx);
    const Shape shape = model_->output_shape();
    if (out.shape() != shape) out = Tensor(shape);
    model_->get_output(out.span());
  }

 private:
  std::unique_ptr<CudaModel> model_;
  PageLock params_lock_, grads_lock_;
};

}  // namespace

std::unique_ptr<Accelerator> make_cuda_accelerator(const Model& model) {
  if (!cuda_available())
    throw UserError("model.device = \"cuda\": no CUDA device is visible to this process");
  if (!model.spec()) {
    throw UserError("model.device = \"cuda\": model '" + model.name() +
                    "' has no description (ModelSpec) to build its CUDA model from");
  }
  return std::make_unique<CudaAccelerator>(model);
}

}  // namespace syncopate::cuda
