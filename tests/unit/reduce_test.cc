// Tests for daemon/reduce (every dtype x op against a scalar reference written here)
// and for the fp16/bf16 conversions in shm/half_float.h.
#include "daemon/local/reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "shm/dtype.h"
#include "shm/half_float.h"

namespace plexus {
namespace {

using shm::bfloat16_to_float;
using shm::float_to_bfloat16;
using shm::float_to_half;
using shm::half_to_float;

// ---------------------------------------------------------------------------------------
// Element types as the test sees them: how to make values and how the reference reduces.

struct Float16Tag {};
struct Bfloat16Tag {};

template <class F>
void visit_dtype(plexus_dtype_t dtype, F&& visitor) {
  switch (dtype) {
    case PLEXUS_INT8:
      return visitor(int8_t{});
    case PLEXUS_UINT8:
      return visitor(uint8_t{});
    case PLEXUS_INT32:
      return visitor(int32_t{});
    case PLEXUS_UINT32:
      return visitor(uint32_t{});
    case PLEXUS_INT64:
      return visitor(int64_t{});
    case PLEXUS_UINT64:
      return visitor(uint64_t{});
    case PLEXUS_FLOAT16:
      return visitor(Float16Tag{});
    case PLEXUS_BFLOAT16:
      return visitor(Bfloat16Tag{});
    case PLEXUS_FLOAT32:
      return visitor(float{});
    case PLEXUS_FLOAT64:
      return visitor(double{});
    default:
      FAIL() << "unknown dtype " << dtype;
  }
}

template <class Tag>
constexpr bool kIsSixteenBitFloat =
    std::is_same_v<Tag, Float16Tag> || std::is_same_v<Tag, Bfloat16Tag>;

// The bits stored in a buffer for each tag.
template <class Tag>
using Storage = std::conditional_t<kIsSixteenBitFloat<Tag>, uint16_t, Tag>;

float widen(Float16Tag, uint16_t bits) { return half_to_float(bits); }
float widen(Bfloat16Tag, uint16_t bits) { return bfloat16_to_float(bits); }
uint16_t narrow(Float16Tag, float value) { return float_to_half(value); }
uint16_t narrow(Bfloat16Tag, float value) { return float_to_bfloat16(value); }

template <class Tag>
bool is_floating_dtype() {
  return kIsSixteenBitFloat<Tag> || std::is_floating_point_v<Tag>;
}

// Value of an element as a double (all dtypes but 64-bit integers convert exactly).
template <class Tag>
double element_as_double(const unsigned char* element) {
  Storage<Tag> bits;
  std::memcpy(&bits, element, sizeof bits);
  if constexpr (kIsSixteenBitFloat<Tag>) {
    return widen(Tag{}, bits);
  } else {
    return static_cast<double>(bits);
  }
}

// ---------------------------------------------------------------------------------------
// Reference reduction: one element at a time, deliberately unlike the kernels.

// Integers: sum and product are computed modulo 2^64 in uint64_t and then truncated to
// the element width, which is the same ring as wrapping in the element type.
template <class T>
T reference_integer(plexus_redop_t op, const std::vector<T>& values, uint32_t divisor) {
  uint64_t wrapped_sum = 0;
  uint64_t wrapped_product = 1;
  T minimum = values[0];
  T maximum = values[0];
  for (T v : values) {
    wrapped_sum += static_cast<uint64_t>(v);
    wrapped_product *= static_cast<uint64_t>(v);
    if (v < minimum) minimum = v;
    if (v > maximum) maximum = v;
  }
  const T sum = static_cast<T>(wrapped_sum);
  switch (op) {
    case PLEXUS_SUM:
      return sum;
    case PLEXUS_PROD:
      return static_cast<T>(wrapped_product);
    case PLEXUS_MIN:
      return minimum;
    case PLEXUS_MAX:
      return maximum;
    case PLEXUS_AVG:
      if constexpr (std::is_signed_v<T>) {
        // Built-in division truncates toward zero (AverageTruncatesTowardZero pins it).
        return static_cast<T>(static_cast<int64_t>(sum) / static_cast<int64_t>(divisor));
      } else {
        return static_cast<T>(static_cast<uint64_t>(sum) / divisor);
      }
    default:
      ADD_FAILURE() << "unknown op";
      return T{};
  }
}

// Floats: fold in rank order in the accumulation type Acc; any NaN makes min/max NaN.
template <class Acc>
Acc reference_float(plexus_redop_t op, const std::vector<Acc>& values, uint32_t divisor) {
  Acc result = values[0];
  bool saw_nan = std::isnan(values[0]);
  for (size_t j = 1; j < values.size(); ++j) {
    const Acc v = values[j];
    saw_nan = saw_nan || std::isnan(v);
    switch (op) {
      case PLEXUS_SUM:
      case PLEXUS_AVG:
        result = result + v;
        break;
      case PLEXUS_PROD:
        result = result * v;
        break;
      case PLEXUS_MIN:
        result = std::fmin(result, v);
        break;
      case PLEXUS_MAX:
        result = std::fmax(result, v);
        break;
      default:
        ADD_FAILURE() << "unknown op";
    }
  }
  if ((op == PLEXUS_MIN || op == PLEXUS_MAX) && saw_nan) {
    return std::numeric_limits<Acc>::quiet_NaN();
  }
  if (op == PLEXUS_AVG) result = result / static_cast<Acc>(divisor);
  return result;
}

using Bytes = std::vector<unsigned char>;

Bytes reference_reduce(plexus_dtype_t dtype, plexus_redop_t op, const std::vector<Bytes>& inputs,
                       size_t count, uint32_t divisor) {
  const size_t size = shm::dtype_size(dtype);
  Bytes result(count * size);
  visit_dtype(dtype, [&](auto tag) {
    using Tag = decltype(tag);
    using Elem = Storage<Tag>;
    std::vector<std::conditional_t<kIsSixteenBitFloat<Tag>, float, Elem>> values;
    for (size_t i = 0; i < count; ++i) {
      Elem out;
      values.clear();
      if constexpr (kIsSixteenBitFloat<Tag>) {
        for (const Bytes& input : inputs) {
          Elem bits;
          std::memcpy(&bits, input.data() + i * size, size);
          values.push_back(widen(Tag{}, bits));
        }
        out = narrow(Tag{}, reference_float(op, values, divisor));
      } else {
        for (const Bytes& input : inputs) {
          Elem v;
          std::memcpy(&v, input.data() + i * size, size);
          values.push_back(v);
        }
        if constexpr (std::is_floating_point_v<Elem>) {
          out = reference_float(op, values, divisor);
        } else {
          out = reference_integer(op, values, divisor);
        }
      }
      std::memcpy(result.data() + i * size, &out, size);
    }
  });
  return result;
}

// Floats: both NaN counts as equal (payloads are not specified); min/max compare by
// value because the sign of a zero chosen from {-0, +0} is not specified either.
// Everything else must be bit-identical.
::testing::AssertionResult same_elements(plexus_dtype_t dtype, plexus_redop_t op,
                                         const unsigned char* expected, const unsigned char* actual,
                                         size_t count) {
  const size_t size = shm::dtype_size(dtype);
  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  visit_dtype(dtype, [&](auto tag) {
    using Tag = decltype(tag);
    for (size_t i = 0; i < count; ++i) {
      const unsigned char* want = expected + i * size;
      const unsigned char* got = actual + i * size;
      if (std::memcmp(want, got, size) == 0) continue;
      if (is_floating_dtype<Tag>()) {
        const double want_value = element_as_double<Tag>(want);
        const double got_value = element_as_double<Tag>(got);
        if (std::isnan(want_value) && std::isnan(got_value)) continue;
        if ((op == PLEXUS_MIN || op == PLEXUS_MAX) && want_value == got_value) continue;
      }
      result = ::testing::AssertionFailure()
               << "element " << i << " of " << count << ": expected "
               << element_as_double<Tag>(want) << ", got " << element_as_double<Tag>(got);
      return;
    }
  });
  return result;
}

// ---------------------------------------------------------------------------------------
// Input generation.

// Mostly ordinary values (so sums and products stay meaningful), some arbitrary bit
// patterns (subnormals, huge values, inf, NaN) for the float types; integers are
// arbitrary bit patterns so that wrap-around happens.
Bytes random_elements(plexus_dtype_t dtype, size_t count, std::mt19937_64& rng) {
  const size_t size = shm::dtype_size(dtype);
  Bytes bytes(count * size);
  visit_dtype(dtype, [&](auto tag) {
    using Tag = decltype(tag);
    using Elem = Storage<Tag>;
    std::uniform_real_distribution<double> ordinary(-8.0, 8.0);
    for (size_t i = 0; i < count; ++i) {
      const uint64_t raw = rng();
      Elem value;
      if constexpr (std::is_integral_v<Tag>) {
        value = static_cast<Elem>(raw);
      } else if (raw % 10 == 0) {
        std::memcpy(&value, &raw, sizeof value);  // arbitrary bits
      } else if constexpr (kIsSixteenBitFloat<Tag>) {
        value = narrow(Tag{}, static_cast<float>(ordinary(rng)));
      } else {
        value = static_cast<Elem>(ordinary(rng));
      }
      std::memcpy(bytes.data() + i * size, &value, size);
    }
  });
  return bytes;
}

// ---------------------------------------------------------------------------------------
// Running a reduction with a given buffer placement on both kernel sets.

using ReduceFn = void (*)(plexus_dtype_t, plexus_redop_t, const void* const*, int, void*, size_t,
                          uint32_t);

struct KernelSet {
  const char* name;
  ReduceFn reduce;
};

const KernelSet kKernelSets[] = {{"dispatched", &daemon::reduce_arrays},
                                 {"generic", &daemon::reduce_arrays_generic}};

enum class Placement {
  kSeparateOut,          // out is its own buffer
  kInPlaceFirst,         // out == inputs[0]
  kInPlaceLast,          // out == inputs[k-1]
  kShiftedByOneElement,  // every buffer starts one element past an aligned address
};

const char* placement_name(Placement placement) {
  switch (placement) {
    case Placement::kSeparateOut:
      return "separate out";
    case Placement::kInPlaceFirst:
      return "out = in[0]";
    case Placement::kInPlaceLast:
      return "out = in[k-1]";
    case Placement::kShiftedByOneElement:
      return "shifted by one element";
  }
  return "?";
}

// Reduces `inputs` with `kernels` and returns the count output elements.
Bytes run_reduce(const KernelSet& kernels, plexus_dtype_t dtype, plexus_redop_t op,
                 const std::vector<Bytes>& inputs, size_t count, uint32_t divisor,
                 Placement placement) {
  const size_t size = shm::dtype_size(dtype);
  const int k = static_cast<int>(inputs.size());
  const size_t shift = placement == Placement::kShiftedByOneElement ? size : 0;
  // 64-byte aligned storage so that "shifted by one element" really is misaligned for
  // every vector width; +1 element of slack for the shift.
  const size_t stride = ((count + 1) * size + 63) / 64 * 64;
  std::vector<uint64_t> arena((stride * (k + 1) + 64) / sizeof(uint64_t));
  auto* base = reinterpret_cast<unsigned char*>(arena.data());
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;

  std::vector<const void*> input_ptrs;
  for (int j = 0; j < k; ++j) {
    unsigned char* p = base + j * stride + shift;
    if (count > 0) std::memcpy(p, inputs[j].data(), count * size);
    input_ptrs.push_back(p);
  }
  unsigned char* out = base + k * stride + shift;
  if (placement == Placement::kInPlaceFirst) out = base + shift;
  if (placement == Placement::kInPlaceLast) out = base + (k - 1) * stride + shift;

  kernels.reduce(dtype, op, input_ptrs.data(), k, out, count, divisor);
  return Bytes(out, out + count * size);
}

// ---------------------------------------------------------------------------------------
// Every dtype x op, over k, counts, placements and both kernel sets.

class ReduceAllCases : public ::testing::TestWithParam<std::tuple<plexus_dtype_t, plexus_redop_t>> {
};

TEST_P(ReduceAllCases, MatchesScalarReference) {
  const auto [dtype, op] = GetParam();
  std::mt19937_64 rng(1000 * dtype + op);
  // 5 -> one accumulator pass plus one input; 8 and 11 -> one and two middle passes;
  // 16389 elements span several accumulator blocks for every element size.
  for (int k : {1, 2, 3, 4, 5, 8, 11}) {
    for (size_t count :
         {size_t{0}, size_t{1}, size_t{7}, size_t{33}, size_t{4097}, size_t{16389}}) {
      std::vector<Bytes> inputs;
      for (int j = 0; j < k; ++j) inputs.push_back(random_elements(dtype, count, rng));
      const auto divisor = static_cast<uint32_t>(k);
      const Bytes expected = reference_reduce(dtype, op, inputs, count, divisor);
      for (Placement placement : {Placement::kSeparateOut, Placement::kInPlaceFirst,
                                  Placement::kInPlaceLast, Placement::kShiftedByOneElement}) {
        for (const KernelSet& kernels : kKernelSets) {
          SCOPED_TRACE(std::string(kernels.name) + " kernels, k=" + std::to_string(k) +
                       ", count=" + std::to_string(count) + ", " + placement_name(placement));
          const Bytes actual = run_reduce(kernels, dtype, op, inputs, count, divisor, placement);
          ASSERT_TRUE(same_elements(dtype, op, expected.data(), actual.data(), count));
        }
      }
    }
  }
}

std::vector<plexus_dtype_t> all_dtypes() {
  std::vector<plexus_dtype_t> dtypes;
  for (int d = 0; d < PLEXUS_NUM_DTYPES; ++d) dtypes.push_back(static_cast<plexus_dtype_t>(d));
  return dtypes;
}

std::vector<plexus_redop_t> all_ops() {
  std::vector<plexus_redop_t> ops;
  for (int o = 0; o < PLEXUS_NUM_REDOPS; ++o) ops.push_back(static_cast<plexus_redop_t>(o));
  return ops;
}

INSTANTIATE_TEST_SUITE_P(EveryDtypeAndOp, ReduceAllCases,
                         ::testing::Combine(::testing::ValuesIn(all_dtypes()),
                                            ::testing::ValuesIn(all_ops())),
                         [](const ::testing::TestParamInfo<ReduceAllCases::ParamType>& param_info) {
                           return std::string(shm::dtype_name(std::get<0>(param_info.param))) +
                                  "_" + std::string(shm::redop_name(std::get<1>(param_info.param)));
                         });

// ---------------------------------------------------------------------------------------
// Hand-picked cases with known answers.

// One element per input, given as doubles converted to dtype.
template <class Tag>
Bytes encode_one(double value) {
  Storage<Tag> stored;
  if constexpr (kIsSixteenBitFloat<Tag>) {
    stored = narrow(Tag{}, static_cast<float>(value));
  } else {
    stored = static_cast<Storage<Tag>>(value);
  }
  Bytes bytes(sizeof stored);
  std::memcpy(bytes.data(), &stored, sizeof stored);
  return bytes;
}

// Reduces the single-element inputs with both kernel sets (in every placement, and
// over a long run of copies so the vector loops see them too); returns the
// dispatched result after checking that every variant agrees with it.
double reduce_values(plexus_dtype_t dtype, plexus_redop_t op, const std::vector<double>& values,
                     uint32_t divisor = 0) {
  if (divisor == 0) divisor = static_cast<uint32_t>(values.size());
  constexpr size_t kCopies = 37;  // a vector body and a scalar tail for every dtype
  const size_t size = shm::dtype_size(dtype);
  std::vector<Bytes> inputs;
  visit_dtype(dtype, [&](auto tag) {
    for (double v : values) {
      const Bytes one = encode_one<decltype(tag)>(v);
      Bytes repeated;
      for (size_t c = 0; c < kCopies; ++c) repeated.insert(repeated.end(), one.begin(), one.end());
      inputs.push_back(repeated);
    }
  });
  double first_result = 0;
  bool have_first = false;
  for (Placement placement : {Placement::kSeparateOut, Placement::kInPlaceFirst,
                              Placement::kInPlaceLast, Placement::kShiftedByOneElement}) {
    for (const KernelSet& kernels : kKernelSets) {
      const Bytes out = run_reduce(kernels, dtype, op, inputs, kCopies, divisor, placement);
      visit_dtype(dtype, [&](auto tag) {
        for (size_t c = 0; c < kCopies; ++c) {
          const double result = element_as_double<decltype(tag)>(out.data() + c * size);
          if (!have_first) {
            first_result = result;
            have_first = true;
          }
          const bool same =
              (std::isnan(result) && std::isnan(first_result)) || result == first_result;
          EXPECT_TRUE(same) << kernels.name << " kernels, " << placement_name(placement)
                            << ", copy " << c << ": " << result << " vs " << first_result;
        }
      });
    }
  }
  return first_result;
}

const plexus_dtype_t kFloatDtypes[] = {PLEXUS_FLOAT16, PLEXUS_BFLOAT16, PLEXUS_FLOAT32,
                                       PLEXUS_FLOAT64};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(ReduceSpecialValues, InfinitiesAndNaN) {
  for (plexus_dtype_t dtype : kFloatDtypes) {
    SCOPED_TRACE(shm::dtype_name(dtype));
    EXPECT_TRUE(std::isnan(reduce_values(dtype, PLEXUS_SUM, {kInf, -kInf})));
    EXPECT_TRUE(std::isnan(reduce_values(dtype, PLEXUS_SUM, {1.0, kInf, 2.0, -kInf})));
    EXPECT_EQ(reduce_values(dtype, PLEXUS_SUM, {kInf, 5.0, kInf}), kInf);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_PROD, {-kInf, 2.0}), -kInf);
    EXPECT_TRUE(std::isnan(reduce_values(dtype, PLEXUS_PROD, {kInf, 0.0})));
    EXPECT_TRUE(std::isnan(reduce_values(dtype, PLEXUS_AVG, {kNaN, 1.0})));

    // NaN anywhere in the rank order wins min and max.
    for (plexus_redop_t op : {PLEXUS_MIN, PLEXUS_MAX}) {
      EXPECT_TRUE(std::isnan(reduce_values(dtype, op, {kNaN, 1.0, 2.0})));
      EXPECT_TRUE(std::isnan(reduce_values(dtype, op, {1.0, kNaN, 2.0})));
      EXPECT_TRUE(std::isnan(reduce_values(dtype, op, {1.0, 2.0, kNaN})));
      EXPECT_TRUE(std::isnan(reduce_values(dtype, op, {-kInf, 3.0, 4.0, 5.0, kNaN})));
      EXPECT_TRUE(std::isnan(reduce_values(dtype, op, {kNaN, kNaN})));
    }
    EXPECT_EQ(reduce_values(dtype, PLEXUS_MIN, {kInf, -kInf, 0.0}), -kInf);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_MAX, {kInf, -kInf, 0.0}), kInf);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_MIN, {kInf, kInf}), kInf);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_MAX, {-kInf, -kInf, -kInf}), -kInf);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_MIN, {3.0, -2.0, 7.0, -1.0, 0.5}), -2.0);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_MAX, {3.0, -2.0, 7.0, -1.0, 0.5}), 7.0);
  }
}

TEST(ReduceFloatSemantics, SixteenBitFloatsAccumulateInFp32AndRoundOnce) {
  // fp16 spacing at 2048 is 2: rounding after each add would give 2048+1 -> 2048 (tie to
  // even) twice; one rounding of the fp32 sum 2050 keeps it.
  EXPECT_EQ(reduce_values(PLEXUS_FLOAT16, PLEXUS_SUM, {2048.0, 1.0, 1.0}), 2050.0);
  // bf16 spacing at 256 is 2: the same effect.
  EXPECT_EQ(reduce_values(PLEXUS_BFLOAT16, PLEXUS_SUM, {256.0, 1.0, 1.0}), 258.0);
  // The fp32 product 300*300 = 90000 overflows fp16 only when rounded at the end; the
  // avg (90000/3 = 30000) is representable because the division happens in fp32 first.
  EXPECT_EQ(reduce_values(PLEXUS_FLOAT16, PLEXUS_PROD, {300.0, 300.0}), kInf);
  EXPECT_EQ(reduce_values(PLEXUS_FLOAT16, PLEXUS_AVG, {30000.0, 30000.0, 30000.0}), 30000.0);
  EXPECT_EQ(reduce_values(PLEXUS_FLOAT16, PLEXUS_AVG, {60000.0, 60000.0}), 60000.0);
  EXPECT_EQ(reduce_values(PLEXUS_BFLOAT16, PLEXUS_AVG, {1.0, 2.0}), 1.5);
}

TEST(ReduceFloatSemantics, FoldsInRankOrder) {
  // Left to right: ((1e8 + 1) + -1e8) + 1 = 0 + 1 in float (1e8 + 1 rounds to 1e8). A
  // pairwise tree (1e8 + 1) + (-1e8 + 1) would give 0.
  EXPECT_EQ(reduce_values(PLEXUS_FLOAT32, PLEXUS_SUM, {1e8, 1.0, -1e8, 1.0}), 1.0);
  EXPECT_EQ(reduce_values(PLEXUS_FLOAT32, PLEXUS_SUM, {1e8, 1.0, -1e8, 1.0, 1.0}), 2.0);
  // The same for doubles at 2^53.
  EXPECT_EQ(reduce_values(PLEXUS_FLOAT64, PLEXUS_SUM, {0x1p53, 1.0, -0x1p53, 1.0}), 1.0);
  // float32 accumulates in float32, not double: 2^24 + 1 is lost.
  EXPECT_EQ(reduce_values(PLEXUS_FLOAT32, PLEXUS_SUM, {0x1p24, 1.0, -0x1p24}), 0.0);
  EXPECT_EQ(reduce_values(PLEXUS_FLOAT64, PLEXUS_SUM, {0x1p24, 1.0, -0x1p24}), 1.0);
}

TEST(ReduceFloatSemantics, AverageDividesByTheGivenDivisor) {
  for (plexus_dtype_t dtype : kFloatDtypes) {
    SCOPED_TRACE(shm::dtype_name(dtype));
    EXPECT_EQ(reduce_values(dtype, PLEXUS_AVG, {2.0, 4.0}, 4), 1.5);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_AVG, {1.0, 2.0}), 1.5);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_AVG, {-3.0}, 2), -1.5);
  }
}

TEST(ReduceIntegerSemantics, SumAndProductWrapAround) {
  EXPECT_EQ(reduce_values(PLEXUS_INT8, PLEXUS_SUM, {127, 1}), -128);
  EXPECT_EQ(reduce_values(PLEXUS_INT8, PLEXUS_SUM, {-128, -1}), 127);
  EXPECT_EQ(reduce_values(PLEXUS_INT8, PLEXUS_PROD, {-128, -1}), -128);
  EXPECT_EQ(reduce_values(PLEXUS_INT8, PLEXUS_PROD, {16, 8, 1}), -128);
  EXPECT_EQ(reduce_values(PLEXUS_UINT8, PLEXUS_SUM, {255, 1, 3}), 3);
  EXPECT_EQ(reduce_values(PLEXUS_UINT8, PLEXUS_PROD, {16, 16}), 0);
  EXPECT_EQ(reduce_values(PLEXUS_UINT8, PLEXUS_PROD, {200, 2}), 144);
  EXPECT_EQ(reduce_values(PLEXUS_UINT8, PLEXUS_PROD, {255, 255, 255}), 255);  // (-1)^3
  EXPECT_EQ(reduce_values(PLEXUS_INT32, PLEXUS_SUM, {2147483647.0, 1.0}), -2147483648.0);
  EXPECT_EQ(reduce_values(PLEXUS_INT32, PLEXUS_PROD, {65536.0, 65536.0, 3.0}), 0.0);
  EXPECT_EQ(reduce_values(PLEXUS_INT32, PLEXUS_PROD, {65536.0, 32768.0}), -2147483648.0);
  EXPECT_EQ(reduce_values(PLEXUS_UINT32, PLEXUS_SUM, {4294967295.0, 2.0}), 1.0);
  EXPECT_EQ(reduce_values(PLEXUS_UINT32, PLEXUS_PROD, {65536.0, 65537.0}), 65536.0);
  EXPECT_EQ(reduce_values(PLEXUS_UINT64, PLEXUS_PROD, {0x1p32, 0x1p32}), 0.0);
  EXPECT_EQ(reduce_values(PLEXUS_UINT64, PLEXUS_PROD, {0x1p32, 0x1p31, 3.0}), 0x1p63);
}

TEST(ReduceIntegerSemantics, SixtyFourBitWrapExactly) {
  // Values beyond double's 53 bits, so compare raw elements.
  const int64_t int64_max = std::numeric_limits<int64_t>::max();
  const int64_t int64_min = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> a = {int64_max, int64_min, int64_max, 3};
  const std::vector<int64_t> b = {1, -1, int64_max, int64_min};
  std::vector<int64_t> out(a.size());
  const void* inputs[] = {a.data(), b.data()};
  for (const KernelSet& kernels : kKernelSets) {
    SCOPED_TRACE(kernels.name);
    kernels.reduce(PLEXUS_INT64, PLEXUS_SUM, inputs, 2, out.data(), a.size(), 2);
    EXPECT_EQ(out, (std::vector<int64_t>{int64_min, int64_max, -2, int64_min + 3}));
    kernels.reduce(PLEXUS_INT64, PLEXUS_PROD, inputs, 2, out.data(), a.size(), 2);
    EXPECT_EQ(out, (std::vector<int64_t>{int64_max, int64_min, 1, int64_min}));
    kernels.reduce(PLEXUS_INT64, PLEXUS_MIN, inputs, 2, out.data(), a.size(), 2);
    EXPECT_EQ(out, (std::vector<int64_t>{1, int64_min, int64_max, int64_min}));
    kernels.reduce(PLEXUS_INT64, PLEXUS_MAX, inputs, 2, out.data(), a.size(), 2);
    EXPECT_EQ(out, (std::vector<int64_t>{int64_max, -1, int64_max, 3}));

    const std::vector<uint64_t> u = {~uint64_t{0}, uint64_t{1} << 63};
    const std::vector<uint64_t> v = {2, uint64_t{1} << 63};
    std::vector<uint64_t> uout(u.size());
    const void* uinputs[] = {u.data(), v.data()};
    kernels.reduce(PLEXUS_UINT64, PLEXUS_SUM, uinputs, 2, uout.data(), u.size(), 2);
    EXPECT_EQ(uout, (std::vector<uint64_t>{1, 0}));
    kernels.reduce(PLEXUS_UINT64, PLEXUS_MAX, uinputs, 2, uout.data(), u.size(), 2);
    EXPECT_EQ(uout, (std::vector<uint64_t>{~uint64_t{0}, uint64_t{1} << 63}));
  }
}

TEST(ReduceIntegerSemantics, AverageTruncatesTowardZero) {
  for (plexus_dtype_t dtype : {PLEXUS_INT8, PLEXUS_INT32, PLEXUS_INT64}) {
    SCOPED_TRACE(shm::dtype_name(dtype));
    EXPECT_EQ(reduce_values(dtype, PLEXUS_AVG, {-7, 0}), -3);  // floor would be -4
    EXPECT_EQ(reduce_values(dtype, PLEXUS_AVG, {-10, 0, 0}), -3);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_AVG, {-1, 0}), 0);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_AVG, {-3, -4}), -3);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_AVG, {7, 0}), 3);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_AVG, {-9, -9, -9, -9, -9}), -9);
    EXPECT_EQ(reduce_values(dtype, PLEXUS_AVG, {-100, 1}, 7), -14);  // -99/7 = -14.14
  }
  EXPECT_EQ(reduce_values(PLEXUS_UINT8, PLEXUS_AVG, {7, 0}), 3);
  EXPECT_EQ(reduce_values(PLEXUS_UINT32, PLEXUS_AVG, {4000000000.0, 1.0}, 3), 1333333333.0);
  // The sum wraps in the element type before the division (plexus.h: integer sums wrap).
  EXPECT_EQ(reduce_values(PLEXUS_INT8, PLEXUS_AVG, {-128, -1}), 63);   // 127 / 2
  EXPECT_EQ(reduce_values(PLEXUS_UINT8, PLEXUS_AVG, {200, 100}), 22);  // 44 / 2
}

TEST(ReduceKernelIsa, NamesAKnownKernelSet) {
  const std::string isa = daemon::reduce_kernel_isa();
  EXPECT_TRUE(isa == "avx2+f16c" || isa == "generic") << isa;
}

TEST(ReduceArguments, ZeroCountWritesNothing) {
  const float in[1] = {1.0f};
  float out[1] = {42.0f};
  const void* inputs[] = {in, in};
  daemon::reduce_arrays(PLEXUS_FLOAT32, PLEXUS_SUM, inputs, 2, out, 0, 2);
  EXPECT_EQ(out[0], 42.0f);
}

// ---------------------------------------------------------------------------------------
// shm/half_float.h

// Independent fp16 decoder: sign * 2^(e-15) * (1 + m/1024), or 2^-14 * m/1024.
double decode_half_by_formula(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == 31) return mantissa ? kNaN : sign * kInf;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

TEST(HalfFloat, EveryFp16PatternDecodesAndRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto half = static_cast<uint16_t>(bits);
    const float value = half_to_float(half);
    const double expected = decode_half_by_formula(half);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(value)) << std::hex << bits;
      const uint16_t back = float_to_half(value);
      ASSERT_EQ(back & 0x7c00, 0x7c00) << std::hex << bits;
      ASSERT_NE(back & 0x03ff, 0) << std::hex << bits;  // still NaN, not inf
      continue;
    }
    ASSERT_EQ(static_cast<double>(value), expected) << std::hex << bits;
    ASSERT_EQ(std::signbit(value), (bits & 0x8000) != 0) << std::hex << bits;
    ASSERT_EQ(float_to_half(value), half) << std::hex << bits;
  }
}

TEST(HalfFloat, EveryBfloat16PatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto bf16 = static_cast<uint16_t>(bits);
    const float value = bfloat16_to_float(bf16);
    ASSERT_EQ(std::bit_cast<uint32_t>(value), bits << 16) << std::hex << bits;
    const uint16_t back = float_to_bfloat16(value);
    if (std::isnan(value)) {
      ASSERT_TRUE(std::isnan(bfloat16_to_float(back))) << std::hex << bits;
    } else {
      ASSERT_EQ(back, bf16) << std::hex << bits;
    }
  }
}

TEST(HalfFloat, Fp16KnownRounding) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(float_to_half(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // the tie rounds to even: inf
  EXPECT_EQ(float_to_half(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);             // tie, down to even
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);         // tie, up to even
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // above the tie
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f - 0x1p-23f), 0x3c00);  // below the tie
  EXPECT_EQ(float_to_half(2047.0f + 0.5f), 0x67ff + 1);          // 2047.5 -> 2048 (even)
  // Subnormals: units of 2^-24.
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);  // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(float_to_half(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half(3 * 0x1p-25f), 0x0002);  // tie between 1 and 2 units
  EXPECT_EQ(float_to_half(5 * 0x1p-25f), 0x0002);  // tie between 2 and 3 units
  EXPECT_EQ(float_to_half(1023 * 0x1p-24f), 0x03ff);
  EXPECT_EQ(float_to_half(1023.5f * 0x1p-24f), 0x0400);  // tie up into the normals
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400);
  EXPECT_EQ(float_to_half(-0x1p-24f), 0x8001);
  EXPECT_EQ(float_to_half(1e-10f), 0x0000);
  EXPECT_EQ(float_to_half(-1e-10f), 0x8000);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  // NaN (even one whose payload sits only in bits fp16 drops) stays NaN.
  for (uint32_t nan_bits : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fa00000u}) {
    const uint16_t half = float_to_half(std::bit_cast<float>(nan_bits));
    EXPECT_EQ(half & 0x7c00, 0x7c00) << std::hex << nan_bits;
    EXPECT_NE(half & 0x03ff, 0) << std::hex << nan_bits;
  }
  EXPECT_EQ(half_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_TRUE(std::isnan(half_to_float(0x7c01)));
}

// float_to_half picks the nearest fp16 value, ties to an even mantissa: checked as a
// property (against the neighbours of the result) over many floats in fp16's range.
TEST(HalfFloat, Fp16RoundingIsNearestEven) {
  std::mt19937 rng(7);
  // Exponents from below fp16's subnormals up to its largest binade.
  std::uniform_int_distribution<uint32_t> exponent(127 - 27, 127 + 15);
  std::uniform_int_distribution<uint32_t> mantissa(0, (1u << 23) - 1);
  for (int trial = 0; trial < 500000; ++trial) {
    const uint32_t bits = (exponent(rng) << 23) | mantissa(rng);
    const float value = std::bit_cast<float>(bits);
    if (value >= 65520.0f) continue;
    const uint16_t half = float_to_half(value);
    const double error = std::fabs(decode_half_by_formula(half) - value);
    const double below = half > 0 ? std::fabs(decode_half_by_formula(half - 1) - value) : kInf;
    const double above = std::fabs(decode_half_by_formula(half + 1) - value);
    ASSERT_LE(error, below) << value;
    ASSERT_LE(error, above) << value;
    if (error == below || error == above) {
      ASSERT_EQ(half & 1, 0) << "tie not to even: " << value;
    }
    ASSERT_EQ(float_to_half(-value), half | 0x8000) << value;
  }
}

TEST(HalfFloat, Bfloat16KnownRounding) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-8f), 0x3f80);             // tie, down to even
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * 0x1p-8f), 0x3f82);         // tie, up to even
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above the tie
  EXPECT_EQ(float_to_bfloat16(-1.0f - 0x1p-8f - 0x1p-20f), 0xbf81);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7f);  // just below a tie
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bfloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x00018000u)), 0x0002);  // subnormal tie
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x00008000u)), 0x0000);
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
  for (uint32_t nan_bits : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    const uint16_t bf16 = float_to_bfloat16(std::bit_cast<float>(nan_bits));
    EXPECT_TRUE(std::isnan(bfloat16_to_float(bf16))) << std::hex << nan_bits;
    EXPECT_NE(bf16 & 0x0040, 0) << "quiet bit, " << std::hex << nan_bits;
  }
}

}  // namespace
}  // namespace plexus
