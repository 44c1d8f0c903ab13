#include "shm/dtype.h"

#include <array>

namespace plexus::shm {
namespace {
struct DtypeName {
  plexus_dtype_t dtype;
  std::string_view name;
  std::string_view alias;
};
constexpr std::array<DtypeName, PLEXUS_NUM_DTYPES> kDtypeNames{{
    {PLEXUS_INT8, "int8", "char"},
    {PLEXUS_UINT8, "uint8", "uchar"},
    {PLEXUS_INT32, "int32", "int"},
    {PLEXUS_UINT32, "uint32", "uint"},
    {PLEXUS_INT64, "int64", "long"},
    {PLEXUS_UINT64, "uint64", "ulong"},
    {PLEXUS_FLOAT16, "half", "float16"},
    {PLEXUS_BFLOAT16, "bfloat16", "bf16"},
    {PLEXUS_FLOAT32, "float", "float32"},
    {PLEXUS_FLOAT64, "double", "float64"},
}};
constexpr std::array<std::string_view, PLEXUS_NUM_REDOPS> kRedopNames{"sum", "prod", "min", "max",
                                                                      "avg"};
}  // namespace

std::string_view dtype_name(plexus_dtype_t dtype) {
  return is_valid_dtype(dtype) ? kDtypeNames[dtype].name : std::string_view{"?"};
}

std::string_view redop_name(plexus_redop_t op) {
  return is_valid_redop(op) ? kRedopNames[op] : std::string_view{"?"};
}

std::optional<plexus_dtype_t> parse_dtype(std::string_view name) {
  for (const auto& d : kDtypeNames) {
    if (name == d.name || name == d.alias) return d.dtype;
  }
  return std::nullopt;
}

std::optional<plexus_redop_t> parse_redop(std::string_view name) {
  for (size_t i = 0; i < kRedopNames.size(); ++i) {
    if (name == kRedopNames[i]) return static_cast<plexus_redop_t>(i);
  }
  return std::nullopt;
}

}  // namespace plexus::shm
