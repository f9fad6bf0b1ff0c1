#include "tests/layers/make_layer.h"

#include "google/protobuf/text_format.h"
#include "layers/registry.h"
#include "runtime/core/check.h"

namespace gpipe::testing {

pb::Layer ParseLayer(const std::string& text) {
  pb::Layer spec;
  GPIPE_CHECK(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

std::unique_ptr<Layer> MakeLayer(const std::string& text, const Shape& input_shape) {
  absl::StatusOr<std::unique_ptr<Layer>> layer =
      LayerRegistry::WithBuiltins().Create(ParseLayer(text), input_shape);
  GPIPE_CHECK(layer.ok()) << layer.status().ToString();
  return *std::move(layer);
}

std::unique_ptr<Loss> MakeLoss(const std::string& text) {
  pb::Loss spec;
  GPIPE_CHECK(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  absl::StatusOr<std::unique_ptr<Loss>> loss = CreateLoss(spec);
  GPIPE_CHECK(loss.ok()) << loss.status().ToString();
  return *std::move(loss);
}

}  // namespace gpipe::testing
