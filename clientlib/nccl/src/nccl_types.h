// NCCL's element types and reduction operators in Plexus's terms, and the pre-multiplied
// sums of ncclRedOpCreatePreMulSum (which Plexus runs as a sum over a scaled copy).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "plexus/plexus.h"

namespace plexus::nccl {

// nullopt for the fp8 types and values outside the enum.
std::optional<plexus_dtype_t> to_plexus(ncclDataType_t type);
// nullopt for values that are not one of NCCL's five built-in operators.
std::optional<plexus_redop_t> builtin_op(ncclRedOp_t op);

// A ncclRedOpCreatePreMulSum operator: the scalar, held as the op's element type, or where
// the application keeps it (ncclScalarDevice: read when an op uses it).
struct PreMulSum {
  ncclDataType_t type = ncclFloat32;
  unsigned char scalar[8] = {};
  const void* scalar_at = nullptr;  // not null: read the scalar from here at each use
};

// dst[i] = src[i] * scalar for count elements of `type` (fp16 and bf16 through float,
// rounded to nearest even). `scalar` points at one element of `type`.
void scale(const void* src, void* dst, size_t count, plexus_dtype_t type, const void* scalar);

}  // namespace plexus::nccl
