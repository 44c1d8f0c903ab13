// Pairwise-exchange alltoall: in round k each participant sends to the one k after it and
// receives from the one k before it, so every link carries one message per round and no
// participant is flooded by all the others at once.
#include "daemon/algorithms/algorithm.h"

namespace plexus::daemon::algo {

Plan plan_pairwise(const Shape& s) {
  PlanBuilder plan("pairwise");
  const int p = s.participants;
  const uint64_t e = s.elem_bytes;
  const std::vector<uint64_t> send_at = prefix_offsets(s.send_counts);
  const std::vector<uint64_t> recv_at = prefix_offsets(s.recv_counts);
  const auto me = static_cast<size_t>(s.me);
  plan.copy(send_at[me] * e, recv_at[me] * e, s.send_counts[me] * e);
  plan.end_round();
  for (int k = 1; k < p; ++k) {
    const auto to = static_cast<size_t>((s.me + k) % p);
    const auto from = static_cast<size_t>((s.me - k + p) % p);
    plan.send(static_cast<int>(to), send_at[to] * e, s.send_counts[to] * e, BufferId::kSend);
    plan.recv(static_cast<int>(from), recv_at[from] * e, s.recv_counts[from] * e);
    plan.end_round();
  }
  return plan.finish();
}

}  // namespace plexus::daemon::algo
