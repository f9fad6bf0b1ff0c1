// Test helper: builds a built-in layer or loss from a protobuf-text plan entry, e.g.
// MakeLayer("name: 'fc' linear { out_features: 3 }", Shape{4}); CHECK-fails on bad text or a
// rejected config (tests that expect rejection call the registry directly).
#ifndef GPIPE_TESTS_LAYERS_MAKE_LAYER_H_
#define GPIPE_TESTS_LAYERS_MAKE_LAYER_H_

#include <memory>
#include <string>

#include "layers/layer.h"
#include "layers/loss.h"
#include "proto/plan.pb.h"

namespace gpipe::testing {

pb::Layer ParseLayer(const std::string& text);
std::unique_ptr<Layer> MakeLayer(const std::string& text, const Shape& input_shape);
std::unique_ptr<Loss> MakeLoss(const std::string& text);

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_LAYERS_MAKE_LAYER_H_
