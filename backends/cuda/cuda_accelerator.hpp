#pragma once
// The CUDA implementation of core's Accelerator (model.device = "cuda").
#include <memory>

#include "core/nn/accelerator.hpp"
#include "core/nn/model.hpp"

namespace syncopate::cuda {

// Throws UserError when no CUDA device is present or the model has no device layer list.
std::unique_ptr<Accelerator> make_cuda_accelerator(const Model& model);

}  // namespace syncopate::cuda
