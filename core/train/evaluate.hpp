#pragma once
// Evaluating a model on a test set: mean loss and, for classification, accuracy.
#include <string>

#include "core/data/data.hpp"
#include "core/nn/model.hpp"
#include "core/scenario/choices.hpp"

namespace syncopate {

struct Evaluation {
  double accuracy = -1;  // -1 for regression
  double loss = 0;
};

// Cross-entropy is classification (accuracy and loss), any other loss regression (loss only).
Evaluation evaluate(Model& model, const Dataset& test, LossKind loss);

}  // namespace syncopate
