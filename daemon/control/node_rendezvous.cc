// Forming multi-node communicators: collecting nodes' ranks, conflicts, timeouts.
#include "daemon/control/node_rendezvous.h"

#include <algorithm>
#include <numeric>

namespace plexus::daemon {
namespace {

std::string list_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ",";
    out += std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace

std::vector<uint64_t> NodeRendezvous::ids(const Pending& p) {
  std::vector<uint64_t> out;
  for (const auto& n : p.nodes) out.push_back(n.instance_id);
  return out;
}

bool NodeRendezvous::involves(uint64_t instance_id) const {
  for (const auto& [token, p] : pending_) {
    for (const auto& n : p.nodes) {
      if (n.instance_id == instance_id) return true;
    }
    if (p.successor && p.successor->expected.count(instance_id) != 0) return true;
  }
  return false;
}

NodeRendezvous::Failure NodeRendezvous::fail_successor(std::map<CommToken, Pending>::iterator it,
                                                       std::string message, plexus_result_t code,
                                                       bool refuse_later) {
  const CommToken token = it->first;
  Failure failure{token, ids(it->second), std::move(message), code};
  pending_.erase(it);
  if (refuse_later) refuse(token, failure.code, failure.message);
  return failure;
}

std::string NodeRendezvous::describe_missing(const Pending& p) {
  std::vector<int> missing;
  for (int r = 0; r < p.nranks; ++r) {
    if (p.rank_node[static_cast<size_t>(r)] < 0) missing.push_back(r);
  }
  std::string out =
      "rank(s) " + list_ranks(missing) + " of " + std::to_string(p.nranks) + " never joined";
  if (!p.nodes.empty()) {
    out += "; joined: ";
    for (size_t n = 0; n < p.nodes.size(); ++n) {
      std::vector<int> held;
      for (int r = 0; r < p.nranks; ++r) {
        if (p.rank_node[static_cast<size_t>(r)] == static_cast<int>(n)) held.push_back(r);
      }
      if (n > 0) out += ", ";
      out += "node " + p.nodes[n].name + " (rank(s) " + list_ranks(held) + ")";
    }
  }
  return out;
}

NodeRendezvous::Result NodeRendezvous::join(const CommToken& token, int nranks, const Join& join,
                                            const Successor* successor) {
  Result result;
  if (auto refused = refused_.find(token); refused != refused_.end()) {
    result.outcome = Result::kRejected;
    result.error = refused->second.message;
    result.code = refused->second.code;
    result.notify = {join.node.instance_id};
    return result;
  }
  auto [it, inserted] = pending_.try_emplace(token);
  Pending& p = it->second;
  if (inserted) {
    p.nranks = nranks;
    p.rank_node.assign(static_cast<size_t>(nranks), -1);
    p.deadline = join.deadline;
    p.algorithm = join.algorithm;
    p.algorithm_from = join.node.name;
    if (successor != nullptr) p.successor = *successor;
  }
  auto reject = [&](std::string error) {
    result.outcome = Result::kRejected;
    result.error = std::move(error);
    result.code = PLEXUS_ERR_INVALID_ARGUMENT;  // ranks that disagree, as within a node
    result.notify = ids(p);
    if (std::find(result.notify.begin(), result.notify.end(), join.node.instance_id) ==
        result.notify.end()) {
      result.notify.push_back(join.node.instance_id);
    }
    pending_.erase(it);
    return result;
  };
  if (p.successor.has_value() != (successor != nullptr)) {
    return reject("node " + join.node.name + " joined communicator " + token_prefix(token) +
                  (successor != nullptr ? " as a shrink of another" : " with a unique id") +
                  ", but an earlier node did not");
  }
  if (p.successor) {
    auto expected = p.successor->expected.find(join.node.instance_id);
    if (expected == p.successor->expected.end()) {
      return reject("node " + join.node.name + " holds no rank the shrink of communicator " +
                    token_prefix(p.successor->parent) + " keeps");
    }
    for (int rank : join.ranks) {
      const std::vector<int>& its = expected->second.ranks;
      if (std::find(its.begin(), its.end(), rank) == its.end()) {
        return reject("node " + join.node.name + " joined the shrink of communicator " +
                      token_prefix(p.successor->parent) + " as rank " + std::to_string(rank) +
                      ", which is another node's");
      }
    }
    // Two successors of one parent at once: the ranks disagree on whom to exclude.
    for (auto other = pending_.begin(); other != pending_.end(); ++other) {
      if (other == it || !other->second.successor ||
          other->second.successor->parent != p.successor->parent) {
        continue;
      }
      auto list = [](const Successor& s) { return "[" + list_ranks(s.excluded) + "]"; };
      const std::string why =
          "the ranks disagree on whom to exclude from communicator " +
          token_prefix(p.successor->parent) + ": node " + join.node.name + "'s ranks exclude " +
          list(*p.successor) + ", node " + other->second.nodes.front().name + "'s exclude " +
          list(*other->second.successor) +
          " (both lists are refused for it from now on: a rank still on its way with either "
          "hears this too)";
      // Both fail, and a node that joins either later hears the same.
      // Refused from now on, both: a rank still on its way with either list must not wait
      // for ranks that have heard (the retry needs a list of its own; see the message).
      result.other = fail_successor(other, why, PLEXUS_ERR_MISMATCH, true);
      Failure mine = fail_successor(it, why, PLEXUS_ERR_MISMATCH, true);
      result.outcome = Result::kRejected;
      result.error = why;
      result.code = PLEXUS_ERR_MISMATCH;
      result.notify = std::move(mine.notify);
      result.notify.push_back(join.node.instance_id);
      return result;
    }
  }
  if (nranks != p.nranks) {
    return reject("node " + join.node.name + " says the communicator has " +
                  std::to_string(nranks) + " ranks, but an earlier node said " +
                  std::to_string(p.nranks));
  }
  if (join.algorithm != p.algorithm) {
    auto shown = [](const std::string& a) { return a.empty() ? std::string("none") : a; };
    return reject("ranks on node " + join.node.name + " set PLEXUS_ALGO=" + shown(join.algorithm) +
                  " but ranks on node " + p.algorithm_from + " set PLEXUS_ALGO=" +
                  shown(p.algorithm) + "; every rank must ask for the same algorithm");
  }
  auto node_it = std::find_if(p.nodes.begin(), p.nodes.end(), [&](const NodeInfo& n) {
    return n.instance_id == join.node.instance_id;
  });
  const int node = static_cast<int>(node_it - p.nodes.begin());
  if (node_it == p.nodes.end()) p.nodes.push_back(join.node);
  p.deadline = std::min(p.deadline, join.deadline);
  for (int rank : join.ranks) {
    if (rank < 0 || rank >= nranks) {
      return reject("node " + join.node.name + " registered rank " + std::to_string(rank) +
                    ", outside 0.." + std::to_string(nranks - 1));
    }
    int& at = p.rank_node[static_cast<size_t>(rank)];
    if (at >= 0) {
      return reject("rank " + std::to_string(rank) + " joined twice: on node " +
                    p.nodes[static_cast<size_t>(at)].name + " and on node " + join.node.name);
    }
    at = node;
    ++p.joined;
  }
  if (p.joined < p.nranks) return result;
  // Formed: number the nodes by the lowest rank each holds, so node 0 holds rank 0.
  std::vector<int> order;  // new index -> old index
  std::vector<int> renumber(p.nodes.size(), -1);
  for (int r = 0; r < p.nranks; ++r) {
    const int old = p.rank_node[static_cast<size_t>(r)];
    if (renumber[static_cast<size_t>(old)] < 0) {
      renumber[static_cast<size_t>(old)] = static_cast<int>(order.size());
      order.push_back(old);
    }
  }
  result.outcome = Result::kFormed;
  for (int old : order) result.formed.nodes.push_back(p.nodes[static_cast<size_t>(old)]);
  for (int r = 0; r < p.nranks; ++r) {
    result.formed.rank_node.push_back(
        renumber[static_cast<size_t>(p.rank_node[static_cast<size_t>(r)])]);
  }
  result.formed.algorithm = p.algorithm;
  result.notify = ids(p);
  pending_.erase(it);
  return result;
}

std::vector<NodeRendezvous::Failure> NodeRendezvous::expire(Clock::time_point now) {
  std::vector<Failure> out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.deadline <= now) {
      std::string why = "communicator init timed out: " + describe_missing(it->second);
      auto next = std::next(it);
      if (it->second.successor) {
        // A join of it that comes late is refused, rather than waiting anew (and meeting
        // the survivors' retry with another list as a mismatch).
        out.push_back(fail_successor(it, std::move(why), PLEXUS_ERR_TIMEOUT, true));
      } else {
        out.push_back({it->first, ids(it->second), std::move(why), PLEXUS_ERR_TIMEOUT});
        pending_.erase(it);
      }
      it = next;
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<NodeRendezvous::Failure> NodeRendezvous::drop_node(uint64_t instance_id) {
  std::vector<Failure> out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    const Pending& p = it->second;
    if (p.successor) {
      auto expected = p.successor->expected.find(instance_id);
      if (expected == p.successor->expected.end()) {
        ++it;
        continue;
      }
      const Successor::Node& node = expected->second;
      auto next = std::next(it);
      out.push_back(
          fail_successor(it,
                         "node " + node.name + " was lost during the shrink of communicator " +
                             token_prefix(p.successor->parent) + ": exclude its rank(s) " +
                             list_ranks(node.parent_ranks) + " as well and shrink again",
                         PLEXUS_ERR_PEER_LOST, true));
      std::erase(out.back().notify, instance_id);
      it = next;
      continue;
    }
    auto node = std::find_if(p.nodes.begin(), p.nodes.end(),
                             [&](const NodeInfo& n) { return n.instance_id == instance_id; });
    if (node == p.nodes.end()) {
      ++it;
      continue;
    }
    std::vector<uint64_t> others;
    for (const auto& n : p.nodes) {
      if (n.instance_id != instance_id) others.push_back(n.instance_id);
    }
    out.push_back({it->first, others,
                   "node " + node->name + " went away while communicator init was under way",
                   PLEXUS_ERR_PEER_LOST});
    it = pending_.erase(it);
  }
  return out;
}

std::optional<NodeRendezvous::Failure> NodeRendezvous::refuse(const CommToken& token,
                                                              plexus_result_t code,
                                                              const std::string& message) {
  if (refused_.emplace(token, Refusal{code, message}).second) {
    refused_order_.push_back(token);
    if (refused_order_.size() > kRefusedKept) {
      refused_.erase(refused_order_.front());
      refused_order_.pop_front();
    }
  }
  auto it = pending_.find(token);
  if (it == pending_.end()) return std::nullopt;
  Failure failure{token, ids(it->second), message, code};
  pending_.erase(it);
  return failure;
}

std::optional<NodeRendezvous::Clock::time_point> NodeRendezvous::next_deadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& [token, p] : pending_) {
    if (!next || p.deadline < *next) next = p.deadline;
  }
  return next;
}

}  // namespace plexus::daemon
