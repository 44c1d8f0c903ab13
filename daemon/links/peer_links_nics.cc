// Peer links and the NICs under them: NICs going down, failing by injection, drained; and
// what the node's bandwidth figure reads of the paths (their counters and rates), and its
// sending.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "daemon/links/peer_links.h"
#include "transports/wire/frame_views.h"

namespace plexus::daemon {

namespace wire = transports::wire;

void PeerLinks::read_counters(NodeBandwidth& bandwidth) {
  for (const auto& [peer, link] : links_) {
    for (const auto& path : link->paths) {
      if (!path || link->channel->idle(path->id)) continue;  // idle: a system call saved
      path->delivery = path->conn->delivery();
      bandwidth.read_path(peer, path->key, path->nic, path->delivery);
    }
  }
}

std::vector<NodeBandwidth::ActivePath> PeerLinks::active_paths() const {
  std::vector<NodeBandwidth::ActivePath> active;
  for (const auto& [peer, link] : links_) {
    for (const auto& path : link->paths) {
      if (!path ||
          link->channel->state(path->id) != transports::ReliableChannel::PathState::kActive) {
        continue;
      }
      active.push_back({peer, path->key, path->nic, path->latency,
                        link->channel->capacity(path->id).bytes_per_s});
    }
  }
  return active;
}

void PeerLinks::send_node_rate(double bytes_per_s, bool all) {
  const wire::DataFrameHeader h = wire::make_node_rate(static_cast<uint64_t>(bytes_per_s));
  for (auto& [peer, link] : links_) {
    if (!link->retire.open()) continue;  // dormant, or holding its frames
    const bool traffic = std::any_of(link->paths.begin(), link->paths.end(), [&](const auto& p) {
      return p && !link->channel->idle(p->id);
    });
    if (!all && !traffic) continue;
    for (auto& path : link->paths) {
      if (!path ||
          link->channel->state(path->id) == transports::ReliableChannel::PathState::kFailed) {
        continue;
      }
      path->conn->queue_urgent(h, kNoticeToken);
      update_interest(*path);
      break;
    }
  }
}

size_t PeerLinks::nic_down(const std::string& nic, const std::string& how) {
  std::vector<uint64_t> over;  // path keys
  for (auto& [peer, link] : links_) {
    for (auto& path : link->paths) {
      if (path && path->nic == nic) over.push_back(path->key);
    }
  }
  if (!over.empty())
    spdlog::warn("NIC {} {}: failing the {} path(s) over it", nic, how, over.size());
  for (uint64_t key : over) {
    auto it = paths_by_key_.find(key);
    if (it != paths_by_key_.end()) fail_path(*it->second, "NIC " + nic + " " + how, true);
  }
  return over.size();
}

common::Result<size_t> PeerLinks::inject_fault(const std::string& nic) {
  size_t count = 0;
  std::string why;
  for (auto& [peer, link] : links_) {
    for (auto& path : link->paths) {
      if (!path || path->nic != nic) continue;
      std::string refused = path->conn->inject_fault();
      if (refused.empty()) {
        ++count;
        spdlog::warn("fault injected into the path to node {} over {} ({} -> {})", link->name, nic,
                     path->local, path->remote);
      } else {
        spdlog::info("no fault injected into the path to node {} over {}: {}", link->name, nic,
                     refused);
        if (why.empty()) why = "the path to node " + link->name + " over " + nic + ": " + refused;
      }
    }
  }
  // What the transports do about it (flushed completions, a failed path) is seen by the
  // next poll, as a real fault would be.
  if (count == 0 && !why.empty()) return common::fail(std::move(why));
  return count;
}

size_t PeerLinks::drain_nic(const std::string& nic, bool drained) {
  size_t count = 0;
  std::vector<uint64_t> peers;
  for (auto& [peer, link] : links_) {
    for (auto& path : link->paths) {
      if (!path || path->nic != nic) continue;
      link->channel->drain(path->id, drained || path->peer_drained);
      send_path_notice(*link, *path,
                       drained ? wire::PathNotice::kDrained : wire::PathNotice::kUndrained);
      ++count;
    }
    peers.push_back(peer);
  }
  for (uint64_t peer : peers) flush(peer);  // a flush may fail a path and lose its peer
  spdlog::info("NIC {} {} ({} path(s))", nic, drained ? "drained" : "undrained", count);
  publish();
  return count;
}

}  // namespace plexus::daemon
