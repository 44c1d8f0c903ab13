// Recursive doubling (allreduce for small messages: log2 p rounds of the whole vector) and
// recursive halving/doubling (Rabenseifner: reduce-scatter by halving, allgather by
// doubling; bandwidth-optimal in 2 log2 p rounds). A participant count that is not a power
// of two first folds: of the first 2r participants (r = p - 2^k), each even one hands its
// vector to the odd one after it and sits out, getting the result back at the end.
#include <bit>

#include "daemon/algorithms/algorithm.h"

namespace plexus::daemon::algo {
namespace {

struct Fold {
  int pow2 = 1;   // participants in the power-of-two core
  int extra = 0;  // p - pow2: pairs that fold
  int me = 0;
  int p = 1;

  Fold(int participants, int self) : me(self), p(participants) {
    pow2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(participants)));
    extra = participants - pow2;
  }
  bool sits_out() const { return me < 2 * extra && me % 2 == 0; }
  // Index in the core, for participants that do not sit out.
  int core_index() const { return me < 2 * extra ? me / 2 : me - extra; }
  static int real(int core, int extra_pairs) {
    return core < extra_pairs ? core * 2 + 1 : core + extra_pairs;
  }
  int real(int core) const { return real(core, extra); }
};

// The fold's first round; returns false when this participant sits out the core.
bool fold_in(PlanBuilder& plan, const Fold& f, uint64_t bytes) {
  if (f.me >= 2 * f.extra) return true;
  if (f.sits_out()) {
    plan.send(f.me + 1, 0, bytes);
  } else {
    plan.recv_reduce(f.me - 1, 0, bytes);
  }
  plan.end_round();
  return !f.sits_out();
}

void fold_out(PlanBuilder& plan, const Fold& f, uint64_t bytes) {
  if (f.me >= 2 * f.extra) return;
  if (f.sits_out()) {
    plan.recv(f.me + 1, 0, bytes);
  } else {
    plan.send(f.me - 1, 0, bytes);
  }
  plan.end_round();
}

}  // namespace

Plan plan_recursive_doubling(const Shape& s) {
  PlanBuilder plan("rd");
  const Fold f(s.participants, s.me);
  const uint64_t bytes = s.count * s.elem_bytes;
  if (fold_in(plan, f, bytes)) {
    const int core = f.core_index();
    for (int mask = 1; mask < f.pow2; mask <<= 1) {
      const int partner = f.real(core ^ mask);
      // Both partners send their whole vector and reduce the other's in: op is
      // commutative, so both end with bit-identical sums.
      plan.send(partner, 0, bytes);
      plan.recv_reduce(partner, 0, bytes);
      plan.end_round();
    }
  }
  fold_out(plan, f, bytes);
  return plan.finish();
}

Plan plan_recursive_halving_doubling(const Shape& s) {
  PlanBuilder plan("rhd");
  const Fold f(s.participants, s.me);
  const uint64_t e = s.elem_bytes;
  const uint64_t bytes = s.count * e;
  if (fold_in(plan, f, bytes)) {
    const int core = f.core_index();
    const std::vector<uint64_t> offsets = prefix_offsets(split_evenly(s.count, f.pow2));
    struct Range {
      uint64_t offset;
      uint64_t bytes;
    };
    auto range = [&](int first_block, int blocks) {
      const uint64_t begin = offsets[static_cast<size_t>(first_block)];
      const uint64_t end = offsets[static_cast<size_t>(first_block + blocks)];
      return Range{begin * e, (end - begin) * e};
    };
    // Reduce-scatter by halving: keep the half of the current range that holds our block.
    int lo = 0;
    int span = f.pow2;
    for (int mask = f.pow2 / 2; mask >= 1; mask >>= 1) {
      const int partner = f.real(core ^ mask);
      span /= 2;
      const bool keep_lower = (core & mask) == 0;
      const int keep = keep_lower ? lo : lo + span;
      const int give = keep_lower ? lo + span : lo;
      const auto out = range(give, span);
      const auto in = range(keep, span);
      plan.send(partner, out.offset, out.bytes);
      plan.recv_reduce(partner, in.offset, in.bytes);
      plan.end_round();
      lo = keep;
    }
    // Allgather by doubling: trade the range we hold for the partner's, twice as many each time.
    for (int mask = 1; mask < f.pow2; mask <<= 1) {
      const int partner_core = core ^ mask;
      const int partner = f.real(partner_core);
      const int mine = core & ~(mask - 1);
      const int theirs = partner_core & ~(mask - 1);
      const auto out = range(mine, mask);
      const auto in = range(theirs, mask);
      plan.send(partner, out.offset, out.bytes);
      plan.recv(partner, in.offset, in.bytes);
      plan.end_round();
    }
  }
  fold_out(plan, f, bytes);
  return plan.finish();
}

}  // namespace plexus::daemon::algo
