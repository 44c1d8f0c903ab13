#include "tests/integration/test_data.h"

#include <cstdio>
#include <cstring>

#include "shm/dtype.h"
#include "shm/half_float.h"

namespace plexus::test {
namespace {

bool is_unsigned_int(plexus_dtype_t d) {
  return d == PLEXUS_UINT8 || d == PLEXUS_UINT32 || d == PLEXUS_UINT64;
}

// Small integers, exact in every dtype (bf16 included) for up to 32 ranks.
int64_t input_value(plexus_dtype_t dtype, plexus_redop_t op, int rank, size_t i) {
  const bool negative_ok = !is_unsigned_int(dtype);
  const auto r = static_cast<uint64_t>(rank);
  switch (op) {
    case PLEXUS_PROD: {
      const uint64_t k = (r + i) % 5;
      if (k == 0 && negative_ok) return -1;
      return k == 1 ? 2 : 1;
    }
    case PLEXUS_MIN:
    case PLEXUS_MAX:
      return static_cast<int64_t>((r * 5 + i * 3) % 11) - (negative_ok ? 5 : 0);
    default:
      return static_cast<int64_t>((r * 3 + i) % 8) - (negative_ok ? 3 : 0);
  }
}

uint64_t encode_integer(plexus_dtype_t dtype, int64_t v) {
  switch (dtype) {
    case PLEXUS_FLOAT16:
      return shm::float_to_half(static_cast<float>(v));
    case PLEXUS_BFLOAT16:
      return shm::float_to_bfloat16(static_cast<float>(v));
    case PLEXUS_FLOAT32: {
      float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return bits;
    }
    case PLEXUS_FLOAT64: {
      double d = static_cast<double>(v);
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      return bits;
    }
    default: {
      // Two's complement truncated to the element width.
      const size_t bytes = shm::dtype_size(dtype);
      const uint64_t mask = bytes == 8 ? ~0ull : ((1ull << (bytes * 8)) - 1);
      return static_cast<uint64_t>(v) & mask;
    }
  }
}

}  // namespace

std::string to_hex(uint64_t v) {
  char text[20];
  std::snprintf(text, sizeof(text), "%llx", static_cast<unsigned long long>(v));
  return text;
}

uint64_t input_bits(plexus_dtype_t dtype, plexus_redop_t op, int rank, size_t i) {
  return encode_integer(dtype, input_value(dtype, op, rank, i));
}

uint64_t reduced_bits(plexus_dtype_t dtype, plexus_redop_t op, int nranks, size_t i) {
  int64_t acc = input_value(dtype, op, 0, i);
  for (int r = 1; r < nranks; ++r) {
    const int64_t v = input_value(dtype, op, r, i);
    switch (op) {
      case PLEXUS_PROD:
        acc *= v;
        break;
      case PLEXUS_MIN:
        acc = v < acc ? v : acc;
        break;
      case PLEXUS_MAX:
        acc = v > acc ? v : acc;
        break;
      default:
        acc += v;
        break;
    }
  }
  if (op != PLEXUS_AVG) return encode_integer(dtype, acc);
  // avg: the documented rule per dtype.
  switch (dtype) {
    case PLEXUS_FLOAT16:
      return shm::float_to_half(static_cast<float>(acc) / static_cast<float>(nranks));
    case PLEXUS_BFLOAT16:
      return shm::float_to_bfloat16(static_cast<float>(acc) / static_cast<float>(nranks));
    case PLEXUS_FLOAT32: {
      float f = static_cast<float>(acc) / static_cast<float>(nranks);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return bits;
    }
    case PLEXUS_FLOAT64: {
      double d = static_cast<double>(acc) / nranks;
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      return bits;
    }
    default:
      return encode_integer(dtype, acc / nranks);  // truncates toward zero
  }
}

uint64_t load_bits(const void* buffer, plexus_dtype_t dtype, size_t index) {
  const size_t bytes = shm::dtype_size(dtype);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const std::byte*>(buffer) + index * bytes, bytes);
  return bits;
}

void store_bits(void* buffer, plexus_dtype_t dtype, size_t index, uint64_t bits) {
  const size_t bytes = shm::dtype_size(dtype);
  std::memcpy(static_cast<std::byte*>(buffer) + index * bytes, &bits, bytes);
}

void fill_input(void* buffer, plexus_dtype_t dtype, plexus_redop_t op, int rank, size_t count,
                size_t first_index) {
  for (size_t j = 0; j < count; ++j) {
    store_bits(buffer, dtype, j, input_bits(dtype, op, rank, first_index + j));
  }
}

}  // namespace plexus::test
