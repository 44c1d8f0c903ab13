#include "daemon/control/comm_rendezvous.h"

namespace plexus::daemon {

CommRendezvous::JoinResult CommRendezvous::join(const CommToken& token, int nranks,
                                                const Joiner& joiner, bool form_when_complete) {
  JoinResult result;
  auto [it, created] = pending_.try_emplace(token);
  Pending& pending = it->second;
  if (created) {
    pending.nranks = nranks;
    pending.ranks.resize(static_cast<size_t>(nranks));
  } else if (pending.nranks != nranks) {
    result.outcome = JoinResult::kRejected;
    result.error = "rank " + std::to_string(joiner.rank) + " says communicator " +
                   token_prefix(token) + " has " + std::to_string(nranks) +
                   " ranks, but the ranks that joined before said " +
                   std::to_string(pending.nranks);
    return result;
  }
  for (const auto& other : pending.ranks) {
    if (other.has_value() && other->root != joiner.root) {
      result.outcome = JoinResult::kRejected;
      result.error = "rank " + std::to_string(joiner.rank) + "'s unique id for communicator " +
                     token_prefix(token) + " names another root daemon than rank " +
                     std::to_string(other->rank) + "'s (were they made by different calls?)";
      return result;
    }
  }
  auto& slot = pending.ranks[static_cast<size_t>(joiner.rank)];
  if (slot.has_value()) {
    result.outcome = JoinResult::kRejected;
    result.error = "rank " + std::to_string(joiner.rank) + " of communicator " +
                   token_prefix(token) + " was already taken by pid " + std::to_string(slot->pid);
    return result;
  }
  slot = joiner;
  if (++pending.joined < nranks || !form_when_complete) return result;
  result.outcome = JoinResult::kFormed;
  for (auto& member : pending.ranks) result.members.push_back(*member);
  pending_.erase(it);
  return result;
}

std::vector<CommRendezvous::Joiner> CommRendezvous::take(const CommToken& token) {
  std::vector<Joiner> out;
  auto it = pending_.find(token);
  if (it == pending_.end()) return out;
  for (auto& slot : it->second.ranks) {
    if (slot.has_value()) out.push_back(*slot);
  }
  pending_.erase(it);
  return out;
}

std::string CommRendezvous::missing_ranks(const Pending& pending) {
  std::string missing;
  int listed = 0;
  int count = 0;
  for (size_t r = 0; r < pending.ranks.size(); ++r) {
    if (pending.ranks[r].has_value()) continue;
    ++count;
    if (listed < 16) {
      if (listed > 0) missing += ',';
      missing += std::to_string(r);
      ++listed;
    }
  }
  if (count > listed) missing += ",... (" + std::to_string(count) + " in all)";
  return missing;
}

std::vector<CommRendezvous::Expired> CommRendezvous::expire(Clock::time_point now) {
  // The rendezvous times out as a whole at its earliest deadline: a rank that gave up
  // can no longer be counted on, so every waiting rank learns the same missing ranks.
  std::vector<Expired> expired;
  for (auto it = pending_.begin(); it != pending_.end();) {
    const Pending& pending = it->second;
    bool due = false;
    for (const auto& slot : pending.ranks) due |= slot.has_value() && slot->deadline <= now;
    if (!due) {
      ++it;
      continue;
    }
    const std::string message = "communicator " + token_prefix(it->first) +
                                " init timed out: rank(s) " + missing_ranks(pending) + " of " +
                                std::to_string(pending.nranks) + " never joined";
    for (const auto& slot : pending.ranks) {
      if (slot.has_value()) expired.push_back(Expired{*slot, message});
    }
    it = pending_.erase(it);
  }
  return expired;
}

void CommRendezvous::drop_session(uint64_t session_id) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    for (auto& slot : it->second.ranks) {
      if (slot.has_value() && slot->session_id == session_id) {
        slot.reset();
        --it->second.joined;
      }
    }
    it = it->second.joined == 0 ? pending_.erase(it) : std::next(it);
  }
}

std::optional<CommRendezvous::Clock::time_point> CommRendezvous::next_deadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& [token, pending] : pending_) {
    for (const auto& slot : pending.ranks) {
      if (slot.has_value() && (!next || slot->deadline < *next)) next = slot->deadline;
    }
  }
  return next;
}

}  // namespace plexus::daemon
