#include "clientlib/nccl/src/nccl_types.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace plexus::nccl {
namespace {

// IEEE half and bfloat16 to and from float, rounding to nearest even (as the GPU does).
float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t float_to_half(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const float magnitude = std::fabs(f);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (magnitude >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (magnitude < 6.103515625e-05f) {  // subnormal half: multiples of 2^-24
    const float units = std::nearbyint(magnitude * 16777216.0f);  // ties to even
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(units));
  }
  const uint32_t m = std::bit_cast<uint32_t>(magnitude);
  // Drop 13 mantissa bits with round-to-nearest-even, then rebias the exponent.
  const uint32_t rounded = m + 0xfffu + ((m >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded >> 13) - (112u << 10)));
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

template <typename T>
void scale_as(const void* src, void* dst, size_t count, const void* scalar) {
  T s;
  std::memcpy(&s, scalar, sizeof(T));
  const T* in = static_cast<const T*>(src);
  T* out = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<T>(in[i] * s);
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void scale_16(const void* src, void* dst, size_t count, const void* scalar) {
  uint16_t raw;
  std::memcpy(&raw, scalar, sizeof(raw));
  const float s = ToFloat(raw);
  const auto* in = static_cast<const uint16_t*>(src);
  auto* out = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < count; ++i) out[i] = FromFloat(ToFloat(in[i]) * s);
}

}  // namespace

std::optional<plexus_dtype_t> to_plexus(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
      return PLEXUS_INT8;
    case ncclUint8:
      return PLEXUS_UINT8;
    case ncclInt32:
      return PLEXUS_INT32;
    case ncclUint32:
      return PLEXUS_UINT32;
    case ncclInt64:
      return PLEXUS_INT64;
    case ncclUint64:
      return PLEXUS_UINT64;
    case ncclFloat16:
      return PLEXUS_FLOAT16;
    case ncclFloat32:
      return PLEXUS_FLOAT32;
    case ncclFloat64:
      return PLEXUS_FLOAT64;
    case ncclBfloat16:
      return PLEXUS_BFLOAT16;
    default:
      return std::nullopt;
  }
}

std::optional<plexus_redop_t> builtin_op(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
      return PLEXUS_SUM;
    case ncclProd:
      return PLEXUS_PROD;
    case ncclMax:
      return PLEXUS_MAX;
    case ncclMin:
      return PLEXUS_MIN;
    case ncclAvg:
      return PLEXUS_AVG;
    default:
      return std::nullopt;
  }
}

void scale(const void* src, void* dst, size_t count, plexus_dtype_t type, const void* scalar) {
  switch (type) {
    case PLEXUS_INT8:
      return scale_as<int8_t>(src, dst, count, scalar);
    case PLEXUS_UINT8:
      return scale_as<uint8_t>(src, dst, count, scalar);
    case PLEXUS_INT32:
      return scale_as<int32_t>(src, dst, count, scalar);
    case PLEXUS_UINT32:
      return scale_as<uint32_t>(src, dst, count, scalar);
    case PLEXUS_INT64:
      return scale_as<int64_t>(src, dst, count, scalar);
    case PLEXUS_UINT64:
      return scale_as<uint64_t>(src, dst, count, scalar);
    case PLEXUS_FLOAT32:
      return scale_as<float>(src, dst, count, scalar);
    case PLEXUS_FLOAT64:
      return scale_as<double>(src, dst, count, scalar);
    case PLEXUS_FLOAT16:
      return scale_16<half_to_float, float_to_half>(src, dst, count, scalar);
    case PLEXUS_BFLOAT16:
      return scale_16<bf16_to_float, float_to_bf16>(src, dst, count, scalar);
    case PLEXUS_NUM_DTYPES:
      break;
  }
}

}  // namespace plexus::nccl
