// Pipelined chains for large broadcasts and reduces: the vector moves in pieces along
// root → root+1 → … (broadcast) or towards the root from the far end (reduce), every link
// busy at once, so the time approaches one vector's transfer plus (p-2) pieces.
#include <algorithm>

#include "daemon/algorithms/algorithm.h"

namespace plexus::daemon::algo {

inline constexpr uint64_t kDefaultPieceBytes = 512 * 1024;

Plan plan_chain(const Shape& s) {
  PlanBuilder plan("chain");
  const int p = s.participants;
  if (p == 1 || s.count == 0) return plan.finish();
  const uint64_t e = s.elem_bytes;
  const uint64_t piece =
      s.pipeline_elems > 0 ? s.pipeline_elems : std::max<uint64_t>(1, kDefaultPieceBytes / e);
  const uint64_t pieces = (s.count + piece - 1) / piece;
  auto offset = [&](uint64_t t) { return t * piece * e; };
  auto bytes = [&](uint64_t t) { return (std::min(s.count, (t + 1) * piece) - t * piece) * e; };
  const int vr = (s.me - s.root + p) % p;
  auto real = [&](int v) { return (v + s.root) % p; };
  const bool broadcast = s.collective == Collective::kBroadcast;
  // Where pieces come from and go to; the head only sends, the tail only receives.
  const bool head = broadcast ? vr == 0 : vr == p - 1;
  const bool tail = broadcast ? vr == p - 1 : vr == 0;
  const int upstream = broadcast ? real(vr - 1) : real(vr + 1);
  const int downstream = broadcast ? real(vr + 1) : real(vr - 1);
  if (head) {
    for (uint64_t t = 0; t < pieces; ++t) {
      plan.send(downstream, offset(t), bytes(t));
      plan.end_round();
    }
    return plan.finish();
  }
  // Round t takes in piece t and passes on piece t-1.
  for (uint64_t t = 0; t <= pieces; ++t) {
    if (t < pieces) {
      if (broadcast) {
        plan.recv(upstream, offset(t), bytes(t));
      } else {
        plan.recv_reduce(upstream, offset(t), bytes(t));
      }
    }
    if (t >= 1 && !tail) plan.send(downstream, offset(t - 1), bytes(t - 1));
    plan.end_round();
  }
  return plan.finish();
}

}  // namespace plexus::daemon::algo
