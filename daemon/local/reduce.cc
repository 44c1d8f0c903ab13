#include "daemon/local/reduce.h"

#include <array>
#include <cassert>
#include <cstring>
#include <type_traits>

#include "shm/dtype.h"
#include "shm/half_float.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define PLEXUS_REDUCE_HAVE_X86_KERNELS 1
#else
#define PLEXUS_REDUCE_HAVE_X86_KERNELS 0
#endif

// Everything on the per-element path is force-inlined into the per-ISA kernel entry
// points, so the same source is compiled (and auto-vectorised) once for the baseline ISA
// and once for AVX2.
#define PLEXUS_ALWAYS_INLINE inline __attribute__((always_inline))

// out may be the same pointer as an input, which only creates a same-iteration
// dependence (element i is read before it is written). Saying so lets the vectoriser
// skip runtime overlap checks, which would otherwise send in-place reductions (the
// common case) down the scalar loop.
#if defined(__clang__)
#define PLEXUS_NO_LOOP_CARRIED_DEPENDENCE _Pragma("clang loop vectorize(assume_safety)")
// That pragma also demands vectorisation and warns where it is impossible (integer
// division for avg, the scalar fp16 conversions of the portable kernels): expected.
#pragma clang diagnostic ignored "-Wpass-failed"
#elif defined(__GNUC__)
#define PLEXUS_NO_LOOP_CARRIED_DEPENDENCE _Pragma("GCC ivdep")
#else
#define PLEXUS_NO_LOOP_CARRIED_DEPENDENCE
#endif

namespace plexus::daemon {
namespace {

// ---- Element formats: how an element widens to its accumulator and narrows back. ----

template <class T>
struct NativeFormat {  // integers, float, double: accumulate in the element type
  using Elem = T;
  using Acc = T;
  static PLEXUS_ALWAYS_INLINE Acc load(Elem value) { return value; }
  static PLEXUS_ALWAYS_INLINE Elem store(Acc value) { return value; }
};

struct Float16Format {
  using Elem = uint16_t;
  using Acc = float;
  static PLEXUS_ALWAYS_INLINE Acc load(Elem value) { return shm::half_to_float(value); }
  static PLEXUS_ALWAYS_INLINE Elem store(Acc value) { return shm::float_to_half(value); }
};

struct Bfloat16Format {
  using Elem = uint16_t;
  using Acc = float;
  static PLEXUS_ALWAYS_INLINE Acc load(Elem value) { return shm::bfloat16_to_float(value); }
  static PLEXUS_ALWAYS_INLINE Elem store(Acc value) { return shm::float_to_bfloat16(value); }
};

// ---- Operators. ----

// Signed overflow is undefined, so integer sum/prod run in an unsigned type at least as
// wide as unsigned int (narrower ones would be promoted to signed int and could overflow
// in a product) and are converted back, which wraps (C++20).
template <class T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class Format, plexus_redop_t kOp>
class Reducer {
 public:
  using Elem = typename Format::Elem;
  using Acc = typename Format::Acc;

  explicit Reducer(uint32_t avg_divisor) : avg_divisor_(avg_divisor) {}

  static PLEXUS_ALWAYS_INLINE Acc load(Elem value) { return Format::load(value); }

  static PLEXUS_ALWAYS_INLINE Acc combine(Acc acc, Acc value) {
    if constexpr (kOp == PLEXUS_SUM || kOp == PLEXUS_AVG) {
      if constexpr (std::is_integral_v<Acc>) {
        return static_cast<Acc>(static_cast<WrapType<Acc>>(acc) +
                                static_cast<WrapType<Acc>>(value));
      } else {
        return acc + value;
      }
    } else if constexpr (kOp == PLEXUS_PROD) {
      if constexpr (std::is_integral_v<Acc>) {
        return static_cast<Acc>(static_cast<WrapType<Acc>>(acc) *
                                static_cast<WrapType<Acc>>(value));
      } else {
        return acc * value;
      }
    } else if constexpr (kOp == PLEXUS_MIN) {
      // acc != acc: a NaN accumulator stays; a NaN value fails the comparison and is taken.
      if constexpr (std::is_integral_v<Acc>) {
        return value < acc ? value : acc;
      } else {
        return (acc < value || acc != acc) ? acc : value;
      }
    } else {
      static_assert(kOp == PLEXUS_MAX);
      if constexpr (std::is_integral_v<Acc>) {
        return value > acc ? value : acc;
      } else {
        return (acc > value || acc != acc) ? acc : value;
      }
    }
  }

  PLEXUS_ALWAYS_INLINE Elem finish(Acc acc) const {
    if constexpr (kOp == PLEXUS_AVG) {
      if constexpr (std::is_floating_point_v<Acc>) {
        return Format::store(acc / static_cast<Acc>(avg_divisor_));
      } else if constexpr (std::is_signed_v<Acc>) {
        // Built-in division truncates toward zero; int64 holds every quotient.
        return static_cast<Elem>(static_cast<int64_t>(acc) / static_cast<int64_t>(avg_divisor_));
      } else {
        return static_cast<Elem>(static_cast<uint64_t>(acc) / avg_divisor_);
      }
    } else {
      return Format::store(acc);
    }
  }

 private:
  uint32_t avg_divisor_;
};

// ---- The portable kernel: blocks of elements, inputs folded in groups. ----

// Inputs folded per pass over a block. For k = 4, float32 sum, 64 MiB inputs on a 2-core
// EPYC, reading all 4 per pass was 10-20% faster than folding the inputs pairwise through
// an L1-resident accumulator block: fewer loads and stores of the accumulator.
constexpr int kMaxInputsPerPass = 4;
// Bytes of the accumulator block used when k > kMaxInputsPerPass: stays in L1 while
// the remaining inputs are folded in.
constexpr size_t kAccumulatorBlockBytes = 8192;

// One pass over elements [offset, offset + n): reads kInputs inputs (plus the
// accumulator block when kFromAcc) and writes either the accumulator block or, on the
// final pass, out.
template <int kInputs, bool kFromAcc, bool kToOut, class R>
PLEXUS_ALWAYS_INLINE void fold_pass(const R& reducer, const void* const* inputs,
                                    typename R::Acc* acc, void* out, size_t offset, size_t n) {
  using Elem = typename R::Elem;
  using Acc = typename R::Acc;
  static_assert(kInputs >= 1 && kInputs <= kMaxInputsPerPass);
  auto input = [&](int j) {
    return static_cast<const Elem*>(inputs[j < kInputs ? j : 0]) + offset;
  };
  const Elem* in0 = input(0);
  const Elem* in1 = input(1);
  const Elem* in2 = input(2);
  const Elem* in3 = input(3);
  Elem* dst = static_cast<Elem*>(out) + offset;
  PLEXUS_NO_LOOP_CARRIED_DEPENDENCE
  for (size_t i = 0; i < n; ++i) {
    Acc value;
    if constexpr (kFromAcc) {
      value = R::combine(acc[i], R::load(in0[i]));
    } else {
      value = R::load(in0[i]);
    }
    if constexpr (kInputs > 1) value = R::combine(value, R::load(in1[i]));
    if constexpr (kInputs > 2) value = R::combine(value, R::load(in2[i]));
    if constexpr (kInputs > 3) value = R::combine(value, R::load(in3[i]));
    if constexpr (kToOut) {
      dst[i] = reducer.finish(value);
    } else {
      acc[i] = value;
    }
  }
}

template <bool kFromAcc, class R>
PLEXUS_ALWAYS_INLINE void final_pass(const R& reducer, int inputs_left, const void* const* inputs,
                                     typename R::Acc* acc, void* out, size_t offset, size_t n) {
  switch (inputs_left) {
    case 1:
      fold_pass<1, kFromAcc, true>(reducer, inputs, acc, out, offset, n);
      break;
    case 2:
      fold_pass<2, kFromAcc, true>(reducer, inputs, acc, out, offset, n);
      break;
    case 3:
      fold_pass<3, kFromAcc, true>(reducer, inputs, acc, out, offset, n);
      break;
    default:
      fold_pass<4, kFromAcc, true>(reducer, inputs, acc, out, offset, n);
      break;
  }
}

// Reduces elements [offset, offset + n) of all k inputs, n <= the accumulator block.
// Rank order is kept: the accumulator is always the left operand.
template <class R>
PLEXUS_ALWAYS_INLINE void reduce_block(const R& reducer, const void* const* inputs, int k,
                                       void* out, size_t offset, size_t n) {
  using Acc = typename R::Acc;
  if (k <= kMaxInputsPerPass) {
    final_pass<false>(reducer, k, inputs, nullptr, out, offset, n);
    return;
  }
  Acc acc[kAccumulatorBlockBytes / sizeof(Acc)];
  fold_pass<kMaxInputsPerPass, false, false>(reducer, inputs, acc, out, offset, n);
  int next = kMaxInputsPerPass;
  // With the accumulator as one operand, a pass takes one input fewer.
  constexpr int kInputsPerLaterPass = kMaxInputsPerPass - 1;
  while (k - next > kInputsPerLaterPass) {
    fold_pass<kInputsPerLaterPass, true, false>(reducer, inputs + next, acc, out, offset, n);
    next += kInputsPerLaterPass;
  }
  final_pass<true>(reducer, k - next, inputs + next, acc, out, offset, n);
}

// Elements [begin, count). Full blocks get a compile-time trip count, which GCC's
// cheap -O2 vectoriser needs (it will not add a scalar epilogue loop).
template <class R>
PLEXUS_ALWAYS_INLINE void reduce_range(const R& reducer, const void* const* inputs, int k,
                                       void* out, size_t begin, size_t count) {
  constexpr size_t kBlock = kAccumulatorBlockBytes / sizeof(typename R::Acc);
  size_t offset = begin;
  for (; count - offset >= kBlock; offset += kBlock) {
    reduce_block(reducer, inputs, k, out, offset, kBlock);
  }
  if (offset < count) reduce_block(reducer, inputs, k, out, offset, count - offset);
}

using KernelFn = void (*)(const void* const* inputs, int k, void* out, size_t count,
                          uint32_t avg_divisor);

struct GenericKernels {
  static constexpr const char* kIsaName = "generic";
  template <class Format, plexus_redop_t kOp>
  static void run(const void* const* inputs, int k, void* out, size_t count, uint32_t avg_divisor) {
    reduce_range(Reducer<Format, kOp>(avg_divisor), inputs, k, out, 0, count);
  }
};

#if PLEXUS_REDUCE_HAVE_X86_KERNELS

// ---- AVX2 + F16C: the portable kernel recompiled for AVX2, plus an explicit fp16 loop
// (the vectoriser cannot turn the scalar fp16 conversion into vcvtph2ps/vcvtps2ph). ----

#define PLEXUS_TARGET_AVX2 __attribute__((target("avx2,f16c")))

template <plexus_redop_t kOp>
PLEXUS_TARGET_AVX2 PLEXUS_ALWAYS_INLINE __m256 combine_ps(__m256 acc, __m256 value) {
  if constexpr (kOp == PLEXUS_SUM || kOp == PLEXUS_AVG) {
    return _mm256_add_ps(acc, value);
  } else if constexpr (kOp == PLEXUS_PROD) {
    return _mm256_mul_ps(acc, value);
  } else {
    // min_ps/max_ps(a, b) return b unless a < b (a > b): the scalar combine's choice for
    // a non-NaN acc, including a NaN value. A NaN acc must be kept explicitly.
    const __m256 acc_is_nan = _mm256_cmp_ps(acc, acc, _CMP_UNORD_Q);
    const __m256 picked = kOp == PLEXUS_MIN ? _mm256_min_ps(acc, value) : _mm256_max_ps(acc, value);
    return _mm256_blendv_ps(picked, acc, acc_is_nan);
  }
}

PLEXUS_TARGET_AVX2 PLEXUS_ALWAYS_INLINE __m256 load_fp16x8(const void* input, size_t offset) {
  const auto* halves = static_cast<const uint16_t*>(input) + offset;
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(halves)));
}

// Reduces 8-element groups [0, vector_end) with the number of inputs fixed at compile
// time (kInputs > 0), so the input pointers live in registers, or read from the array
// each step (kInputs == 0, any k).
template <plexus_redop_t kOp, int kInputs>
PLEXUS_TARGET_AVX2 PLEXUS_ALWAYS_INLINE void reduce_fp16_f16c_vectors(const void* const* inputs,
                                                                      int k, void* out,
                                                                      size_t vector_end,
                                                                      uint32_t avg_divisor) {
  constexpr size_t kLanes = 8;
  const __m256 divisor = _mm256_set1_ps(static_cast<float>(avg_divisor));
  std::array<const void*, kInputs> fixed_inputs{};
  for (int j = 0; j < kInputs; ++j) fixed_inputs[j] = inputs[j];
  auto* dst = static_cast<uint16_t*>(out);
  for (size_t i = 0; i < vector_end; i += kLanes) {
    __m256 acc;
    if constexpr (kInputs > 0) {
      acc = load_fp16x8(fixed_inputs[0], i);
      for (int j = 1; j < kInputs; ++j) acc = combine_ps<kOp>(acc, load_fp16x8(fixed_inputs[j], i));
    } else {
      acc = load_fp16x8(inputs[0], i);
      for (int j = 1; j < k; ++j) acc = combine_ps<kOp>(acc, load_fp16x8(inputs[j], i));
    }
    if constexpr (kOp == PLEXUS_AVG) acc = _mm256_div_ps(acc, divisor);
    // Same fp32 operations in the same order as the scalar path, and F16C's
    // round-to-nearest-even equals shm::float_to_half, so the results are identical.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT));
  }
}

template <plexus_redop_t kOp>
PLEXUS_TARGET_AVX2 void reduce_fp16_f16c(const void* const* inputs, int k, void* out, size_t count,
                                         uint32_t avg_divisor) {
  const size_t vector_end = count - count % 8;
  switch (k) {
    case 2:
      reduce_fp16_f16c_vectors<kOp, 2>(inputs, k, out, vector_end, avg_divisor);
      break;
    case 3:
      reduce_fp16_f16c_vectors<kOp, 3>(inputs, k, out, vector_end, avg_divisor);
      break;
    case 4:
      reduce_fp16_f16c_vectors<kOp, 4>(inputs, k, out, vector_end, avg_divisor);
      break;
    default:
      reduce_fp16_f16c_vectors<kOp, 0>(inputs, k, out, vector_end, avg_divisor);
      break;
  }
  if (vector_end < count) {
    reduce_range(Reducer<Float16Format, kOp>(avg_divisor), inputs, k, out, vector_end, count);
  }
}

struct Avx2Kernels {
  static constexpr const char* kIsaName = "avx2+f16c";
  template <class Format, plexus_redop_t kOp>
  PLEXUS_TARGET_AVX2 static void run(const void* const* inputs, int k, void* out, size_t count,
                                     uint32_t avg_divisor) {
    if constexpr (std::is_same_v<Format, Float16Format>) {
      reduce_fp16_f16c<kOp>(inputs, k, out, count, avg_divisor);
    } else {
      reduce_range(Reducer<Format, kOp>(avg_divisor), inputs, k, out, 0, count);
    }
  }
};

bool cpu_has_avx2_and_f16c() {
  // __builtin_cpu_supports("avx2") also checks that the OS saves the YMM registers.
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  return (ecx & bit_F16C) != 0;
}

#endif  // PLEXUS_REDUCE_HAVE_X86_KERNELS

// ---- Dispatch tables, indexed [dtype][op]. ----

struct KernelTable {
  std::array<std::array<KernelFn, PLEXUS_NUM_REDOPS>, PLEXUS_NUM_DTYPES> kernels;
  const char* isa_name;
};

template <class Kernels, class Format>
constexpr std::array<KernelFn, PLEXUS_NUM_REDOPS> kernels_for_format() {
  static_assert(PLEXUS_SUM == 0 && PLEXUS_PROD == 1 && PLEXUS_MIN == 2 && PLEXUS_MAX == 3 &&
                PLEXUS_AVG == 4 && PLEXUS_NUM_REDOPS == 5);
  return {&Kernels::template run<Format, PLEXUS_SUM>, &Kernels::template run<Format, PLEXUS_PROD>,
          &Kernels::template run<Format, PLEXUS_MIN>, &Kernels::template run<Format, PLEXUS_MAX>,
          &Kernels::template run<Format, PLEXUS_AVG>};
}

template <class Kernels>
constexpr KernelTable make_kernel_table() {
  static_assert(PLEXUS_INT8 == 0 && PLEXUS_UINT8 == 1 && PLEXUS_INT32 == 2 && PLEXUS_UINT32 == 3 &&
                PLEXUS_INT64 == 4 && PLEXUS_UINT64 == 5 && PLEXUS_FLOAT16 == 6 &&
                PLEXUS_BFLOAT16 == 7 && PLEXUS_FLOAT32 == 8 && PLEXUS_FLOAT64 == 9 &&
                PLEXUS_NUM_DTYPES == 10);
  return {{
              kernels_for_format<Kernels, NativeFormat<int8_t>>(),
              kernels_for_format<Kernels, NativeFormat<uint8_t>>(),
              kernels_for_format<Kernels, NativeFormat<int32_t>>(),
              kernels_for_format<Kernels, NativeFormat<uint32_t>>(),
              kernels_for_format<Kernels, NativeFormat<int64_t>>(),
              kernels_for_format<Kernels, NativeFormat<uint64_t>>(),
              kernels_for_format<Kernels, Float16Format>(),
              kernels_for_format<Kernels, Bfloat16Format>(),
              kernels_for_format<Kernels, NativeFormat<float>>(),
              kernels_for_format<Kernels, NativeFormat<double>>(),
          },
          Kernels::kIsaName};
}

constexpr KernelTable kGenericKernels = make_kernel_table<GenericKernels>();

const KernelTable& active_kernels() {
#if PLEXUS_REDUCE_HAVE_X86_KERNELS
  static constexpr KernelTable kAvx2KernelTable = make_kernel_table<Avx2Kernels>();
  static const KernelTable& selected = cpu_has_avx2_and_f16c() ? kAvx2KernelTable : kGenericKernels;
  return selected;
#else
  return kGenericKernels;
#endif
}

void reduce_with(const KernelTable& table, plexus_dtype_t dtype, plexus_redop_t op,
                 const void* const* inputs, int k, void* out, size_t count, uint32_t avg_divisor) {
  assert(shm::is_valid_dtype(dtype) && shm::is_valid_redop(op));
  assert(k >= 1);
  assert(op != PLEXUS_AVG || avg_divisor >= 1);
  // Release builds: refuse rather than corrupt memory or trap on a division by zero.
  if (!shm::is_valid_dtype(dtype) || !shm::is_valid_redop(op) || k < 1 || count == 0 ||
      (op == PLEXUS_AVG && avg_divisor == 0)) {
    return;
  }
  if (k == 1 && op != PLEXUS_AVG) {
    // A single input reduces to itself.
    if (out != inputs[0]) std::memcpy(out, inputs[0], count * shm::dtype_size(dtype));
    return;
  }
  table.kernels[dtype][op](inputs, k, out, count, avg_divisor);
}

}  // namespace

void reduce_arrays(plexus_dtype_t dtype, plexus_redop_t op, const void* const* inputs, int k,
                   void* out, size_t count, uint32_t avg_divisor) {
  reduce_with(active_kernels(), dtype, op, inputs, k, out, count, avg_divisor);
}

void reduce_arrays_generic(plexus_dtype_t dtype, plexus_redop_t op, const void* const* inputs,
                           int k, void* out, size_t count, uint32_t avg_divisor) {
  reduce_with(kGenericKernels, dtype, op, inputs, k, out, count, avg_divisor);
}

const char* reduce_kernel_isa() { return active_kernels().isa_name; }

}  // namespace plexus::daemon
