// Reading a host profile's measured layers ([[layer]] tables).
#include "backends/sim/platform/profile_layers.hpp"

#include <cmath>
#include <set>

#include "core/base/check.hpp"

namespace syncopate::sim::detail {
namespace {

struct Item {
  const TomlReader& reader;
  const toml::table& table;
  std::string where;  // "file:line: layer[i]"

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw UserError(where + "." + field + ": " + what);
  }
  const toml::node& get(const std::string& field) const {
    const toml::node* node = table.get(field);
    if (node == nullptr) fail(field, "required key is missing");
    return *node;
  }
  std::vector<int64_t> shape(const std::string& field) const {
    const toml::array* array = get(field).as_array();
    if (array == nullptr || array->empty()) fail(field, "expected a shape like [64, 784]");
    std::vector<int64_t> out;
    for (const toml::node& dim : *array) {
      if (!dim.is_integer() || dim.as_integer()->get() < 0)
        fail(field, "expected a shape of integers >= 0, like [64, 784]");
      out.push_back(dim.as_integer()->get());
    }
    return out;
  }
  double seconds(const std::string& field) const {
    const std::optional<double> value = get(field).value<double>();
    if (!value || !std::isfinite(*value) || *value < 0)
      fail(field, "expected seconds (a number >= 0)");
    return *value;
  }
};

LayerTime read_one(const Item& item) {
  static const std::set<std::string> kFields = {"kind", "input", "output", "forward_s",
                                                "backward_s"};
  for (auto&& [name, value] : item.table)
    if (!kFields.contains(std::string(name.str())))
      item.fail(std::string(name.str()),
                "unknown key; known here: kind, input, output, forward_s, backward_s");
  LayerTime layer;
  const std::optional<std::string> kind = item.get("kind").value<std::string>();
  if (!kind || kind->empty()) item.fail("kind", "expected a layer kind, e.g. \"dense\"");
  layer.kind = *kind;
  layer.input = item.shape("input");
  layer.output = item.shape("output");
  layer.forward_s = item.seconds("forward_s");
  layer.backward_s = item.seconds("backward_s");
  return layer;
}

}  // namespace

std::vector<LayerTime> read_layer_times(TomlReader& reader, const std::string& key) {
  std::vector<LayerTime> layers;
  const toml::node* node = reader.node(key);
  if (node == nullptr) return layers;
  const toml::array* array = node->as_array();
  if (array == nullptr) reader.fail(key, "expected [[" + key + "]] tables");
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& entry = *array->get(i);
    const std::string where = reader.file() + ":" + std::to_string(entry.source().begin.line) +
                              ": " + key + "[" + std::to_string(i) + "]";
    const toml::table* table = entry.as_table();
    if (table == nullptr) throw UserError(where + ": expected a table");
    layers.push_back(read_one(Item{reader, *table, where}));
    for (size_t j = 0; j + 1 < layers.size(); ++j) {
      const LayerTime& a = layers[j];
      if (a.kind == layers.back().kind && a.input == layers.back().input &&
          a.output == layers.back().output)
        throw UserError(where + ": the same kind, input and output as " + key + "[" +
                        std::to_string(j) + "]");
    }
  }
  return layers;
}

}  // namespace syncopate::sim::detail
