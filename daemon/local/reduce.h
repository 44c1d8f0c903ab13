// Element-wise reduction of k arrays: the arithmetic core of every reducing collective.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plexus/plexus_types.h"

namespace plexus::daemon {

// out[i] = op(inputs[0][i], ..., inputs[k-1][i]) for i in [0, count), folded in rank
// order 0..k-1, with the semantics plexus.h documents:
//  - integer sum/prod wrap around in the element type;
//  - fp16/bf16 accumulate all k inputs in fp32 and round (to nearest even) once;
//  - float32/float64 accumulate in their own type;
//  - min/max return NaN when any input is NaN;
//  - PLEXUS_AVG is that (wrapping, for integers) sum divided by avg_divisor: integers
//    truncate toward zero, floats divide in the accumulation type (fp32 for fp16/bf16).
// Preconditions: k >= 1; avg_divisor >= 1 when op == PLEXUS_AVG (ignored otherwise);
// every pointer is aligned to the element size. out may be the very same pointer as any
// input (in-place), but must not overlap an input any other way. A bad dtype, op, k or
// divisor fails an assert in debug builds and leaves out untouched otherwise.
void reduce_arrays(plexus_dtype_t dtype, plexus_redop_t op, const void* const* inputs, int k,
                   void* out, size_t count, uint32_t avg_divisor);

// The kernel set reduce_arrays uses on this CPU: "avx2+f16c" or "generic". For logging.
const char* reduce_kernel_isa();

// reduce_arrays restricted to the portable kernels, whatever the CPU supports. Tests use
// it to check that both kernel sets give identical results.
void reduce_arrays_generic(plexus_dtype_t dtype, plexus_redop_t op, const void* const* inputs,
                           int k, void* out, size_t count, uint32_t avg_divisor);

}  // namespace plexus::daemon
