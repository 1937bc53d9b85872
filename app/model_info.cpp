// `syncopate model`: the per-layer summary of a zoo model or of a scenario's model.
#include "app/model_info.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "app/commands.hpp"
#include "core/base/data_dir.hpp"
#include "core/nn/model.hpp"
#include "core/nn/model_summary.hpp"
#include "core/scenario/model_definition.hpp"
#include "core/scenario/scenario.hpp"

namespace syncopate::app {

CLI::App* declare_model(CLI::App& cli, ModelOptions& o) {
  CLI::App* model = cli.add_subcommand(
      "model", "a model's layers: output shapes, parameters, FLOPs and activation bytes");
  model->add_option("model", o.model,
                    "a built-in model name, a scenario file or a shipped scenario");
  model->add_option("--set", o.sets, "override a scenario key: key.path=value (repeatable)");
  model->add_option("--batch", o.batch, "batch size (default: the scenario's batch_size)");
  model->add_flag("--toml", o.toml, "print the model as a scenario's [model] table instead");
  model->add_flag("--kinds", o.kinds,
                  "list the layer kinds a scenario may use and their parameters");
  return model;
}

int run_model(const ModelOptions& o) {
  if (o.kinds) {
    std::cout << layer_kinds_help();
    return 0;
  }
  if (o.model.empty()) throw UsageError("model: give a model name or a scenario (or --kinds)");
  ModelSpec spec;
  int64_t batch = Scenario{}.batch_size;
  if (is_zoo_name(o.model)) {
    if (!o.sets.empty()) throw UsageError("model: --set applies to a scenario, not to " + o.model);
    spec = zoo_spec(o.model);
  } else {
    std::string path;
    try {
      path = find_scenario(o.model);
    } catch (const UserError& e) {
      std::string names;
      for (const std::string& n : model_names()) names += (names.empty() ? "" : ", ") + n;
      throw UserError(std::string(e.what()) + "; nor is it a built-in model (" + names + ")");
    }
    const Scenario scenario = load_scenario(path, o.sets);
    spec = scenario.model.spec();
    batch = scenario.batch_size;
  }
  if (o.batch) {
    if (*o.batch <= 0) throw UsageError("model: --batch must be positive");
    batch = *o.batch;
  }
  if (o.toml) {
    toml::table model;
    write_model_definition(spec, model);
    toml::table root;
    root.insert("model", std::move(model));
    std::cout << "# " << spec.name << "\n" << root << "\n";
    return 0;
  }
  std::cout << format_summary(summarize_model(spec, batch));
  return 0;
}

}  // namespace syncopate::app
