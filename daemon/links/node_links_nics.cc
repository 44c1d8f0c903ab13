// Peer links and the NICs under them: the node's bandwidth figure (what it can send, from
// its paths' counters and rates), and NICs going down, failing by injection, drained.
#include <sys/epoll.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include "common/upper_median.h"
#include "daemon/links/node_links.h"

namespace plexus::daemon {

namespace wire = transports::wire;
using Clock = transports::ReliableChannel::Clock;

double NodeLinks::own_bandwidth() const {
  std::set<std::string> live_nics;
  double uncounted = 0;  // the largest per-peer sum over paths without transport counters
  for (const auto& [peer, link] : links_) {
    double sum = 0;
    for (const auto& path : link->paths) {
      if (!path ||
          link->channel->state(path->id) != transports::ReliableChannel::PathState::kActive) {
        continue;
      }
      if (path->busy_us_seen > 0) {
        live_nics.insert(path->nic);
      } else if (!path->latency) {  // a latency path shares its rail's NIC and link
        sum += link->channel->capacity(path->id).bytes_per_s;
      }
    }
    uncounted = std::max(uncounted, sum);
  }
  double total = uncounted;
  for (const std::string& nic : live_nics) {
    auto it = nic_measures_.find(nic);
    if (it != nic_measures_.end()) total += it->second;
  }
  return total;
}

double NodeLinks::peer_bandwidth(uint64_t peer, transports::ReliableChannel::TimePoint now) const {
  auto it = links_.find(peer);
  if (it == links_.end() || now - it->second->peer_bandwidth_at > kStaleReport) return 0;
  return it->second->peer_bandwidth;
}

void NodeLinks::sample_paths() {
  std::vector<NicPace::PathGrowth> growth;
  for (auto& [peer, link] : links_) {
    for (auto& path : link->paths) {
      if (!path) continue;
      const auto delivery = path->conn->delivery();
      if (!delivery || delivery->network_busy_us == 0) continue;
      if (!link->paced_by_peer && path->busy_us_seen > 0 &&
          delivery->network_busy_us >= path->busy_us_seen &&
          delivery->acked_bytes >= path->acked_seen &&
          (delivery->network_busy_us > path->busy_us_seen ||
           delivery->acked_bytes > path->acked_seen)) {
        growth.push_back({path->key, path->nic, delivery->acked_bytes - path->acked_seen,
                          delivery->network_busy_us - path->busy_us_seen});
      }
      path->acked_seen = delivery->acked_bytes;
      path->busy_us_seen = delivery->network_busy_us;
    }
  }
  const auto now = Clock::now();
  if (sampled_at_ != Clock::time_point{}) {
    nic_pace_.add_tick(std::chrono::duration<double, std::micro>(now - sampled_at_).count(),
                       std::move(growth));
  }
  sampled_at_ = now;
}

void NodeLinks::report_bandwidth() {
  const auto now = Clock::now();
  // A path to a peer that reports itself much slower than the median node is paced by
  // that peer (its acknowledgements wait behind its own full queue): no evidence about
  // this node's NICs either way. Against the median, not this node's own figure: paths
  // paced by a slow peer pull this node's figure down too, until the slow peer no longer
  // looks slow against it.
  std::vector<double> figures{own_bandwidth()};
  for (const auto& [peer, link] : links_) figures.push_back(peer_bandwidth(peer, now));
  const double median = upper_median_of_positive(figures);
  for (auto& [peer, link] : links_) {
    const double theirs = peer_bandwidth(peer, now);
    link->paced_by_peer = theirs > 0 && theirs < kSlowerPeer * median;
  }
  const double wall_us =
      measured_at_ == Clock::time_point{}
          ? 0.0
          : std::chrono::duration<double, std::micro>(now - measured_at_).count();
  measured_at_ = now;
  for (const auto& [nic, sample] : nic_pace_.take()) {
    if (sample.pressed_us < kMinBusyUs || wall_us <= 0) continue;
    double& rate = nic_measures_[nic];
    spdlog::debug(
        "bandwidth of {}: {:.1f} MB/s over {:.0f} of {:.0f} us pressed; measure was "
        "{:.1f} MB/s",
        nic, sample.bytes_per_s / 1e6, sample.pressed_us, wall_us, rate / 1e6);
    if (sample.pressed_us >= kPressedShare * wall_us) {
      // Pressed most of the time: the network set the pace, and the measure may fall.
      rate = rate > 0 ? (1.0 - kRateWeight) * rate + kRateWeight * sample.bytes_per_s
                      : sample.bytes_per_s;
    } else {
      // Pressed now and then (a light load, a window reopening after idle): a floor only.
      rate = std::max(rate, sample.bytes_per_s);
    }
  }
  wire::DataFrameHeader h;
  h.type = wire::FrameType::kNodeRate;
  h.offset = static_cast<uint64_t>(own_bandwidth());
  for (auto& [peer, link] : links_) {
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

std::string NodeLinks::watch_nics() {
  if (nic_monitor_) return {};
  try {
    nic_monitor_ = std::make_unique<transports::LinkMonitor>();
  } catch (const std::exception& e) {
    return e.what();
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kNicMonitorKey;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, nic_monitor_->fd(), &ev) != 0) {
    const std::string why = std::string("epoll_ctl: ") + std::strerror(errno);
    nic_monitor_.reset();
    return why;
  }
  return {};
}

void NodeLinks::on_nic_events() {
  for (const transports::LinkEvent& event : nic_monitor_->read_changes()) {
    if (event.up) {
      spdlog::info("NIC {} is up", event.nic);
      if (handler_.on_nic_up) handler_.on_nic_up(event.nic);
      continue;
    }
    nic_down(event.nic, event.removed ? "was removed" : "went down (set down, or no carrier)");
  }
}

size_t NodeLinks::nic_down(const std::string& nic, const std::string& how) {
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

size_t NodeLinks::inject_fault(const std::string& nic, std::string* why) {
  size_t count = 0;
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
        if (why->empty()) *why = "the path to node " + link->name + " over " + nic + ": " + refused;
      }
    }
  }
  // What the transports do about it (flushed completions, a failed path) is seen by the
  // next poll, as a real fault would be.
  return count;
}

size_t NodeLinks::drain_nic(const std::string& nic, bool drained) {
  if (drained) {
    drained_nics_.insert(nic);
  } else {
    drained_nics_.erase(nic);
  }
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
  for (uint64_t peer : peers) {  // a flush may fail a path and lose its peer
    auto it = links_.find(peer);
    if (it != links_.end()) flush(*it->second);
  }
  spdlog::info("NIC {} {} ({} path(s))", nic, drained ? "drained" : "undrained", count);
  publish_snapshot();
  return count;
}

}  // namespace plexus::daemon
