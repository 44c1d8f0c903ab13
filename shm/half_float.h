// Exact conversions between fp32 and the two 16-bit float formats Plexus reduces:
// IEEE binary16 (fp16) and bfloat16. Pure integer bit manipulation, so the results do
// not depend on the FP environment (rounding mode, FTZ/DAZ) and match what F16C's
// vcvtph2ps / vcvtps2ph(round-to-nearest-even) produce. Branch-free where it matters so
// that loops calling these can be auto-vectorised.
#pragma once

#include <bit>
#include <cstdint>

namespace plexus::shm {

// Quiet-NaN bits: the top mantissa bit of each format.
inline constexpr uint32_t kFloatQuietBit = 0x00400000u;
inline constexpr uint16_t kHalfQuietBit = 0x0200u;
inline constexpr uint16_t kBfloat16QuietBit = 0x0040u;

// fp16 -> fp32 is exact for every finite value. A signalling NaN comes back quiet (as
// vcvtph2ps does); the payload bits are kept.
constexpr float half_to_float(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) {  // inf or NaN
    const uint32_t quiet = mantissa != 0 ? kFloatQuietBit : 0;
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mantissa << 13));
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, always a normal float. The product is exact
    // (an integer below 2^10 times a power of two).
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  // Normal: rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// fp32 -> fp16 with round-to-nearest-even; overflow gives inf, tiny values give
// subnormals or signed zero, NaN gives a quiet NaN with the top payload bits kept.
constexpr uint16_t float_to_half(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;

  if (magnitude > 0x7f800000u) {  // NaN
    return static_cast<uint16_t>(sign | 0x7c00u | kHalfQuietBit | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 is halfway between the largest half (65504, odd mantissa) and 2^16, so it and
  // everything above rounds to inf.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);

  if (magnitude >= 0x38800000u) {  // at least 2^-14: a normal half
    // Rebias the exponent (127 -> 15) and drop 13 mantissa bits. A carry out of the
    // mantissa correctly bumps the exponent.
    uint32_t half = (magnitude >> 13) - (112u << 10);
    const uint32_t dropped = magnitude & 0x1fffu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }

  // Subnormal half: the value in units of 2^-24, rounded to an integer (1024 means it
  // rounded up to the smallest normal, whose encoding is also 1024).
  const uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return sign;  // below 2^-25: rounds to zero
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14..24
  uint32_t half = significand >> shift;
  const uint32_t dropped = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (dropped > halfway || (dropped == halfway && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

// bf16 is the top half of an fp32, so widening is a shift (NaNs keep their bits).
constexpr float bfloat16_to_float(uint16_t bf16) {
  return std::bit_cast<float>(static_cast<uint32_t>(bf16) << 16);
}

// fp32 -> bf16 with round-to-nearest-even (overflow gives inf, subnormals round like any
// other value); NaN gives a quiet NaN. Written without branches so it vectorises.
constexpr uint16_t float_to_bfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  // Adding 0x7fff plus the lowest kept bit rounds half-way cases to even.
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | kBfloat16QuietBit;
  const bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

}  // namespace plexus::shm
