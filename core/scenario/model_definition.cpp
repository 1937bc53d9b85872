// Models defined in a scenario: reading [[model.layers]] with shape inference, and writing a
// description back as such a definition.
#include "core/scenario/model_definition.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

struct KindParameters {
  LayerKind kind;
  std::vector<std::string> names;  // besides `kind`
};

// What each kind takes; the sizes it reads from its input (channels, features) are inferred.
const std::vector<KindParameters>& layer_parameters() {
  using enum LayerKind;
  static const std::vector<KindParameters> table = {
      {kDense, {"units", "bias"}},
      {kConv2d, {"filters", "kernel", "stride", "padding", "bias"}},
      {kMaxPool2d, {"size", "stride", "padding"}},
      {kAvgPool2d, {"size", "stride"}},
      {kGlobalAvgPool, {}},
      {kFlatten, {}},
      {kRelu, {}},
      {kSigmoid, {}},
      {kTanh, {}},
      {kGelu, {}},
      {kDropout, {"rate"}},
      {kLayerNorm, {}},
      {kRmsNorm, {}},
      {kBatchNorm2d, {}},
      {kEmbedding, {"vocabulary", "width", "positions"}},
      {kAttention, {"heads", "bias"}},
      {kSwiglu, {"hidden", "bias"}},
      {kTiedDense, {"vocabulary"}},
      {kResidual, {"layers"}},
      {kBottleneck, {"width", "filters", "stride"}},
      {kUnusedConv2d, {"filters", "kernel"}},
  };
  return table;
}

const KindParameters* parameters_of(LayerKind kind) {
  for (const KindParameters& k : layer_parameters()) {
    if (k.kind == kind) return &k;
  }
  return nullptr;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

std::string kind_names() {
  std::vector<std::string> names;
  for (const KindParameters& k : layer_parameters()) names.emplace_back(to_string(k.kind));
  return joined(names);
}

// One layer's table: typed parameters with errors naming file:line, the layer and the key.
class LayerReader {
 public:
  LayerReader(const toml::table& table, std::string file, std::string where, std::string path)
      : table_(table),
        file_(std::move(file)),
        fallback_(std::move(where)),
        path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    const toml::node* n = key.empty() ? nullptr : table_.get(key);
    const int line = static_cast<int>(n ? n->source().begin.line : table_.source().begin.line);
    const std::string at = line > 0 ? file_ + ":" + std::to_string(line) : fallback_;
    throw UserError(at + ": " + path_ + (key.empty() ? "" : "." + key) + ": " + what);
  }
  LayerKind kind() {
    const toml::node* n = table_.get("kind");
    if (n == nullptr || !n->is_string()) {
      fail(n ? "kind" : "", "expected kind = \"...\"; allowed: " + kind_names());
    }
    const std::string name = n->as_string()->get();
    const std::optional<LayerKind> kind = parse_layer_kind(name);
    if (!kind || parameters_of(*kind) == nullptr)
      fail("kind", "unknown layer kind '" + name + "'; allowed: " + kind_names());
    kind_ = *kind;
    path_ += " (" + name + ")";
    return *kind;
  }
  // Rejects keys the kind does not take.
  void check_known() const {
    const std::vector<std::string>& names = parameters_of(kind_)->names;
    for (auto&& [key, value] : table_) {
      const std::string k(key.str());
      if (k == "kind" || std::find(names.begin(), names.end(), k) != names.end()) continue;
      fail(k, "unknown parameter; " + std::string(to_string(kind_)) + " takes " + joined(names));
    }
  }
  int64_t integer(const std::string& key, std::optional<int64_t> fallback, int64_t min) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) {
      if (!fallback) missing(key);
      return *fallback;
    }
    if (!n->is_integer()) fail(key, "expected an integer");
    const int64_t value = n->as_integer()->get();
    if (value < min)
      fail(key, std::to_string(value) + " is out of range; allowed: >= " + std::to_string(min));
    return value;
  }
  Bias bias(bool fallback) const {
    const toml::node* n = table_.get("bias");
    if (n != nullptr && !n->is_boolean()) fail("bias", "expected true or false");
    return (n ? n->as_boolean()->get() : fallback) ? Bias::kYes : Bias::kNo;
  }
  double number(const std::string& key) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) missing(key);
    if (!n->is_number()) fail(key, "expected a number");
    return n->is_integer() ? static_cast<double>(n->as_integer()->get())
                           : n->as_floating_point()->get();
  }
  const toml::table& table() const { return table_; }
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  const std::string& where() const { return fallback_; }

 private:
  [[noreturn]] void missing(const std::string& key) const {
    fail(key, "required parameter is missing; " + std::string(to_string(kind_)) + " takes " +
                  joined(parameters_of(kind_)->names));
  }
  const toml::table& table_;
  std::string file_, fallback_, path_;
  LayerKind kind_ = LayerKind::kRelu;
};

std::vector<LayerSpec> read_layers(const toml::node* node, const LayerReader* parent,
                                   const std::string& file, const std::string& where,
                                   const std::string& path, Shape& shape);

// The layer's description, its sizes taken from the input shape.
LayerSpec describe(LayerReader& r, LayerKind kind, Shape& shape) {
  const int64_t last = shape.back();
  const int64_t channels = shape.size() == 4 ? shape[1] : 0;
  const auto window = [&](bool padded) {
    const int64_t size = r.integer("size", std::nullopt, 1);
    const int64_t stride = r.integer("stride", size, 1);
    const int64_t padding = padded ? r.integer("padding", 0, 0) : 0;
    if (2 * padding > size)
      r.fail("padding", "must be at most size / 2 (" + std::to_string(size / 2) + ")");
    return padded ? maxpool2d_spec(size, stride, padding) : avgpool2d_spec(size, stride);
  };
  using enum LayerKind;
  switch (kind) {
    case kDense:
      return dense_spec(last, r.integer("units", std::nullopt, 1), r.bias(true));
    case kConv2d:
      return conv2d_spec(channels, r.integer("filters", std::nullopt, 1),
                         r.integer("kernel", std::nullopt, 1), r.integer("stride", 1, 1),
                         r.integer("padding", 0, 0), r.bias(true));
    case kMaxPool2d:
      return window(true);
    case kAvgPool2d:
      return window(false);
    case kDropout: {
      const double rate = r.number("rate");
      if (!(rate >= 0.0 && rate < 1.0)) r.fail("rate", "must be in [0, 1)");
      return dropout_spec(static_cast<float>(rate));
    }
    case kLayerNorm:
      return layernorm_spec(last);
    case kRmsNorm:
      return rmsnorm_spec(last);
    case kBatchNorm2d:
      return batchnorm2d_spec(channels);
    case kEmbedding:
      return embedding_spec(r.integer("vocabulary", std::nullopt, 1),
                            r.integer("width", std::nullopt, 1), r.integer("positions", 0, 0));
    case kAttention: {
      const int64_t heads = r.integer("heads", std::nullopt, 1);
      if (last % heads != 0) {
        r.fail("heads", std::to_string(heads) + " heads do not divide the width " +
                            std::to_string(last) + " of the input");
      }
      return attention_spec(last, heads, r.bias(true));
    }
    case kSwiglu:
      return swiglu_spec(last, r.integer("hidden", std::nullopt, 1), r.bias(false));
    case kTiedDense:
      return tied_dense_spec(last, r.integer("vocabulary", std::nullopt, 1));
    case kResidual: {
      Shape inner = shape;
      return residual_spec(
          read_layers(r.table().get("layers"), &r, r.file(), r.where(), r.path(), inner));
    }
    case kBottleneck:
      return bottleneck_spec(channels, r.integer("width", std::nullopt, 1),
                             r.integer("filters", std::nullopt, 1), r.integer("stride", 1, 1));
    case kUnusedConv2d:
      return unused_conv2d_spec(channels, r.integer("filters", std::nullopt, 1),
                                r.integer("kernel", std::nullopt, 1));
    default:
      return {.kind = kind};  // relu, sigmoid, tanh, gelu, flatten, global_avgpool
  }
}

bool takes_images(LayerKind kind) {
  using enum LayerKind;
  return kind == kConv2d || kind == kMaxPool2d || kind == kAvgPool2d || kind == kGlobalAvgPool ||
         kind == kBatchNorm2d || kind == kBottleneck || kind == kUnusedConv2d;
}

// One layer: its description, checked against (and advancing) the shape.
LayerSpec read_layer(LayerReader& r, Shape& shape) {
  const LayerKind kind = r.kind();
  r.check_known();
  if (takes_images(kind) && shape.size() != 4)
    r.fail("", "expected input (B,C,H,W), got " + to_string(shape));
  LayerSpec spec;
  try {
    spec = describe(r, kind, shape);
    shape = output_shape(spec, shape);
  } catch (const UserError& e) {
    const std::string what = e.what();
    if (what.find(r.file()) == 0 || what.find(r.where()) == 0) throw;  // already placed
    r.fail("", what.substr(what.find(": ") == std::string::npos ? 0 : what.find(": ") + 2));
  }
  return spec;
}

std::vector<LayerSpec> read_layers(const toml::node* node, const LayerReader* parent,
                                   const std::string& file, const std::string& where,
                                   const std::string& path, Shape& shape) {
  const toml::array* array = node ? node->as_array() : nullptr;
  const auto fail = [&](const std::string& what) {
    if (parent) parent->fail("layers", what);
    throw UserError(where + ": " + what);
  };
  if (array == nullptr || array->empty()) fail("expected a non-empty array of layer tables");
  std::vector<LayerSpec> layers;
  for (size_t i = 0; i < array->size(); ++i) {
    const std::string at = path + (parent ? ".layers[" : "[") + std::to_string(i) + "]";
    const toml::table* table = array->get(i)->as_table();
    if (table == nullptr) fail(at + ": expected a table ({ kind = \"...\", ... })");
    LayerReader r(*table, file, where, at);
    layers.push_back(read_layer(r, shape));
  }
  return layers;
}

Shape read_input(TomlReader& reader) {
  const toml::node* node = reader.node("model.input");
  if (node == nullptr) reader.missing("model.input");
  const toml::array* array = node->as_array();
  Shape shape;
  for (size_t i = 0; array != nullptr && i < array->size(); ++i) {
    const std::optional<int64_t> dim = array->get(i)->value<int64_t>();
    if (!array->get(i)->is_integer() || !dim || *dim <= 0) break;
    shape.push_back(*dim);
  }
  if (array == nullptr || array->empty() || shape.size() != array->size())
    reader.fail("model.input", "expected one sample's shape, an array of positive integers");
  return shape;
}

}  // namespace

ModelSpec read_model_definition(TomlReader& reader, const std::string& name, int64_t batch) {
  ModelSpec spec{name, read_input(reader), {}};
  Shape shape{batch};
  shape.insert(shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  const toml::node* layers = reader.node("model.layers");
  if (layers == nullptr) reader.missing("model.layers");
  spec.layers = read_layers(layers, nullptr, reader.file(), reader.where("model.layers"),
                            "model.layers", shape);
  return spec;
}

namespace {

toml::table layer_table(const LayerSpec& s) {
  toml::table t;
  t.insert("kind", std::string(to_string(s.kind)));
  const bool bias = s.bias == Bias::kYes;
  using enum LayerKind;
  switch (s.kind) {
    case kDense:
      t.insert("units", s.out);
      t.insert("bias", bias);
      break;
    case kConv2d:
      t.insert("filters", s.out);
      t.insert("kernel", s.kernel);
      t.insert("stride", s.stride);
      t.insert("padding", s.padding);
      t.insert("bias", bias);
      break;
    case kMaxPool2d:
    case kAvgPool2d:
      t.insert("size", s.kernel);
      t.insert("stride", s.stride);
      if (s.kind == kMaxPool2d) t.insert("padding", s.padding);
      break;
    case kDropout:
      t.insert("rate", static_cast<double>(s.rate));
      break;
    case kEmbedding:
      t.insert("vocabulary", s.in);
      t.insert("width", s.out);
      t.insert("positions", s.positions);
      break;
    case kAttention:
      t.insert("heads", s.heads);
      t.insert("bias", bias);
      break;
    case kSwiglu:
      t.insert("hidden", s.width);
      t.insert("bias", bias);
      break;
    case kTiedDense:
      t.insert("vocabulary", s.out);
      break;
    case kResidual: {
      toml::array layers;
      for (const LayerSpec& layer : s.layers) layers.push_back(layer_table(layer));
      t.insert("layers", std::move(layers));
      break;
    }
    case kBottleneck:
      t.insert("width", s.width);
      t.insert("filters", s.out);
      t.insert("stride", s.stride);
      break;
    case kUnusedConv2d:
      t.insert("filters", s.out);
      t.insert("kernel", s.kernel);
      break;
    default:
      break;
  }
  return t;
}

}  // namespace

void write_model_definition(const ModelSpec& spec, toml::table& model) {
  toml::array input, layers;
  for (const int64_t dim : spec.sample_shape) input.push_back(dim);
  for (const LayerSpec& layer : spec.layers) layers.push_back(layer_table(layer));
  model.insert_or_assign("input", std::move(input));
  model.insert_or_assign("layers", std::move(layers));
}

std::string layer_kinds_help() {
  std::string out;
  for (const KindParameters& k : layer_parameters())
    out += std::string(to_string(k.kind)) + ": " + joined(k.names) + "\n";
  return out;
}

}  // namespace syncopate
