// Bruck allgather: in round k every participant sends what it holds (its own block and the
// 2^k - 1 after it) to the participant 2^k before it, so all p blocks arrive in
// ceil(log2 p) rounds. Blocks land directly in their final place: no rotation at the end.
#include <algorithm>

#include "daemon/algorithms/algorithm.h"

namespace plexus::daemon::algo {

Plan plan_bruck(const Shape& s) {
  PlanBuilder plan("bruck");
  const int p = s.participants;
  const std::vector<uint64_t> offsets = prefix_offsets(s.segments);
  const uint64_t e = s.elem_bytes;
  // Blocks [first, first + count) taken modulo p: one or two contiguous pieces.
  auto for_each_piece = [&](int first, int count, auto&& fn) {
    const int until = std::min(p, first + count);
    fn(offsets[static_cast<size_t>(first)] * e,
       (offsets[static_cast<size_t>(until)] - offsets[static_cast<size_t>(first)]) * e);
    if (first + count > p) fn(uint64_t{0}, offsets[static_cast<size_t>(first + count - p)] * e);
  };
  for (int distance = 1; distance < p; distance *= 2) {
    const int count = std::min(distance, p - distance);
    const int to = (s.me - distance + p) % p;
    const int from = (s.me + distance) % p;
    for_each_piece(s.me, count,
                   [&](uint64_t offset, uint64_t bytes) { plan.send(to, offset, bytes); });
    for_each_piece(from, count,
                   [&](uint64_t offset, uint64_t bytes) { plan.recv(from, offset, bytes); });
    plan.end_round();
  }
  return plan.finish();
}

}  // namespace plexus::daemon::algo
