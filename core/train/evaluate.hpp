#pragma once
// Evaluating a model on a test set: mean loss and, for classification, accuracy; for regression
// MSE, MAE, R² and Pearson r in the targets' own units.
#include <string>

#include "core/data/data.hpp"
#include "core/nn/accelerator.hpp"
#include "core/nn/loss.hpp"
#include "core/nn/model.hpp"
#include "core/scenario/choices.hpp"

namespace syncopate {

struct Evaluation {
  double accuracy = -1;      // -1 for regression
  double loss = 0;           // the training loss, on the (scaled) targets the model is trained on
  RegressionMetrics errors;  // regression only: predictions and targets unscaled first
};

// Cross-entropy is classification (accuracy and loss), any other loss regression. With an
// accelerator the forward passes run on its device, from the model's parameters.
Evaluation evaluate(Model& model, const Dataset& test, const LossChoice& loss,
                    Accelerator* accelerator = nullptr);

}  // namespace syncopate
