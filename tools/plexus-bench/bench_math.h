// The arithmetic of a plexus-bench sweep, kept free of I/O so it can be unit tested: which
// sizes are run, how a size maps onto each collective's buffers, how time becomes bandwidth,
// and the statistics over per-iteration times. Conventions follow nccl-tests so the numbers
// can be compared with its output line by line.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace plexus::bench {

enum class Collective {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
};

// In the order `-C all` runs them.
inline constexpr std::array<Collective, 7> kAllCollectives = {
    Collective::kAllReduce, Collective::kBroadcast,     Collective::kReduce,
    Collective::kAllGather, Collective::kReduceScatter, Collective::kAllToAll,
    Collective::kSendRecv,
};

std::string_view collective_name(Collective collective);
std::optional<Collective> parse_collective(std::string_view name);
// Whether the collective takes a reduction operator (the redop column is "none" otherwise).
bool collective_reduces(Collective collective);
// Whether the collective takes a root (the root column is -1 otherwise).
bool collective_has_root(Collective collective);

// "64", "8K", "64M", "1G" (powers of 1024, either case) to bytes; nullopt when malformed or
// when the value does not fit in 64 bits.
std::optional<uint64_t> parse_byte_size(std::string_view text);

// The sizes of a sweep from min_bytes to max_bytes inclusive: multiplied by step_factor when
// step_bytes is 0, else increased by step_bytes. Requires min_bytes >= 1 with a factor >= 2,
// or step_bytes >= 1; stops before a step would overflow.
std::vector<uint64_t> sweep_sizes(uint64_t min_bytes, uint64_t max_bytes, uint64_t step_factor,
                                  uint64_t step_bytes);

// How one row's size maps onto a collective call, as nccl-tests maps it.
struct RowShape {
  // The count argument of the call: per rank for allgather, reducescatter and alltoall
  // (nccl-tests prints this in the count column).
  size_t count = 0;
  size_t send_count = 0;  // elements in each rank's send buffer
  size_t recv_count = 0;  // elements in each rank's recv buffer
  uint64_t bytes = 0;     // the size column: the larger buffer, in bytes
};
// Allgather, reducescatter and alltoall split the size over the ranks and round each rank's
// share down to a multiple of 16 bytes; a row whose count comes out 0 is skipped.
RowShape row_shape(Collective collective, uint64_t size_bytes, size_t type_size, int nranks);

// busbw = algbw * factor: 2(n-1)/n for allreduce, (n-1)/n for allgather, reducescatter and
// alltoall, 1 for broadcast, reduce and sendrecv (see nccl-tests' doc/PERFORMANCE.md).
double bus_bandwidth_factor(Collective collective, int nranks);
// Bytes moved per second in GB/s with 1 GB = 1e9 bytes; 0 when seconds is not positive.
double algorithm_bandwidth_gbs(uint64_t bytes, double seconds);

// What the time column reports: the mean over the timed iterations (nccl-tests' figure) or
// their median (steadier for latency claims).
enum class TimeStat { kMean, kMedian };
std::string_view time_stat_name(TimeStat stat);

// Mean of the values (0 for none).
double mean_of(std::span<const double> values);
// Median of the values: the middle one, or the mean of the two middle ones for an even
// count (0 for none).
double median_of(std::vector<double> values);

}  // namespace plexus::bench
