#pragma once
// Evaluating a model on a test set: mean loss and, for classification, accuracy.
#include <string>

#include "core/data/data.hpp"
#include "core/nn/model.hpp"

namespace syncopate {

struct Evaluation {
  double accuracy = -1;  // -1 for regression
  double loss = 0;
};

// `loss` names the scenario's loss ("cross_entropy": classification, else regression).
Evaluation evaluate(Model& model, const Dataset& test, const std::string& loss);

}  // namespace syncopate
