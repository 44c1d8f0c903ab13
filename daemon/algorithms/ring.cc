// Ring algorithms: reduce-scatter and allgather around the ring 0 → 1 → … → p-1 → 0, each
// in p-1 rounds of one block; allreduce is one followed by the other. Bandwidth-optimal
// (every participant sends 2(p-1)/p of the data) at the cost of 2(p-1) latencies.
#include "daemon/algorithms/algorithm.h"

namespace plexus::daemon::algo {
namespace {

struct Blocks {
  std::vector<uint64_t> offsets;  // bytes
  uint64_t offset(int block) const { return offsets[static_cast<size_t>(block)]; }
  uint64_t bytes(int block) const {
    return offsets[static_cast<size_t>(block) + 1] - offsets[static_cast<size_t>(block)];
  }
};

Blocks blocks_of(std::span<const uint64_t> elements, uint32_t elem_bytes) {
  Blocks b{prefix_offsets(elements)};
  for (auto& o : b.offsets) o *= elem_bytes;
  return b;
}

// After p-1 rounds participant r holds block r reduced over everyone.
void reduce_scatter(PlanBuilder& plan, const Blocks& blocks, int p, int me) {
  const int next = wrap(me + 1, p);
  const int prev = wrap(me - 1, p);
  for (int round = 0; round < p - 1; ++round) {
    const int out = wrap(me - round - 1, p);
    const int in = wrap(me - round - 2, p);
    plan.send(next, blocks.offset(out), blocks.bytes(out));
    plan.recv_reduce(prev, blocks.offset(in), blocks.bytes(in));
    plan.end_round();
  }
}

// Participant r starts with block r; after p-1 rounds everyone holds every block.
void allgather(PlanBuilder& plan, const Blocks& blocks, int p, int me) {
  const int next = wrap(me + 1, p);
  const int prev = wrap(me - 1, p);
  for (int round = 0; round < p - 1; ++round) {
    const int out = wrap(me - round, p);
    const int in = wrap(me - round - 1, p);
    plan.send(next, blocks.offset(out), blocks.bytes(out));
    plan.recv(prev, blocks.offset(in), blocks.bytes(in));
    plan.end_round();
  }
}

}  // namespace

Plan plan_ring(const Shape& s) {
  PlanBuilder plan("ring");
  const int p = s.participants;
  if (s.collective == Collective::kAllreduce) {
    const Blocks blocks = blocks_of(split_evenly(s.count, p), s.elem_bytes);
    reduce_scatter(plan, blocks, p, s.me);
    allgather(plan, blocks, p, s.me);
  } else if (s.collective == Collective::kReduceScatter) {
    reduce_scatter(plan, blocks_of(s.segments, s.elem_bytes), p, s.me);
  } else {
    allgather(plan, blocks_of(s.segments, s.elem_bytes), p, s.me);
  }
  return plan.finish();
}

}  // namespace plexus::daemon::algo
