// Element types and reduction operators as they cross the client/daemon boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "plexus/plexus_types.h"

namespace plexus::shm {

constexpr size_t dtype_size(plexus_dtype_t dtype) {
  switch (dtype) {
    case PLEXUS_INT8:
    case PLEXUS_UINT8:
      return 1;
    case PLEXUS_FLOAT16:
    case PLEXUS_BFLOAT16:
      return 2;
    case PLEXUS_INT32:
    case PLEXUS_UINT32:
    case PLEXUS_FLOAT32:
      return 4;
    case PLEXUS_INT64:
    case PLEXUS_UINT64:
    case PLEXUS_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

constexpr bool is_valid_dtype(uint32_t v) { return v < PLEXUS_NUM_DTYPES; }
constexpr bool is_valid_redop(uint32_t v) { return v < PLEXUS_NUM_REDOPS; }

// Names as nccl-tests prints them (int8, uint8, int32, ..., half, bfloat16, float, double).
std::string_view dtype_name(plexus_dtype_t dtype);
std::string_view redop_name(plexus_redop_t op);
std::optional<plexus_dtype_t> parse_dtype(std::string_view name);
std::optional<plexus_redop_t> parse_redop(std::string_view name);

}  // namespace plexus::shm
