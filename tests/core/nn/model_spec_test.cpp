// Model descriptions: the description-level counts and shapes agree with the CPU layers they
// describe, and make_model builds (and keeps) the description.
#include "core/nn/model_spec.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/base/check.hpp"
#include "core/nn/model.hpp"

namespace syncopate {
namespace {

TEST(ModelSpec, CountsAndShapesAgreeWithTheCpuLayersOfEveryZooModel) {
  for (const std::string& name : model_names()) {
    const ModelSpec spec = zoo_spec(name);
    Shape shape = {2};
    shape.insert(shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
    for (size_t i = 0; i < spec.layers.size(); ++i) {
      const std::unique_ptr<Layer> layer = make_layer(spec.layers[i]);
      const bool bottleneck = spec.layers[i].kind == LayerKind::kBottleneck;
      EXPECT_EQ(layer->kind(), bottleneck ? "residual" : to_string(spec.layers[i].kind))
          << name << " layer " << i;
      EXPECT_EQ(num_params(spec.layers[i]), layer->num_params()) << name << " layer " << i;
      const Shape next = output_shape(spec.layers[i], shape);
      EXPECT_EQ(next, layer->output_shape(shape)) << name << " layer " << i;
      shape = next;
    }
  }
}

TEST(ModelSpec, MakeModelBuildsTheDescriptionAndKeepsIt) {
  for (const std::string& name : model_names()) {
    const ModelSpec spec = zoo_spec(name);
    const auto model = make_model(spec, Storage::kShapeOnly);
    ASSERT_TRUE(model->spec().has_value());
    EXPECT_EQ(model->spec()->layers.size(), spec.layers.size());
    EXPECT_EQ(model->name(), name);
    EXPECT_EQ(model->sample_shape(), spec.sample_shape);
    ASSERT_EQ(model->num_layers(), static_cast<int>(spec.layers.size()));
    int64_t params = 0;
    for (const LayerSpec& layer : spec.layers) params += num_params(layer);
    EXPECT_EQ(model->num_params(), params) << name;
  }
  // A model made from a layer list has no description.
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(dense(4, 2));
  EXPECT_FALSE(Model("list", {4}, std::move(layers)).spec().has_value());
}

TEST(ModelSpec, SameDescriptionSameParameters) {
  const auto by_name = make_model("cnn");
  const auto by_spec = make_model(zoo_spec("cnn"));
  by_name->init(7);
  by_spec->init(7);
  ASSERT_EQ(by_name->num_params(), by_spec->num_params());
  EXPECT_TRUE(
      std::equal(by_name->params().begin(), by_name->params().end(), by_spec->params().begin()));
}

TEST(ModelSpec, KindNamesRoundTripAndFactoriesCheckTheirValues) {
  for (const std::string& name : model_names()) {
    for (const LayerSpec& layer : zoo_spec(name).layers) {
      EXPECT_EQ(parse_layer_kind(to_string(layer.kind)), layer.kind);
    }
  }
  EXPECT_FALSE(parse_layer_kind("lstm").has_value());
  EXPECT_THROW(dense_spec(0, 10), UserError);
  EXPECT_THROW(conv2d_spec(3, 8, 3, 0), UserError);
  EXPECT_THROW(maxpool2d_spec(2, 2, -1), UserError);
  EXPECT_THROW(dropout_spec(1.0f), UserError);
  EXPECT_THROW(bottleneck_spec(64, 0, 256, 1), UserError);
  EXPECT_THROW(output_shape(dense_spec(10, 2), {4, 11}), UserError);
  EXPECT_THROW(zoo_spec("vgg"), UserError);
}

}  // namespace
}  // namespace syncopate
