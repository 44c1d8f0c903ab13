#include "tools/plexus-bench/bench_math.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace plexus::bench {

std::string_view collective_name(Collective collective) {
  switch (collective) {
    case Collective::kAllReduce:
      return "allreduce";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kAllGather:
      return "allgather";
    case Collective::kReduceScatter:
      return "reducescatter";
    case Collective::kAllToAll:
      return "alltoall";
    case Collective::kSendRecv:
      return "sendrecv";
  }
  return "?";
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (const Collective collective : kAllCollectives) {
    if (collective_name(collective) == name) return collective;
  }
  return std::nullopt;
}

bool collective_reduces(Collective collective) {
  return collective == Collective::kAllReduce || collective == Collective::kReduce ||
         collective == Collective::kReduceScatter;
}

bool collective_has_root(Collective collective) {
  return collective == Collective::kBroadcast || collective == Collective::kReduce;
}

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint64_t multiplier = 1;
  switch (text.back()) {
    case 'k':
    case 'K':
      multiplier = uint64_t{1} << 10;
      break;
    case 'm':
    case 'M':
      multiplier = uint64_t{1} << 20;
      break;
    case 'g':
    case 'G':
      multiplier = uint64_t{1} << 30;
      break;
    default:
      break;
  }
  if (multiplier != 1) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t value = 0;
  for (const char digit : text) {
    if (digit < '0' || digit > '9') return std::nullopt;
    const auto digit_value = static_cast<uint64_t>(digit - '0');
    if (value > (kMax - digit_value) / 10) return std::nullopt;
    value = value * 10 + digit_value;
  }
  if (value > kMax / multiplier) return std::nullopt;
  return value * multiplier;
}

std::vector<uint64_t> sweep_sizes(uint64_t min_bytes, uint64_t max_bytes, uint64_t step_factor,
                                  uint64_t step_bytes) {
  std::vector<uint64_t> sizes;
  const bool by_factor = step_bytes == 0;
  // Without these the loop would never advance.
  if (by_factor && (step_factor < 2 || min_bytes == 0)) return sizes;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (uint64_t size = min_bytes; size <= max_bytes;) {
    sizes.push_back(size);
    if (by_factor) {
      if (size > kMax / step_factor) break;
      size *= step_factor;
    } else {
      if (size > kMax - step_bytes) break;
      size += step_bytes;
    }
  }
  return sizes;
}

RowShape row_shape(Collective collective, uint64_t size_bytes, size_t type_size, int nranks) {
  RowShape shape;
  if (type_size == 0 || nranks < 1) return shape;
  const size_t total = static_cast<size_t>(size_bytes / type_size);
  const auto ranks = static_cast<size_t>(nranks);
  switch (collective) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv:
      shape.count = total;
      shape.send_count = total;
      shape.recv_count = total;
      break;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: {
      // Each rank's block is rounded down to whole 16-byte units, as nccl-tests does, so the
      // rows line up with its rows for the same -b/-e.
      const size_t elements_per_unit = std::max<size_t>(1, 16 / type_size);
      const size_t per_rank = total / ranks / elements_per_unit * elements_per_unit;
      shape.count = per_rank;
      shape.send_count = collective == Collective::kAllGather ? per_rank : per_rank * ranks;
      shape.recv_count = collective == Collective::kReduceScatter ? per_rank : per_rank * ranks;
      break;
    }
  }
  shape.bytes = static_cast<uint64_t>(std::max(shape.send_count, shape.recv_count)) * type_size;
  return shape;
}

double bus_bandwidth_factor(Collective collective, int nranks) {
  if (nranks < 1) return 0.0;
  const double n = static_cast<double>(nranks);
  switch (collective) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1.0) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (n - 1.0) / n;
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

double algorithm_bandwidth_gbs(uint64_t bytes, double seconds) {
  if (!(seconds > 0.0)) return 0.0;
  return static_cast<double>(bytes) / 1.0e9 / seconds;
}

std::string_view time_stat_name(TimeStat stat) {
  return stat == TimeStat::kMedian ? "median" : "mean";
}

double mean_of(std::span<const double> values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double median_of(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const size_t middle = values.size() / 2;
  const auto middle_it = values.begin() + static_cast<std::ptrdiff_t>(middle);
  std::nth_element(values.begin(), middle_it, values.end());
  const double upper = *middle_it;
  if (values.size() % 2 == 1) return upper;
  // After nth_element everything before the middle is <= it; the largest of those is the
  // other middle value.
  const double lower = *std::max_element(values.begin(), middle_it);
  return (lower + upper) / 2.0;
}

}  // namespace plexus::bench
