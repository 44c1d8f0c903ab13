// The inter-node algorithms and the shape of the collective they plan: which algorithm
// serves which collective, their names (PLEXUS_ALGO), and make_plan.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/algorithms/plan.h"

namespace plexus::daemon::algo {

enum class Collective : uint8_t {
  kAllreduce,
  kReduceScatter,
  kAllgather,
  kBroadcast,
  kReduce,
  kAlltoall
};

enum class Algorithm : uint8_t {
  kRing,                      // allreduce (reduce-scatter + allgather), reducescatter, allgather
  kRecursiveHalvingDoubling,  // allreduce (Rabenseifner), any participant count
  kRecursiveDoubling,         // allreduce for small messages, any participant count
  kBruck,                     // allgather in ceil(log2 p) rounds
  kBinomial,                  // broadcast, reduce
  kChain,                     // pipelined broadcast, reduce
  kPairwise,                  // alltoall
  kOffload,                   // allreduce, allgather with one slow participant (Shape::speeds)
};

inline constexpr Algorithm kAllAlgorithms[] = {Algorithm::kRing,
                                               Algorithm::kRecursiveHalvingDoubling,
                                               Algorithm::kRecursiveDoubling,
                                               Algorithm::kBruck,
                                               Algorithm::kBinomial,
                                               Algorithm::kChain,
                                               Algorithm::kPairwise,
                                               Algorithm::kOffload};

const char* algorithm_name(Algorithm algorithm);  // "ring", "rhd", "rd", "bruck", ...
std::optional<Algorithm> parse_algorithm(std::string_view name);
const char* collective_name(Collective collective);

// The algorithms that can run `collective`, the default first.
std::span<const Algorithm> algorithms_for(Collective collective);
bool supports(Algorithm algorithm, Collective collective);

// One participant's view of a collective. Counts are in elements of elem_bytes.
struct Shape {
  Collective collective = Collective::kAllreduce;
  int participants = 1;
  int me = 0;
  int root = 0;  // broadcast, reduce
  uint32_t elem_bytes = 1;
  // allreduce, broadcast, reduce: elements in the work buffer.
  uint64_t count = 0;
  // allgather, reducescatter: each participant's segment, laid out in participant order
  // in the work buffer (segments may differ: nodes hold different numbers of ranks).
  std::vector<uint64_t> segments;
  // alltoall: what this participant sends to / receives from each participant, laid out
  // in participant order in kSend / kWork.
  std::vector<uint64_t> send_counts;
  std::vector<uint64_t> recv_counts;
  // chain, offload: elements per pipeline piece (0 picks a default).
  uint64_t pipeline_elems = 0;
  // Each participant's link speed relative to the median one's, in (0, 1], as the
  // communicator agreed on them for this op (the speed agreement: docs/architecture.md);
  // empty: all alike. The cost model and the offload allreduce and allgather follow them.
  std::vector<double> speeds;
  // offload without speeds: the slow participant (-1: the last) and the share of each chunk
  // it reduces (0: none; it sends its input and receives the result once).
  int slow = -1;
  double slow_share = 0;
};

// An empty string, or why the shape is inconsistent (me/root out of range, segment count
// not equal to participants, ...).
std::string check_shape(const Shape& shape);

// The plan for `shape` by `algorithm`. Preconditions: check_shape(shape) is empty and
// supports(algorithm, shape.collective).
Plan make_plan(Algorithm algorithm, const Shape& shape);

// Per-algorithm planners (one file each).
Plan plan_ring(const Shape& shape);
Plan plan_recursive_doubling(const Shape& shape);
Plan plan_recursive_halving_doubling(const Shape& shape);
Plan plan_bruck(const Shape& shape);
Plan plan_binomial(const Shape& shape);
Plan plan_chain(const Shape& shape);
Plan plan_pairwise(const Shape& shape);
Plan plan_offload(const Shape& shape);            // allreduce
Plan plan_offload_allgather(const Shape& shape);  // offload_allgather.cc
// Who plan_offload (and plan_offload_allgather) treats as the slow participant, and the
// share of each chunk it reduces (the allreduce's only):
// from Shape::speeds when given (the slowest, the lowest index among equals, and the share
// balanced against the fastest of the rest), else Shape::slow and Shape::slow_share.
struct OffloadSplit {
  int slow = 0;
  double share = 0;
};
OffloadSplit offload_split(const Shape& shape);
// Work-buffer bytes a slice of a collective between daemons aims at (op_slices.h cuts by
// it; the cost model counts a slice's rounds by it). Protocol: every node must use the same
// value.
inline constexpr uint64_t kSliceWorkBytes = 2u << 20;
// Offload's pipeline chunks (the slow node's input in the allreduce, its block in the
// allgather) are about this large: a slice of kSliceWorkBytes is 8, so a chunk's round
// trip through the healthy ring, which the slow link waits for at the op's end, is short.
// 1 MiB chunks left 4-5 % more of the slow link idle at x = 1/2 on 4 nodes at 400 Mbit/s;
// 128 KiB ones gained nothing more (docs/BENCHMARKS.md).
inline constexpr uint64_t kOffloadChunkBytes = 256 << 10;
inline constexpr uint64_t kOffloadMaxChunks = 64;
// The share of the reduction (0 .. 1/p) that a participant whose link runs at `x` of the
// others' speed takes in the offload allreduce so that its link and theirs finish
// together: none at or below x = (p-1)/(2p-3), where sending its input and receiving the
// result already take it as long as the others' work; 1/p (the ring's share) at x = 1.
double balanced_slow_share(int participants, double x);

// `total` elements split into `parts` nearly equal segments (the first ones one larger).
std::vector<uint64_t> split_evenly(uint64_t total, int parts);
// Prefix sums: offsets[i] = sum of sizes[0..i); offsets has sizes.size() + 1 entries.
std::vector<uint64_t> prefix_offsets(std::span<const uint64_t> sizes);

// i modulo p in [0, p): the rank i steps around a ring of p (i may be negative).
inline int wrap(int i, int p) { return ((i % p) + p) % p; }

}  // namespace plexus::daemon::algo
