// Torch's element types and reduction operators in Plexus's terms.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <vector>

#include "plexus/plexus.h"

namespace plexus::torch_backend {

// The Plexus type of a tensor's elements (bool as uint8). Throws naming the type for
// those Plexus has none of (complex, fp8, ...).
plexus_dtype_t plexus_dtype(const at::Tensor& tensor);
// The Plexus reduction for `op` on tensors of `type`: on bool, SUM is logical or (MAX) and
// PRODUCT logical and (MIN), as torch's NCCL backend does. Throws for the bitwise
// operators and PREMUL_SUM, naming them.
plexus_redop_t plexus_redop(const c10d::ReduceOp& op, at::ScalarType type);

// Every tensor a call names is checked before anything is submitted: a CPU tensor of a type
// Plexus has (plexus_dtype throws naming it otherwise); `what` names the call.
void check_cpu(const at::Tensor& t, const char* what);
// One tensor per process, and a CPU one.
void check_single(const std::vector<at::Tensor>& tensors, const char* what);
inline size_t elements(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

}  // namespace plexus::torch_backend
