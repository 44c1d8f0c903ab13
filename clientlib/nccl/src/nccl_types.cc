#include "clientlib/nccl/src/nccl_types.h"

#include <cstring>
#include <type_traits>

#include "shm/half_float.h"

namespace plexus::nccl {
namespace {

template <typename T>
void scale_as(const void* src, void* dst, size_t count, const void* scalar) {
  T s;
  std::memcpy(&s, scalar, sizeof(T));
  const T* in = static_cast<const T*>(src);
  T* out = static_cast<T*>(dst);
  if constexpr (std::is_integral_v<T>) {
    // Integers wrap, as the GPU's do (signed overflow would be undefined in C++).
    using U = std::make_unsigned_t<T>;
    for (size_t i = 0; i < count; ++i) {
      out[i] = static_cast<T>(static_cast<U>(static_cast<U>(in[i]) * static_cast<U>(s)));
    }
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = static_cast<T>(in[i] * s);
  }
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
      return scale_16<shm::half_to_float, shm::float_to_half>(src, dst, count, scalar);
    case PLEXUS_BFLOAT16:
      return scale_16<shm::bfloat16_to_float, shm::float_to_bfloat16>(src, dst, count, scalar);
    case PLEXUS_NUM_DTYPES:
      break;
  }
}

}  // namespace plexus::nccl
