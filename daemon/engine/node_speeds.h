// The nodes' speeds for this daemon's multi-node communicators: each leader's measure of
// every node's sending speed (every kMeasureEvery), the agreement on a change between the
// nodes (one SpeedAgreement per communicator) carried in speed frames
// (transports/wire/frame_views.h; a commit's payload is transports/wire/speed_commit.h's), a
// communicator held past kHoldLimit for a change failed naming whom it waits for, and the event
// that names a slow node. Engine thread only (InternodeRunner's); it owns the settings and the
// measuring clock, each communicator's agreement lives in its InternodeState, and it asks the
// runner, through Hooks, only to fail a communicator or to start its held op.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/engine/comm.h"
#include "daemon/engine/speed_agreement.h"
#include "daemon/links/node_links.h"
#include "monitor/event_log.h"

namespace plexus::daemon {

class NodeSpeeds {
 public:
  struct Hooks {
    // Fails the communicator from the engine loop (InternodeRunner::defer_failure).
    std::function<void(Comm&, const std::string& reason)> defer_failure;
    // The communicator's hold for a change ended: its next op may start (from the loop).
    std::function<void(Comm&)> resume;
    // The daemon of a node, with a link to it wanted now (InternodeRunner::reach).
    std::function<uint64_t(const Comm&, int node)> reach;
  };

  // `slow_node_below` (plexusd --slow-node-below): a node under this fraction of the
  // reference node's bandwidth is slow; 0 measures nothing, and a node then only follows
  // its leader's changes.
  NodeSpeeds(double slow_node_below, NodeLinks& links, monitor::EventLog& events, Hooks hooks);
  NodeSpeeds(const NodeSpeeds&) = delete;
  NodeSpeeds& operator=(const NodeSpeeds&) = delete;

  // A communicator spanning nodes joins, every node alike: it follows its leader's changes
  // even where this node measures nothing (with its own picture it would plan otherwise).
  void join(Comm& comm) const;
  // It retires: a leader's links to its members may close while idle again.
  void leave(Comm& comm) const;
  // A speed frame from `node`: "" or what is wrong with it.
  [[nodiscard]] std::string on_frame(Comm& comm, int node, uint64_t op_seq, uint32_t step,
                                     uint64_t offset, std::span<const std::byte> payload);
  // From the loop: every kMeasureEvery, the leaders' measures and the holds past kHoldLimit.
  void measure(const std::unordered_map<uint64_t, std::shared_ptr<Comm>>& comms);

 private:
  void send(Comm& comm, const std::vector<SpeedAgreement::Message>& messages);
  void change_event(Comm& comm);

  static constexpr auto kMeasureEvery = std::chrono::milliseconds(100);
  // A node holding for a speed change this long fails the communicator, naming who it
  // waits for.
  static constexpr auto kHoldLimit = std::chrono::milliseconds(10000);

  SpeedAgreement::Settings settings_;
  bool measures_ = false;  // --slow-node-below > 0
  NodeLinks& links_;
  monitor::EventLog& events_;
  Hooks hooks_;
  std::chrono::steady_clock::time_point measured_at_{};
};

}  // namespace plexus::daemon
