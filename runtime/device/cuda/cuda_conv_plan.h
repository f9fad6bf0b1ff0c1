// CudaConvPlan: the owning cuDNN descriptors of one convolution geometry and the algorithms
// CudaConvOps chose for it (cuda_conv_ops.cu), cached per geometry.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_CONV_PLAN_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_CONV_PLAN_H_

#include <cudnn.h>

#include <cstddef>
#include <memory>

namespace gpipe {

struct CudaConvPlan {
  struct TensorDesc {
    void operator()(cudnnTensorDescriptor_t d) const { cudnnDestroyTensorDescriptor(d); }
  };
  struct FilterDesc {
    void operator()(cudnnFilterDescriptor_t d) const { cudnnDestroyFilterDescriptor(d); }
  };
  struct ConvDesc {
    void operator()(cudnnConvolutionDescriptor_t d) const { cudnnDestroyConvolutionDescriptor(d); }
  };
  std::unique_ptr<cudnnTensorStruct, TensorDesc> x, y;
  std::unique_ptr<cudnnFilterStruct, FilterDesc> w;
  std::unique_ptr<cudnnConvolutionStruct, ConvDesc> conv;
  cudnnConvolutionFwdAlgo_t forward{};
  size_t forward_bytes = 0;
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  size_t backward_data_bytes = 0;
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  size_t backward_filter_bytes = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_CONV_PLAN_H_
