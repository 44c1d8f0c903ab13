// Binomial trees rooted at `root`: broadcast and reduce in ceil(log2 p) rounds of the whole
// vector; the choice for small messages. Reduce leaves partial results in non-roots' work
// buffers.
#include "daemon/algorithms/algorithm.h"

namespace plexus::daemon::algo {

Plan plan_binomial(const Shape& s) {
  PlanBuilder plan("binomial");
  const int p = s.participants;
  const int vr = (s.me - s.root + p) % p;  // position relative to the root
  auto real = [&](int v) { return (v + s.root) % p; };
  const uint64_t bytes = s.count * s.elem_bytes;
  if (s.collective == Collective::kBroadcast) {
    int mask = 1;
    for (; mask < p; mask <<= 1) {
      if ((vr & mask) != 0) {
        plan.recv(real(vr - mask), 0, bytes);
        plan.end_round();
        break;
      }
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
      if (vr + mask < p) {
        plan.send(real(vr + mask), 0, bytes);
        plan.end_round();
      }
    }
  } else {
    for (int mask = 1; mask < p; mask <<= 1) {
      if ((vr & mask) != 0) {
        plan.send(real(vr - mask), 0, bytes);
        plan.end_round();
        break;
      }
      if (vr + mask < p) {
        plan.recv_reduce(real(vr + mask), 0, bytes);
        plan.end_round();
      }
    }
  }
  return plan.finish();
}

}  // namespace plexus::daemon::algo
