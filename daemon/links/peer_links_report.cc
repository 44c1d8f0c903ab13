// What the links publish for other threads (LinksSnapshot): each peer's paths, their state,
// bytes, measured and transport rates, and the drained NICs.
#include <chrono>
#include <string>
#include <vector>

#include "daemon/links/peer_links.h"

namespace plexus::daemon {

using Clock = transports::ReliableChannel::Clock;

namespace {

const char* state_name(transports::ReliableChannel::PathState state) {
  using S = transports::ReliableChannel::PathState;
  switch (state) {
    case S::kProbation:
      return "probation";
    case S::kActive:
      return "active";
    case S::kStandby:
      return "standby";
    case S::kDrained:
      return "drained";
    case S::kFailed:
      return "failed";
  }
  return "?";
}

}  // namespace

void PeerLinks::publish() {
  const auto now = Clock::now();
  std::vector<LinksSnapshot::PeerInfo> peers;
  peers.reserve(links_.size());
  for (const auto& [id, link] : links_) {
    LinksSnapshot::PeerInfo info;
    info.instance = id;
    info.name = link->name;
    info.reliable = channel_settings_.reliable;
    info.counters = link->channel->counters();
    info.dormant = link->retire.state() == Retire::kDormant;
    // Not down: dormant, or opening (again) on first use within its deadline.
    if (link->channel->live_paths() == 0 && !info.dormant && !link->opening_until) {
      info.down_for_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - link->channel->last_heard())
              .count();
    }
    for (const auto& path : link->paths) {
      if (!path) continue;
      LinksSnapshot::PathInfo p;
      p.nic = path->nic;
      p.transport = path->conn->transport();
      p.local = path->local;
      p.remote = path->remote;
      p.state = state_name(link->channel->state(path->id));
      p.latency = path->latency;
      p.bytes_sent = path->conn->bytes_sent();
      p.bytes_received = path->conn->bytes_received();
      p.rate_bytes_per_s = link->channel->rate_estimate(path->id);
      // As read_counters last read it: an idle path's transport is not asked again.
      if (const auto& delivery = path->delivery) {
        p.delivery_bytes_per_s = delivery->rate_bytes_per_s;
        p.delivery_app_limited = delivery->app_limited;
        p.rtt_us = delivery->rtt_us;
        p.kernel_unsent_bytes = delivery->unsent_bytes;
      }
      if (path->windows) p.windows = path->windows->ring();
      info.paths.push_back(std::move(p));
    }
    peers.push_back(std::move(info));
  }
  parts_.published->publish(std::move(peers), parts_.nics->drained_list());
}

}  // namespace plexus::daemon
