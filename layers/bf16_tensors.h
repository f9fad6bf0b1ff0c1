// Casts between mixed precision's bf16 storage (training.precision BF16) and the f32 its layers
// compute in: a bf16 tensor widens exactly, an f32 one narrows by rounding to nearest even. Used by
// the mixed-precision decorators (runtime/exec: Bf16Layer, Bf16Loss) and by the composite layers
// for what they save inside (LayerContext::saved_activation_dtype); every device implements the
// cast op.
#ifndef GPIPE_LAYERS_BF16_TENSORS_H_
#define GPIPE_LAYERS_BF16_TENSORS_H_

#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "runtime/core/memory_tracker.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe {

// A bf16 `tensor` as a new f32 tensor of `kind` (the same values); any other tensor (f32, ids,
// undefined) is returned as it is.
absl::StatusOr<Tensor> WidenedFromBf16(Device& device, const Tensor& tensor, MemoryKind kind);

// An f32 `tensor` rounded to bf16 into a new tensor of `kind`; any other tensor is returned as it
// is.
absl::StatusOr<Tensor> NarrowedToBf16(Device& device, const Tensor& tensor, MemoryKind kind);

// The dtype of an attention's inner tensors that products and the fused attention read as
// operands (qkv, the heads' output O, dO, dqkv): bf16 under bf16 storage with bf16 products (the
// op that makes each writes it rounded, the ops that read it take it as it is), else f32.
DType AttentionOperandDType(const LayerContext& ctx);

// What a composite keeps of an activation it saves inside (LayerContext::saved_activation_dtype):
// an f32 `tensor` rounded into a new bf16 activation under bf16 storage, else `tensor` itself.
// Backward widens it back with WidenedFromBf16 (into workspace) for the call that reads it.
absl::StatusOr<Tensor> StoredActivation(const LayerContext& ctx, const Tensor& tensor);

}  // namespace gpipe

#endif  // GPIPE_LAYERS_BF16_TENSORS_H_
