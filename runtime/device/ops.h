// Ops: a device's kernel table. Layers, losses, optimizers and the runtime compute only through
// these families, so one layer serves every backend; each backend (cpu/, sim/, cuda/)
// implements every family. CPU is the reference: every other backend agrees with it within the
// tolerances stated by the conformance suite (tests/device/ops_conformance_*).
//
// Common contract of every op:
// - Tensors are dense row-major views of device storage (Tensor); shapes are checked and a
//   mismatch is INVALID_ARGUMENT naming the op and the shapes. Outputs are written, never
//   resized; "accumulate" outputs are added to (+=), everything else is overwritten.
// - Ops are issued in order on the device's compute stream; a returned OK means issued (on
//   the CPU: done). Results the host needs (losses, the finite check) are device scalars that
//   the host reads once per step with Device::CopyToHost.
// - Deterministic: the same inputs, shapes and thread count give the same bits.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_H_

#include "runtime/device/ops/activation_ops.h"
#include "runtime/device/ops/attention_ops.h"
#include "runtime/device/ops/conv_ops.h"
#include "runtime/device/ops/embedding_ops.h"
#include "runtime/device/ops/loss_ops.h"
#include "runtime/device/ops/matmul_ops.h"
#include "runtime/device/ops/norm_ops.h"
#include "runtime/device/ops/optimizer_ops.h"
#include "runtime/device/ops/tensor_ops.h"

namespace gpipe {

// One implementation of each family; references owned by the device.
struct Ops {
  TensorOps& tensor;
  MatmulOps& matmul;
  ActivationOps& activation;
  NormOps& norm;
  ConvOps& conv;
  AttentionOps& attention;
  EmbeddingOps& embedding;
  LossOps& loss;
  OptimizerOps& optimizer;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_H_
