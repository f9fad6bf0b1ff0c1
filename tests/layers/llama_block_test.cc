// rms_norm and llama_block against values computed independently from Hugging Face's definitions
// (tests/layers/oracles/llama_oracles.py), finite differences, grouped-query attention against
// multi-head attention with repeated key/value weights, causality, saved tensors, parameter
// names and configuration rules.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/causality.h"
#include "tests/layers/gradient_check.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

// Element i is (((7 i + 3 salt) mod 17) - 8) * scale (+ offset), as in llama_oracles.py.
Tensor PatternTensor(Device& device, const Shape& shape, int salt, double scale,
                     double offset = 0.0) {
  std::vector<float> values(shape.num_elements());
  for (int64_t i = 0; i < shape.num_elements(); ++i) {
    values[i] =
        static_cast<float>(static_cast<double>((7 * i + 3 * salt) % 17 - 8) * scale + offset);
  }
  return F32Tensor(device, shape, values);
}

// rms_norm y, dx, dweight and llama_block y, dx, d<param> from llama_oracles.py.
const std::vector<float> kRmsY = {0.392232186f, 0.392232186f,  1.56892875f,  -0.0784464373f,
                                  -1.8827145f,  0.322591063f,  0.604858242f, 1.4113359f,
                                  0.0f,         -2.25813744f,  0.239045669f, 0.796818897f,
                                  1.19522835f,  0.0796818897f, -2.54982047f, 0.161955229f,
                                  1.01222018f,  1.01222018f,   0.161955229f, 2.59128367f};
const std::vector<float> kRmsDx = {0.0945379626f, 0.474701539f,   0.323842902f,   0.154881417f,
                                   0.378152119f,  -0.0166103968f, -0.565517856f,  0.132227337f,
                                   0.161295531f,  0.365100551f,   -0.0531212716f, -0.500225181f,
                                   0.0531212363f, 0.17707087f,    0.247899244f,   -0.153326446f,
                                   -0.291497339f, -0.180872079f,  0.261296599f,   0.0345151314f};
const std::vector<float> kRmsDweight = {-0.600593059f, -1.33520618f, 0.353697321f, 0.365295719f,
                                        -1.30706352f};
const std::vector<float> kBlockY = {
    -0.405128483f, 0.403170969f,  0.972722244f,   -0.683207747f, -0.0565043902f, -0.180919469f,
    -0.382196953f, -0.495342607f, 0.818993228f,   0.960940983f,  0.508975104f,   -0.228615453f,
    0.372124145f,  -0.419038613f, 0.729552296f,   -0.278276857f, -0.375245089f,  -1.46522813f,
    -0.260390111f, 2.1110457f,    -0.295936206f,  0.266904489f,  0.117249546f,   0.0507209646f,
    -0.422954165f, -0.209049707f, 0.671712023f,   -1.32858949f,  -1.19797936f,   0.572693756f,
    -0.849342366f, 1.40534626f,   0.17426301f,    0.831956383f,  -0.124305493f,  -0.433734874f,
    1.01649531f,   -0.217516498f, -0.0145973326f, -0.454995721f, -0.313663896f,  -1.73822576f,
    -0.257455209f, 1.7406855f,    -0.624219447f,  0.0703591313f, 0.18143962f,    -0.110961719f};
const std::vector<float> kBlockDx = {
    0.147533129f,  0.376925375f,  -0.463420001f, 0.864316325f,    0.771956998f,  0.122058793f,
    0.811859862f,  -1.44070577f,  -0.587472202f, -0.986662336f,   0.0406434575f, 1.18970491f,
    -0.638385471f, 0.698440597f,  -2.09521849f,  0.223353307f,    0.33095139f,   0.00131344535f,
    0.728965043f,  -0.198218212f, 0.1477667f,    0.099326896f,    -0.902382179f, 1.01174728f,
    -0.140883324f, 0.125633354f,  -0.52907688f,  -0.177386161f,   0.311204074f,  -0.385245308f,
    0.439797791f,  -0.442578784f, 0.29515487f,   0.586414886f,    -0.128198673f, -0.209946196f,
    -0.323472784f, 0.0407684304f, 0.294954402f,  -0.00740194039f, -0.357007438f, -0.014216047f,
    0.0957364943f, -0.3593651f,   -0.322713203f, -0.690100418f,   -1.24401235f,  0.34474297f};
const std::vector<std::vector<float>> kBlockParamGrads = {
    // input_layernorm.weight
    {-2.07550796f, -1.16191833f, -0.594376283f, -0.553383437f, -0.760497801f, -1.60855381f,
     -1.0234359f, -0.022246843f},
    // self_attn.q_proj.weight
    {-0.0872050152f,  0.597806902f,   -0.0356773455f,  -0.188277137f,   -0.0230959545f,
     -0.109004984f,   0.0641109477f,  -0.0505411952f,  0.137175507f,    -0.532512478f,
     -0.0581545501f,  0.581853898f,   -0.0660600512f,  0.228605284f,    -0.0460081742f,
     -0.00620441121f, 0.201744053f,   -1.16304496f,    0.0936903333f,   0.407687062f,
     0.0644121743f,   0.246600729f,   -0.124807833f,   0.125288858f,    -0.119988062f,
     0.639008971f,    -0.0422429687f, -0.276172774f,   -0.0509859688f,  -0.153406603f,
     0.0672492395f,   -0.0644062421f, -0.00421536139f, -0.0144764161f,  0.0211996691f,
     -0.0664116886f,  0.0436684697f,  -0.0167312701f,  -0.00363060604f, 0.0147501078f,
     0.111763625f,    -0.369135744f,  0.0452909061f,   0.242384267f,    -0.0522004622f,
     0.139919818f,    -0.0380157719f, 0.0644491678f,   0.0984550783f,   -0.19745166f,
     -0.0278588561f,  0.382913294f,   -0.112373271f,   0.157136813f,    -0.0136505278f,
     0.00595724181f,  -0.0849275996f, 0.190991948f,    -0.00155831215f, -0.266328397f,
     0.0809915841f,   -0.122751896f,  0.0162040585f,   -0.0243308067f},
    // self_attn.k_proj.weight
    {-0.34986311f,  1.49753745f,   -0.0613404008f, -0.988025681f, 0.143545424f,   -0.483856772f,
     0.149361729f,  -0.089187763f, 0.756013755f,   -0.533567632f, -0.48728617f,   0.991787581f,
     -0.401318714f, 0.816914224f,  -0.0605899673f, 0.252604004f,  -0.54179965f,   -0.529458181f,
     0.366994449f,  0.0896849466f, 0.0857372178f,  -0.425353634f, -0.0312119321f, 0.119089107f,
     -0.826717589f, 1.41370463f,   0.264948172f,   -1.25576898f,  0.247064852f,   -0.927559099f,
     0.152797398f,  0.0972410366f},
    // self_attn.v_proj.weight
    {3.11995149f,    -0.724042205f, -2.38654741f,  4.4865368f,    -1.53723907f, 3.44999494f,
     -0.0727138829f, -0.287145581f, -0.123832496f, 0.158806733f,  0.132360601f, -0.0996460567f,
     -0.0500053727f, -0.121246707f, 0.0199524073f, 0.0229454553f, -1.26938367f, 2.36348962f,
     0.706288674f,   -2.55535085f,  0.338693931f,  -1.54965681f,  0.235130856f, -0.24866308f,
     -0.824241764f,  -3.05317799f,  1.17546919f,   -0.17364266f,  0.647452674f, -0.709108158f,
     -0.307564553f,  0.938507736f},
    // self_attn.o_proj.weight
    {-3.27790709f,  0.62027653f,   2.73833786f,   -1.73102464f,    -3.0951215f,   1.01502144f,
     2.00042831f,   -1.8146919f,   2.7411505f,    -0.500359123f,   -2.71665014f,  1.3112494f,
     2.38216067f,   -0.794327586f, -2.04120226f,  1.24989436f,     -2.75994965f,  -0.115907289f,
     2.74191786f,   -0.752470929f, -2.44605412f,  -0.0351751295f,  2.30199749f,   -0.652049885f,
     1.60859656f,   1.5346634f,    -4.04013039f,  -0.00419990176f, 0.782841314f,  1.40080527f,
     -2.90113109f,  -0.274352748f, 1.2921371f,    -0.955512615f,   -0.117110416f, 0.86785955f,
     1.55308679f,   -1.11432071f,  -0.176065523f, 1.04214079f,     -1.89068621f,  -0.12621654f,
     2.97824847f,   -1.13982908f,  -1.48353689f,  0.353339911f,    1.87779329f,   -1.16591148f,
     2.52482929f,   -1.65214638f,  -1.3345167f,   1.9376709f,      2.52557461f,   -2.10532214f,
     -0.893051267f, 2.07243589f,   -2.88139271f,  -0.0558870874f,  2.92807125f,   -0.921133819f,
     -2.55822668f,  0.0996138603f, 2.36866973f,   -0.849121057f},
    // post_attention_layernorm.weight
    {0.316425658f, -1.10615302f, -0.825526735f, -1.09042489f, 0.0354983456f, -0.0502763902f,
     -0.0327099952f, -0.532658651f},
    // mlp.gate_proj.weight
    {0.00618383611f,  0.52018828f,   -0.00105558184f, -0.607988143f,   0.0165615397f,
     -0.00755736851f, -0.124708085f, 0.0215986016f,   0.146587057f,    -0.11357237f,
     -0.185104696f,   0.5112826f,    0.04620038f,     -0.00623723029f, 0.216729152f,
     -0.118097841f,   0.0103486815f, -1.00588509f,    0.0491307146f,   0.094435586f,
     -0.00956743884f, 0.0982901649f, 0.160700905f,    0.0726638127f,   -0.11554447f,
     -1.58440451f,    0.216355803f,  -1.05931067f,    0.0673230871f,   0.218153265f,
     -0.0431263825f,  0.17356748f,   0.342091573f,    0.762869723f,    -0.43277749f,
     0.299630485f,    0.147221064f,  -0.0188230547f,  0.284008258f,    -0.208773945f,
     0.146033817f,    -0.778435017f, -0.147615979f,   0.628291822f,    0.0837859124f,
     0.0293564946f,   0.306456468f,  -0.17927134f},
    // mlp.up_proj.weight
    {0.0160330451f, -0.997830734f,  -0.0761788348f, 1.51341694f,    -0.0323622977f, -0.0109447233f,
     0.295269792f,  -0.0907008539f, 0.0842816461f,  -0.495723752f,  -0.0698188178f, 0.416956143f,
     0.0217993854f, 0.0170692669f,  0.19699773f,    -0.0792781227f, 0.0395823241f,  -0.620084686f,
     0.0513523264f, 0.121666019f,   -0.0418215698f, 0.0494135532f,  0.16101914f,    0.0465024428f,
     0.0866387482f, 2.03014507f,    -0.0931986297f, 0.107697911f,   -0.0753287988f, -0.225284347f,
     -0.129397616f, -0.137538223f,  0.403241192f,   1.15912156f,    -0.519167901f,  0.13216772f,
     0.242681213f,  -0.0621490064f, 0.257278172f,   -0.378398588f,  -0.280958047f,  -0.00620963858f,
     0.390326732f,  -0.522326451f,  -0.0941463947f, -0.0508565541f, -0.34007354f,   0.0750317732f},
    // mlp.down_proj.weight
    {-0.834774909f, -0.253337245f, 0.0184729814f,   -0.585011199f, -0.190494083f,  0.345569427f,
     0.390051716f,  0.059657828f,  -0.0927624004f,  1.28246614f,   0.0415462527f,  -0.135581536f,
     -0.459770707f, -0.551523097f, -0.237248804f,   0.0887804923f, -0.503973096f,  0.520572908f,
     1.33278993f,   -0.157384876f, 0.281642655f,    -1.00842882f,  -0.114010831f,  -0.0560879219f,
     -0.378050865f, 0.436716633f,  -0.22023067f,    1.1691245f,    0.366289403f,   -0.325065463f,
     -0.959776309f, -0.153941961f, 0.103713577f,    -0.809608431f, -0.0860010778f, 0.287234934f,
     0.265050315f,  0.159053112f,  -0.00752180496f, 1.05786891f,   0.146039258f,   -0.19391603f,
     -0.584772108f, -0.452127813f, -0.152008209f,   -0.135816738f, -0.399480092f,  0.462238416f},
};

// The oracle's block: D 8, two query heads of 4 sharing one key/value head, I 6, rope_theta 100.
constexpr char kOracleBlock[] =
    "name: 'model.layers.0' llama_block { num_heads: 2 num_kv_heads: 1 intermediate_size: 6 "
    "rope_theta: 100 eps: 1e-5 }";
// Grouped-query attention with two query heads per key/value head.
constexpr char kGqaBlock[] =
    "name: 'blk' llama_block { num_heads: 4 num_kv_heads: 2 intermediate_size: 12 }";

TEST(RmsNormTest, ForwardAndBackwardMatchIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'norm' rms_norm {}", Shape{5});
  EXPECT_EQ(layer->type(), "rms_norm");
  ASSERT_EQ(layer->parameter_specs().size(), 1u);
  EXPECT_EQ(layer->parameter_specs()[0].name, "weight");
  EXPECT_EQ(layer->parameter_specs()[0].init, ParamInit::kOnes);
  const std::vector<Tensor> params = {PatternTensor(device, Shape{5}, 2, 0.2)};
  const Tensor x = PatternTensor(device, Shape{4, 5}, 1, 0.3);
  const LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Values(*y), Pointwise(FloatNear(1e-6), kRmsY));
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> dx =
      layer->Backward(ctx, params, grads, saved, PatternTensor(device, Shape{4, 5}, 3, 0.1));
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_THAT(Values(*dx), Pointwise(FloatNear(1e-6), kRmsDx));
  EXPECT_THAT(Values(grads[0]), Pointwise(FloatNear(1e-6), kRmsDweight));
}

TEST(RmsNormTest, RejectsABadEpsAndAnInputWithoutFeatures) {
  for (const char* text : {"name: 'n' rms_norm { eps: 0 }", "name: 'n' rms_norm { eps: -1 }",
                           "name: 'n' rms_norm { eps: inf }"}) {
    const absl::Status status =
        LayerRegistry::WithBuiltins().Create(ParseLayer(text), Shape{4}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(status.message()), HasSubstr("rms_norm.eps must be > 0")) << text;
  }
  const absl::Status status =
      LayerRegistry::WithBuiltins().Create(ParseLayer("name: 'n' rms_norm {}"), Shape{}).status();
  EXPECT_THAT(std::string(status.message()), HasSubstr("rms_norm needs an input"));
}

TEST(LlamaBlockTest, ParametersFollowHuggingFaceNamesShapesAndOrder) {
  std::unique_ptr<Layer> layer = MakeLayer(kGqaBlock, Shape{5, 8});
  EXPECT_EQ(layer->type(), "llama_block");
  EXPECT_EQ(layer->output_shape(), (Shape{5, 8}));
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  std::vector<ParamInit> inits;
  for (const ParamSpec& p : layer->parameter_specs()) {
    names.push_back(p.name);
    shapes.push_back(p.shape);
    inits.push_back(p.init);
    if (p.init == ParamInit::kNormal) {
      EXPECT_EQ(p.bound, 0.02) << p.name;
    }
  }
  EXPECT_THAT(names,
              ElementsAre("input_layernorm.weight", "self_attn.q_proj.weight",
                          "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                          "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"));
  // head_dim 2, two key/value heads: k and v are [4, 8].
  EXPECT_THAT(shapes, ElementsAre(Shape{8}, Shape{8, 8}, Shape{4, 8}, Shape{4, 8}, Shape{8, 8},
                                  Shape{8}, Shape{12, 8}, Shape{12, 8}, Shape{8, 12}));
  EXPECT_THAT(inits, ElementsAre(ParamInit::kOnes, ParamInit::kNormal, ParamInit::kNormal,
                                 ParamInit::kNormal, ParamInit::kNormal, ParamInit::kOnes,
                                 ParamInit::kNormal, ParamInit::kNormal, ParamInit::kNormal));
  EXPECT_TRUE(layer->buffer_specs().empty());
  // num_kv_heads defaults to num_heads.
  EXPECT_EQ(MakeLayer("name: 'b' llama_block { num_heads: 4 intermediate_size: 3 }", Shape{2, 8})
                ->parameter_specs()[2]
                .shape,
            (Shape{8, 8}));
}

TEST(LlamaBlockTest, ForwardAndBackwardMatchIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kOracleBlock, Shape{3, 8});
  const struct {
    Shape shape;
    int salt;
    double scale;
    double offset;
  } param_patterns[] = {
      {Shape{8}, 20, 0.1, 1.0},     {Shape{8, 8}, 21, 0.05, 0.0}, {Shape{4, 8}, 22, 0.05, 0.0},
      {Shape{4, 8}, 23, 0.05, 0.0}, {Shape{8, 8}, 24, 0.05, 0.0}, {Shape{8}, 25, 0.1, 1.0},
      {Shape{6, 8}, 26, 0.05, 0.0}, {Shape{6, 8}, 27, 0.05, 0.0}, {Shape{8, 6}, 28, 0.05, 0.0}};
  std::vector<Tensor> params;
  for (const auto& p : param_patterns) {
    params.push_back(PatternTensor(device, p.shape, p.salt, p.scale, p.offset));
  }
  const Tensor x = PatternTensor(device, Shape{2, 3, 8}, 29, 0.1);
  const LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Values(*y), Pointwise(FloatNear(1e-6), kBlockY));
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> dx =
      layer->Backward(ctx, params, grads, saved, PatternTensor(device, Shape{2, 3, 8}, 30, 0.1));
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_THAT(Values(*dx), Pointwise(FloatNear(1e-6), kBlockDx));
  ASSERT_EQ(grads.size(), kBlockParamGrads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    SCOPED_TRACE(layer->parameter_specs()[i].name);
    // The gradients reach a few units; 2e-6 absolute is about 1e-6 of the largest.
    EXPECT_THAT(Values(grads[i]), Pointwise(FloatNear(2e-6), kBlockParamGrads[i]));
  }
}

TEST(LlamaBlockTest, AnalyticGradientsMatchCentralDifferences) {
  CpuDevice device;
  for (const char* text :
       {kGqaBlock, kOracleBlock, "name: 'mha' llama_block { num_heads: 2 intermediate_size: 5 }"}) {
    SCOPED_TRACE(text);
    std::unique_ptr<Layer> layer = MakeLayer(text, Shape{3, 8});
    const std::vector<Tensor> params = UniformParams(*layer, device, 11, -0.5f, 0.5f);
    const Tensor x = UniformTensor(device, Shape{2, 3, 8}, 12, -1.0f, 1.0f);
    int64_t param_elements = 0;
    for (const Tensor& p : params) param_elements += p.num_elements();
    for (bool need_input_grad : {true, false}) {
      SCOPED_TRACE(need_input_grad);
      const LayerContext ctx{.device = device, .need_input_grad = need_input_grad};
      absl::StatusOr<GradientCheckReport> report = CheckLayerGradients(*layer, ctx, params, x);
      ASSERT_TRUE(report.ok()) << report.status();
      EXPECT_EQ(report->checked, param_elements + (need_input_grad ? x.num_elements() : 0));
      EXPECT_TRUE(report->ok()) << report->ToString();
    }
  }
}

// Grouped-query attention is multi-head attention whose key/value heads repeat (transformers'
// repeat_kv): the GQA block equals an MHA block whose k_proj and v_proj repeat each key/value
// head's rows for its query heads, and its k/v gradients are the sums of the MHA block's over
// each group.
TEST(LlamaBlockTest, GroupedQueryAttentionEqualsMultiHeadAttentionWithRepeatedHeads) {
  CpuDevice device;
  constexpr int64_t kT = 4, kD = 8, kHeads = 4, kKvHeads = 2, kHeadDim = kD / kHeads;
  std::unique_ptr<Layer> gqa = MakeLayer(kGqaBlock, Shape{kT, kD});
  std::unique_ptr<Layer> mha =
      MakeLayer("name: 'blk' llama_block { num_heads: 4 num_kv_heads: 4 intermediate_size: 12 }",
                Shape{kT, kD});
  const std::vector<Tensor> params = UniformParams(*gqa, device, 5, -0.5f, 0.5f);
  std::vector<Tensor> repeated;
  for (size_t i = 0; i < params.size(); ++i) {
    if (i != 2 && i != 3) {  // k_proj and v_proj
      repeated.push_back(params[i]);
      continue;
    }
    const std::vector<float> rows = Values(params[i]);
    std::vector<float> out;
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t g = h / (kHeads / kKvHeads);
      out.insert(out.end(), rows.begin() + g * kHeadDim * kD,
                 rows.begin() + (g + 1) * kHeadDim * kD);
    }
    repeated.push_back(F32Tensor(device, Shape{kD, kD}, out));
  }
  const Tensor x = UniformTensor(device, Shape{2, kT, kD}, 6, -1.0f, 1.0f);
  const Tensor dy = UniformTensor(device, Shape{2, kT, kD}, 7, -1.0f, 1.0f);
  const LayerContext ctx{.device = device};
  SavedTensors gqa_saved, mha_saved;
  absl::StatusOr<Tensor> gqa_y = gqa->Forward(ctx, params, x, gqa_saved);
  absl::StatusOr<Tensor> mha_y = mha->Forward(ctx, repeated, x, mha_saved);
  ASSERT_TRUE(gqa_y.ok() && mha_y.ok());
  EXPECT_THAT(Values(*gqa_y), Pointwise(FloatNear(1e-6), Values(*mha_y)));
  std::vector<Tensor> gqa_grads = ZeroGrads(*gqa, device);
  std::vector<Tensor> mha_grads = ZeroGrads(*mha, device);
  absl::StatusOr<Tensor> gqa_dx = gqa->Backward(ctx, params, gqa_grads, gqa_saved, dy);
  absl::StatusOr<Tensor> mha_dx = mha->Backward(ctx, repeated, mha_grads, mha_saved, dy);
  ASSERT_TRUE(gqa_dx.ok() && mha_dx.ok());
  EXPECT_THAT(Values(*gqa_dx), Pointwise(FloatNear(1e-6), Values(*mha_dx)));
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE(i);
    std::vector<float> expected = Values(mha_grads[i]);
    if (i == 2 || i == 3) {
      std::vector<float> summed(kKvHeads * kHeadDim * kD, 0.0f);
      for (int64_t h = 0; h < kHeads; ++h) {
        const int64_t g = h / (kHeads / kKvHeads);
        for (int64_t j = 0; j < kHeadDim * kD; ++j) {
          summed[g * kHeadDim * kD + j] += expected[h * kHeadDim * kD + j];
        }
      }
      expected = summed;
    }
    EXPECT_THAT(Values(gqa_grads[i]), Pointwise(FloatNear(1e-5), expected));
  }
}

TEST(LlamaBlockTest, OutputsBeforeAPositionIgnoreInputsAtAndAfterIt) {
  ExpectCausal(*MakeLayer(kGqaBlock, Shape{4, 8}), 3);
  ExpectCausal(*MakeLayer(kOracleBlock, Shape{5, 8}), 7);
}

// What the block keeps per micro-batch: x (kInput); input_layernorm's rstd and output; the
// attention's q, k, v, log-sum-exp and O; h (the first residual's output); then
// post_attention_layernorm's rstd and output and the MLP's gate and up. Activations count at
// the storage size (4 bytes f32, 2 bf16); the statistics stay f32.
TEST(LlamaBlockTest, SavesEachInnerTensorOnce) {
  constexpr int64_t kT = 3, kD = 8, kH = 4, kKv = 4, kI = 12, f32 = 4;
  const std::vector<SavedSpec> specs = MakeLayer(kGqaBlock, Shape{kT, kD})->SavedPerSample();
  const struct {
    int64_t bytes;
    int64_t activations;
  } expected[] = {{0, 0},        {kT * f32, 0},      {0, kT * kD}, {0, kT * kD}, {0, kT * kKv},
                  {0, kT * kKv}, {kH * kT * f32, 0}, {0, kT * kD}, {0, kT * kD}, {kT * f32, 0},
                  {0, kT * kD},  {0, kT * kI},       {0, kT * kI}};
  ASSERT_EQ(specs.size(), std::size(expected));
  EXPECT_EQ(specs[0].ref, SavedRef::kInput);
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(i);
    if (i > 0) {
      EXPECT_EQ(specs[i].ref, SavedRef::kNew);
    }
    EXPECT_EQ(specs[i].BytesPerSample(4), expected[i].bytes + 4 * expected[i].activations);
    EXPECT_EQ(specs[i].BytesPerSample(2), expected[i].bytes + 2 * expected[i].activations);
    EXPECT_EQ(specs[i].bytes_per_call, 0);
  }
}

TEST(LlamaBlockTest, FlopsCountEveryProductOverTheFullScoreMatrix) {
  constexpr double kT = 3, kD = 8, kKvWidth = 4, kI = 12;
  const double attention =
      2 * kT * kD * kD + 2 * 2 * kT * kD * kKvWidth + 4 * kT * kT * kD + 2 * kT * kD * kD;
  const double mlp = kT * (3 * 2 * kD * kI + 4 * kI);
  const double norms = 2 * 4 * kT * kD;
  EXPECT_DOUBLE_EQ(MakeLayer(kGqaBlock, Shape{3, 8})->ForwardFlopsPerSample(),
                   attention + mlp + norms + 2 * kT * kD /* the residual sums */);
}

TEST(LlamaBlockTest, RejectsBadConfigurationNamingTheField) {
  const struct {
    std::string text;
    Shape input;
    std::string message;
  } cases[] = {
      {"name: 'b' llama_block { intermediate_size: 4 }", Shape{3, 8},
       "llama_block.num_heads must be set"},
      {"name: 'b' llama_block { num_heads: 3 intermediate_size: 4 }", Shape{3, 8},
       "llama_block.num_heads must be set, >= 1 and divide d_model 8, got 3"},
      {"name: 'b' llama_block { num_heads: 2 intermediate_size: 4 }", Shape{3, 6},
       "rotary position embedding needs an even head_dim, got d_model 6 / num_heads 2 = 3"},
      {"name: 'b' llama_block { num_heads: 4 num_kv_heads: 3 intermediate_size: 4 }", Shape{3, 8},
       "llama_block.num_kv_heads must be >= 1 and divide num_heads 4, got 3"},
      {"name: 'b' llama_block { num_heads: 4 num_kv_heads: 0 intermediate_size: 4 }", Shape{3, 8},
       "llama_block.num_kv_heads"},
      {"name: 'b' llama_block { num_heads: 4 }", Shape{3, 8},
       "llama_block.intermediate_size must be set and >= 1"},
      {"name: 'b' llama_block { num_heads: 4 intermediate_size: 4 rope_theta: 0 }", Shape{3, 8},
       "llama_block.rope_theta must be a finite number > 0"},
      {"name: 'b' llama_block { num_heads: 4 intermediate_size: 4 eps: 0 }", Shape{3, 8},
       "llama_block.eps must be a finite number > 0"},
      {"name: 'b' llama_block { num_heads: 4 intermediate_size: 4 }", Shape{8},
       "llama_block needs a per-sample input [seq_len, d_model], got [8]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text + " on " + c.input.ToString());
    const absl::Status status =
        LayerRegistry::WithBuiltins().Create(ParseLayer(c.text), c.input).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
}

TEST(LlamaBlockTest, RejectsInputAndGradientOfTheWrongShapeNamingTheBlock) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kGqaBlock, Shape{3, 8});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  const LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> bad =
      layer->Forward(ctx, params, UniformTensor(device, Shape{2, 4, 8}, 4, -1, 1), saved);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("llama_block 'blk'"));
  ASSERT_TRUE(
      layer->Forward(ctx, params, UniformTensor(device, Shape{2, 3, 8}, 4, -1, 1), saved).ok());
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  const absl::Status status =
      layer->Backward(ctx, params, grads, saved, UniformTensor(device, Shape{2, 3, 5}, 5, -1, 1))
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("llama_block 'blk'"));
}

}  // namespace
}  // namespace gpipe::testing
