#include "scaled_tanh_cuda.h"

namespace gpipe_example {

// Built without CUDA: the layer has CPU kernels only.
gpipe::CustomLayerFactory ScaledTanhCudaFactory() { return nullptr; }

}  // namespace gpipe_example
