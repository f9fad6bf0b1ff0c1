// The CUDA factory of the example's scaled_tanh layer (scaled_tanh.h), for
// CustomLayerType::cuda. Defined by scaled_tanh_cuda.cc where the example is built with CUDA and
// by scaled_tanh_no_cuda.cc (returning null: no CUDA kernels) elsewhere; CMake picks the file.
#ifndef GPIPE_EXAMPLES_EMBED_SCALED_TANH_CUDA_H_
#define GPIPE_EXAMPLES_EMBED_SCALED_TANH_CUDA_H_

#include "gpipe/custom_layer.h"

namespace gpipe_example {

gpipe::CustomLayerFactory ScaledTanhCudaFactory();

}  // namespace gpipe_example

#endif  // GPIPE_EXAMPLES_EMBED_SCALED_TANH_CUDA_H_
