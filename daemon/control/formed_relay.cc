#include "daemon/control/formed_relay.h"

#include <algorithm>

namespace plexus::daemon {

bool FormedRelay::seen_before(const CommToken& token) {
  if (!seen_.insert(token).second) return true;
  seen_order_.push_back(token);
  if (seen_order_.size() > kSeen) {
    seen_.erase(seen_order_.front());
    seen_order_.pop_front();
  }
  return false;
}

void FormedRelay::passed_on(const CommToken& token, const TopologyMessage& topology,
                            const std::vector<size_t>& sent_to, Clock::time_point until) {
  if (sent_to.empty()) return;
  kept_.push_back(Kept{token, topology, std::set<size_t>(sent_to.begin(), sent_to.end()), until});
  if (kept_.size() > kKept) kept_.pop_front();
}

std::vector<FormedRelay::Resend> FormedRelay::lost(uint64_t instance, Clock::time_point now) {
  std::erase_if(kept_, [&](const Kept& k) { return k.until <= now; });
  std::vector<Resend> out;
  for (Kept& k : kept_) {
    if (k.sent_to.count(k.topology.index_of(instance)) == 0) continue;  // never went to it
    Resend resend{k.token, &k.topology, {}};
    for (size_t child : k.topology.children_of(instance)) {
      if (k.sent_to.insert(child).second) resend.to.push_back(child);
    }
    if (!resend.to.empty()) out.push_back(std::move(resend));
  }
  return out;
}

}  // namespace plexus::daemon
