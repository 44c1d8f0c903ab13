// The daemon's optional GPU reduction kernel (plexusd --gpu-reduce-kernel-bytes): every
// rank's input of an allreduce within the node, read where it lies, folded element-wise in
// rank order and written to every rank's output, with the semantics of reduce_arrays
// (daemon/reduce.h), so that results match the host path bit for bit. Compiled by nvcc into
// a fatbinary that plexusd embeds and loads with cuModuleLoadData; libplexus never has it.
// One kernel per (dtype, op), named plexus_reduce_<dtype>_<op> by their enum values.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "daemon/gpu/reduce_kernel_args.h"

namespace {

using plexus::daemon::gpu::ReduceKernelArgs;

enum Op { kSum = 0, kProd = 1, kMin = 2, kMax = 3, kAvg = 4 };

// How an element widens to its accumulator and narrows back (as reduce.cc's formats).
template <class T>
struct Native {
  using Elem = T;
  using Acc = T;
  static __device__ Acc load(Elem v) { return v; }
  static __device__ Elem store(Acc v) { return v; }
};
struct Half {
  using Elem = __half;
  using Acc = float;
  static __device__ Acc load(Elem v) { return __half2float(v); }
  static __device__ Elem store(Acc v) { return __float2half_rn(v); }
};
struct Bfloat {
  using Elem = __nv_bfloat16;
  using Acc = float;
  static __device__ Acc load(Elem v) { return __bfloat162float(v); }
  static __device__ Elem store(Acc v) { return __float2bfloat16_rn(v); }
};

// Integer sum and product wrap: computed in an unsigned type at least as wide as unsigned.
template <class T>
struct Wrap {
  using type = unsigned;
};
template <>
struct Wrap<int64_t> {
  using type = uint64_t;
};
template <>
struct Wrap<uint64_t> {
  using type = uint64_t;
};

template <class Acc, int kOp>
__device__ Acc combine(Acc acc, Acc value) {
  if constexpr (kOp == kSum || kOp == kAvg || kOp == kProd) {
    if constexpr (std::is_integral_v<Acc>) {
      using W = typename Wrap<Acc>::type;
      return kOp == kProd ? static_cast<Acc>(static_cast<W>(acc) * static_cast<W>(value))
                          : static_cast<Acc>(static_cast<W>(acc) + static_cast<W>(value));
    } else {
      return kOp == kProd ? acc * value : acc + value;
    }
  } else if constexpr (kOp == kMin) {
    if constexpr (std::is_integral_v<Acc>) {
      return value < acc ? value : acc;
    } else {
      return (acc < value || acc != acc) ? acc : value;  // a NaN stays, a NaN value is taken
    }
  } else {
    if constexpr (std::is_integral_v<Acc>) {
      return value > acc ? value : acc;
    } else {
      return (acc > value || acc != acc) ? acc : value;
    }
  }
}

template <class Format, int kOp>
__device__ typename Format::Elem finish(typename Format::Acc acc, uint32_t divisor) {
  using Acc = typename Format::Acc;
  using Elem = typename Format::Elem;
  if constexpr (kOp == kAvg) {
    if constexpr (!std::is_integral_v<Acc>) {
      return Format::store(acc / static_cast<Acc>(divisor));
    } else if constexpr (std::is_signed_v<Acc>) {
      return static_cast<Elem>(static_cast<int64_t>(acc) / static_cast<int64_t>(divisor));
    } else {
      return static_cast<Elem>(static_cast<uint64_t>(acc) / divisor);
    }
  } else {
    return Format::store(acc);
  }
}

// A grid-stride loop: each element is read from every input before any output is
// written, so an output that is the very same span as an input (in place) is safe.
template <class Format, int kOp>
__device__ void reduce(const ReduceKernelArgs& args) {
  using Elem = typename Format::Elem;
  using Acc = typename Format::Acc;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < args.count;
       i += stride) {
    Acc acc = Format::load(static_cast<const Elem*>(args.inputs[0])[i]);
    for (uint32_t k = 1; k < args.inputs_used; ++k) {
      acc = combine<Acc, kOp>(acc, Format::load(static_cast<const Elem*>(args.inputs[k])[i]));
    }
    const Elem result = finish<Format, kOp>(acc, args.avg_divisor);
    for (uint32_t k = 0; k < args.outputs_used; ++k)
      static_cast<Elem*>(args.outputs[k])[i] = result;
  }
}

}  // namespace

#define PLEXUS_REDUCE_KERNEL(dtype, op, format)                                    \
  extern "C" __global__ void plexus_reduce_##dtype##_##op(ReduceKernelArgs args) { \
    reduce<format, op>(args);                                                      \
  }
#define PLEXUS_REDUCE_KERNELS(dtype, format) \
  PLEXUS_REDUCE_KERNEL(dtype, 0, format)     \
  PLEXUS_REDUCE_KERNEL(dtype, 1, format)     \
  PLEXUS_REDUCE_KERNEL(dtype, 2, format)     \
  PLEXUS_REDUCE_KERNEL(dtype, 3, format)     \
  PLEXUS_REDUCE_KERNEL(dtype, 4, format)

// The values of plexus_dtype_t (plexus.h), checked by the launcher's table.
PLEXUS_REDUCE_KERNELS(0, Native<int8_t>)
PLEXUS_REDUCE_KERNELS(1, Native<uint8_t>)
PLEXUS_REDUCE_KERNELS(2, Native<int32_t>)
PLEXUS_REDUCE_KERNELS(3, Native<uint32_t>)
PLEXUS_REDUCE_KERNELS(4, Native<int64_t>)
PLEXUS_REDUCE_KERNELS(5, Native<uint64_t>)
PLEXUS_REDUCE_KERNELS(6, Half)
PLEXUS_REDUCE_KERNELS(7, Bfloat)
PLEXUS_REDUCE_KERNELS(8, Native<float>)
PLEXUS_REDUCE_KERNELS(9, Native<double>)
