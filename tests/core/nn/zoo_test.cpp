// The zoo: parameter counts, output shapes, FLOPs against closed forms, unknown names.
#include <gtest/gtest.h>

#include "core/base/check.hpp"
#include "core/nn/model.hpp"

namespace syncopate {
namespace {

TEST(Zoo, ParameterCounts) {
  // mlp: 784*256+256 + 256*128+128 + 128*10+10.
  EXPECT_EQ(make_model("mlp", Storage::kShapeOnly)->num_params(), 235146);
  // cnn: 1*32*9+32 + 32*64*9+64 + 3136*128+128 + 128*10+10.
  EXPECT_EQ(make_model("cnn", Storage::kShapeOnly)->num_params(), 421642);
  EXPECT_EQ(make_model("nfnet", Storage::kShapeOnly)->num_params(), 19883722);
  EXPECT_EQ(make_model("nfnet_full", Storage::kShapeOnly)->num_params(), 20581962);
  // torchvision.models.resnet50(): sum(p.numel() for p in parameters()).
  EXPECT_EQ(make_model("resnet50", Storage::kShapeOnly)->num_params(), 25557032);
}

TEST(Zoo, OutputShapes) {
  EXPECT_EQ(make_model("mlp", Storage::kShapeOnly)->output_shape(4), (Shape{4, 10}));
  EXPECT_EQ(make_model("cnn", Storage::kShapeOnly)->output_shape(4), (Shape{4, 10}));
  EXPECT_EQ(make_model("nfnet", Storage::kShapeOnly)->output_shape(4), (Shape{4, 10}));
  EXPECT_EQ(make_model("resnet50", Storage::kShapeOnly)->output_shape(4), (Shape{4, 1000}));
}

// ResNet-50 is ~4.1 G multiply-adds per 224x224 image in its convolutions and classifier.
TEST(Zoo, ResNet50ForwardFlops) {
  auto model = make_model("resnet50", Storage::kShapeOnly);
  model->set_batch(2);
  double conv_dense = 0;
  for (int i = 0; i < model->num_layers(); ++i) {
    const Cost c = model->forward_cost(i);
    if (c.kind == OpKind::kConv || c.kind == OpKind::kGemm) conv_dense += c.flops;
  }
  const double per_image = conv_dense / 2;
  EXPECT_GT(per_image, 8.0e9);
  EXPECT_LT(per_image, 8.4e9);
  EXPECT_GT(model->backward_flops(2), 1.8 * model->forward_flops(2));
}

// Closed form for the cnn: conv1 28x28x32 taps 9, conv2 14x14x64 taps 288, dense layers.
TEST(Zoo, CnnForwardFlopsClosedForm) {
  auto model = make_model("cnn", Storage::kShapeOnly);
  const double macs = 784.0 * 32 * 9 + 196.0 * 64 * 288 + 3136.0 * 128 + 128.0 * 10;
  const double bias = 784.0 * 32 + 196.0 * 64 + 128 + 10;
  const double relu = 784.0 * 32 + 196.0 * 64 + 128;
  const double pool = 196.0 * 32 * 4 + 49.0 * 64 * 4;
  EXPECT_DOUBLE_EQ(model->forward_flops(1), 2 * macs + bias + relu + pool);
}

TEST(Zoo, UnknownNameIsAUserError) {
  EXPECT_THROW(make_model("vgg"), UserError);
  EXPECT_EQ(model_names().size(), 10u);
  for (const auto& name : model_names()) EXPECT_NO_THROW(make_model(name, Storage::kShapeOnly));
}

// resnet50 is cost-only (its BatchNorm has no math); the driving code still runs over it.
TEST(Zoo, ResNet50DrivesAsAShapeOnlyModel) {
  auto model = make_model("resnet50", Storage::kShapeOnly);
  model->set_batch(8);
  for (int i = 0; i < model->num_layers(); ++i) model->forward_layer(i, {});
  for (int i = model->num_layers() - 1; i >= 0; --i) model->backward_layer(i);
  EXPECT_EQ(model->output().shape(), (Shape{8, 1000}));
  EXPECT_TRUE(model->output().shape_only());
}

}  // namespace
}  // namespace syncopate
