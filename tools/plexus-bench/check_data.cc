#include "tools/plexus-bench/check_data.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "shm/half_float.h"

namespace plexus::bench {
namespace {

// Element formats: how an integer becomes an element, and the type reductions accumulate in
// (the element type itself, except fp32 for the two 16-bit float formats).
template <class T>
struct NativeFormat {
  using Elem = T;
  using Acc = T;
  static Elem from_int(int64_t value) { return static_cast<Elem>(value); }
  static Acc load(Elem value) { return value; }
  static Elem store(Acc value) { return value; }
};

struct HalfFormat {
  using Elem = uint16_t;
  using Acc = float;
  static Elem from_int(int64_t value) { return shm::float_to_half(static_cast<float>(value)); }
  static Acc load(Elem value) { return shm::half_to_float(value); }
  static Elem store(Acc value) { return shm::float_to_half(value); }
};

struct Bfloat16Format {
  using Elem = uint16_t;
  using Acc = float;
  static Elem from_int(int64_t value) { return shm::float_to_bfloat16(static_cast<float>(value)); }
  static Acc load(Elem value) { return shm::bfloat16_to_float(value); }
  static Elem store(Acc value) { return shm::float_to_bfloat16(value); }
};

// Calls fn with a format object for dtype; every fn instantiation returns the same type.
template <class Fn>
decltype(auto) with_format(plexus_dtype_t dtype, Fn&& fn) {
  switch (dtype) {
    case PLEXUS_INT8:
      return fn(NativeFormat<int8_t>{});
    case PLEXUS_UINT8:
      return fn(NativeFormat<uint8_t>{});
    case PLEXUS_INT32:
      return fn(NativeFormat<int32_t>{});
    case PLEXUS_UINT32:
      return fn(NativeFormat<uint32_t>{});
    case PLEXUS_INT64:
      return fn(NativeFormat<int64_t>{});
    case PLEXUS_UINT64:
      return fn(NativeFormat<uint64_t>{});
    case PLEXUS_FLOAT16:
      return fn(HalfFormat{});
    case PLEXUS_BFLOAT16:
      return fn(Bfloat16Format{});
    case PLEXUS_FLOAT32:
      return fn(NativeFormat<float>{});
    case PLEXUS_FLOAT64:
      return fn(NativeFormat<double>{});
    default:
      break;
  }
  throw std::invalid_argument("unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

template <class Elem>
uint64_t to_bits(Elem value) {
  if constexpr (sizeof(Elem) == 1) {
    return std::bit_cast<uint8_t>(value);
  } else if constexpr (sizeof(Elem) == 2) {
    return std::bit_cast<uint16_t>(value);
  } else if constexpr (sizeof(Elem) == 4) {
    return std::bit_cast<uint32_t>(value);
  } else {
    static_assert(sizeof(Elem) == 8);
    return std::bit_cast<uint64_t>(value);
  }
}

// Bitwise, so that a NaN is always wrong and no tolerance creeps in.
template <class Elem>
bool same_bits(Elem a, Elem b) {
  return to_bits(a) == to_bits(b);
}

// Integer arithmetic wraps in the element type; small types go through unsigned int so that
// the promotion to int cannot overflow.
template <class T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class Acc>
Acc combine(plexus_redop_t op, Acc acc, Acc value) {
  switch (op) {
    case PLEXUS_SUM:
    case PLEXUS_AVG:
      if constexpr (std::is_integral_v<Acc>) {
        return static_cast<Acc>(static_cast<WrapType<Acc>>(acc) +
                                static_cast<WrapType<Acc>>(value));
      } else {
        return acc + value;
      }
    case PLEXUS_PROD:
      if constexpr (std::is_integral_v<Acc>) {
        return static_cast<Acc>(static_cast<WrapType<Acc>>(acc) *
                                static_cast<WrapType<Acc>>(value));
      } else {
        return acc * value;
      }
    case PLEXUS_MIN:
      return value < acc ? value : acc;
    case PLEXUS_MAX:
      return value > acc ? value : acc;
    default:
      break;
  }
  throw std::invalid_argument("unknown reduction op " + std::to_string(static_cast<int>(op)));
}

// The element op produces from the values of ranks 0..nranks-1, folded in rank order.
template <class Format, class ValueOfRank>
typename Format::Elem reduce_values(plexus_redop_t op, int nranks, ValueOfRank value_of_rank) {
  using Acc = typename Format::Acc;
  using Elem = typename Format::Elem;
  Acc acc = Format::load(Format::from_int(value_of_rank(0)));
  for (int rank = 1; rank < nranks; ++rank) {
    acc = combine(op, acc, Format::load(Format::from_int(value_of_rank(rank))));
  }
  if (op != PLEXUS_AVG) return Format::store(acc);
  if constexpr (std::is_floating_point_v<Acc>) {
    return Format::store(acc / static_cast<Acc>(nranks));
  } else if constexpr (std::is_signed_v<Acc>) {
    return static_cast<Elem>(static_cast<int64_t>(acc) / static_cast<int64_t>(nranks));
  } else {
    return static_cast<Elem>(static_cast<uint64_t>(acc) / static_cast<uint64_t>(nranks));
  }
}

// One period of rank's contribution, already converted to elements.
template <class Format>
std::vector<typename Format::Elem> contribution_period(const DataPattern& pattern, int rank) {
  std::vector<typename Format::Elem> period(DataPattern::kPeriod);
  for (size_t phase = 0; phase < period.size(); ++phase) {
    period[phase] = Format::from_int(pattern.value_at_phase(rank, phase));
  }
  return period;
}

template <class Format>
std::vector<typename Format::Elem> reduction_period(const DataPattern& pattern, plexus_redop_t op) {
  std::vector<typename Format::Elem> period(DataPattern::kPeriod);
  for (size_t phase = 0; phase < period.size(); ++phase) {
    period[phase] = reduce_values<Format>(
        op, pattern.nranks(), [&](int rank) { return pattern.value_at_phase(rank, phase); });
  }
  return period;
}

// Counts elements of buffer that differ from the periodic expectation, starting at the
// period phase of first_index.
template <class Elem>
uint64_t count_mismatches(const void* buffer, size_t count, const std::vector<Elem>& expected,
                          size_t first_phase) {
  const auto* elements = static_cast<const Elem*>(buffer);
  uint64_t wrong = 0;
  size_t phase = first_phase;
  for (size_t i = 0; i < count; ++i) {
    wrong += same_bits(elements[i], expected[phase]) ? 0 : 1;
    if (++phase == expected.size()) phase = 0;
  }
  return wrong;
}

// Largest integer whose nranks-fold sum is still exact (and, for integers, does not wrap) in
// dtype, so sums and averages are checked without rounding questions.
int64_t exact_sum_limit(plexus_dtype_t dtype) {
  switch (dtype) {
    case PLEXUS_INT8:
      return 127;
    case PLEXUS_UINT8:
      return 255;
    case PLEXUS_BFLOAT16:
      return 256;  // 8 significant bits
    case PLEXUS_FLOAT16:
      return 2048;  // 11 significant bits
    default:
      return int64_t{1} << 24;  // fp32's exact integer range bounds the rest comfortably
  }
}

constexpr int64_t kLargestValue = 100;  // also the kMove range: exact in every dtype

uint64_t mix(uint64_t stream, uint64_t position) {
  // splitmix64's finaliser: any change in either input flips about half the output bits.
  uint64_t x = (stream << 32) ^ position;
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The prod pattern picks one rank per phase from a stream no rank number can reach.
constexpr uint64_t kProductStream = 0xffffffffull;

}  // namespace

DataPattern::DataPattern(PatternKind kind, plexus_dtype_t dtype, int nranks, uint32_t seed)
    : kind_(kind), dtype_(dtype), nranks_(std::max(nranks, 1)), seed_(seed) {
  max_value_ = std::clamp<int64_t>(exact_sum_limit(dtype) / nranks_, 1, kLargestValue);
}

int64_t DataPattern::value_at_phase(int rank, size_t phase) const {
  const auto stream = static_cast<uint64_t>(rank);
  switch (kind_) {
    case PatternKind::kReduce:
      return 1 + static_cast<int64_t>(mix(stream, phase) % static_cast<uint64_t>(max_value_));
    case PatternKind::kProduct: {
      // nranks + 1 choices: some phases have no 2 at all, so products of 1 get checked too.
      const uint64_t chosen = mix(kProductStream, phase) % static_cast<uint64_t>(nranks_ + 1);
      return chosen == stream ? 2 : 1;
    }
    case PatternKind::kMove:
      return 1 + static_cast<int64_t>(mix(stream, phase) % static_cast<uint64_t>(kLargestValue));
  }
  return 1;
}

void fill_contribution(void* buffer, size_t count, const DataPattern& pattern, int rank,
                       size_t first_index) {
  with_format(pattern.dtype(), [&](auto format) {
    using Format = decltype(format);
    const auto period = contribution_period<Format>(pattern, rank);
    auto* elements = static_cast<typename Format::Elem*>(buffer);
    size_t phase = pattern.phase(first_index);
    for (size_t i = 0; i < count; ++i) {
      elements[i] = period[phase];
      if (++phase == period.size()) phase = 0;
    }
  });
}

uint64_t count_wrong_contribution(const void* buffer, size_t count, const DataPattern& pattern,
                                  int rank, size_t first_index) {
  return with_format(pattern.dtype(), [&](auto format) -> uint64_t {
    using Format = decltype(format);
    return count_mismatches(buffer, count, contribution_period<Format>(pattern, rank),
                            pattern.phase(first_index));
  });
}

uint64_t count_wrong_reduction(const void* buffer, size_t count, const DataPattern& pattern,
                               plexus_redop_t op, size_t first_index) {
  return with_format(pattern.dtype(), [&](auto format) -> uint64_t {
    using Format = decltype(format);
    return count_mismatches(buffer, count, reduction_period<Format>(pattern, op),
                            pattern.phase(first_index));
  });
}

uint64_t element_bits(plexus_dtype_t dtype, int64_t value) {
  return with_format(dtype, [&](auto format) -> uint64_t {
    using Format = decltype(format);
    return to_bits(Format::from_int(value));
  });
}

uint64_t reduced_element_bits(plexus_dtype_t dtype, plexus_redop_t op,
                              std::span<const int64_t> values) {
  if (values.empty()) throw std::invalid_argument("reduced_element_bits needs at least one value");
  return with_format(dtype, [&](auto format) -> uint64_t {
    using Format = decltype(format);
    return to_bits(reduce_values<Format>(op, static_cast<int>(values.size()), [&](int rank) {
      return values[static_cast<size_t>(rank)];
    }));
  });
}

}  // namespace plexus::bench
