// Torch's element types and reduction operators in Plexus's terms.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "plexus/plexus.h"

namespace plexus::torch_backend {

// The Plexus type of a tensor's elements (bool as uint8). Throws naming the type for
// those Plexus has none of (complex, fp8, ...).
plexus_dtype_t plexus_dtype(const at::Tensor& tensor);
// The Plexus reduction for `op` on tensors of `type`: on bool, SUM is logical or (MAX) and
// PRODUCT logical and (MIN), as torch's NCCL backend does. Throws for the bitwise
// operators and PREMUL_SUM, naming them.
plexus_redop_t plexus_redop(const c10d::ReduceOp& op, at::ScalarType type);

}  // namespace plexus::torch_backend
