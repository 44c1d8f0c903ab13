// This daemon's data connections to peer daemons, as the engine sees them: per peer node a
// reliable channel over one path per NIC pair (and a latency-class twin beside each where
// configured), messages cut into chunk frames, NIC events, and the node's bandwidth figure.
// The facade over its parts, each of which owns its state:
// - PeerLinks (peer_links.h): the links themselves: channels, paths, their I/O, failure, loss,
//   and what a NIC's state does to the paths over it;
// - MessageSender (message_sender.h): messages, markers and notices into frames, per flow;
// - NodeBandwidth (node_bandwidth.h): the node's bandwidth measure and its peers' reports;
// - NicEvents (nic_events.h): the drained NICs and netlink's NIC events;
// - LinksSnapshot (links_snapshot.h): what other threads read.
// NodeLinks owns the parts, wires their hooks, and keeps the tick: every kTickMs while any
// link has traffic (else when the earliest idle link's heartbeat or silence is due: an idle
// daemon sleeps), the links' ticks and the counters of the paths with traffic; every
// kSnapshotEvery a snapshot (while there is traffic, and once after); every
// kBandwidthReportEvery the node's figure to the peers with traffic, and every
// kBandwidthRefreshEvery to every peer while this node has traffic (a leader of the speed
// agreement compares nodes it has no traffic with: NodeBandwidth::kStaleReport).
// Single-threaded (the engine thread), but for snapshot(), drained_snapshot(), nic_windows().
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/links/links_handler.h"
#include "daemon/links/links_snapshot.h"
#include "daemon/links/message_sender.h"
#include "daemon/links/nic_events.h"
#include "daemon/links/node_bandwidth.h"
#include "daemon/links/peer_links.h"
#include "monitor/window_ring.h"
#include "transports/channel/reliable_channel.h"
#include "transports/path/data_path.h"
#include "transports/wire/frame_views.h"

namespace plexus::daemon {

class NodeLinks {
 public:
  // What the links tell their owner (links_handler.h).
  using Handler = LinksHandler;
  // What plexusctl shows of the links (snapshot()), and the telemetry's settings
  // (links_snapshot.h).
  using PathInfo = LinksSnapshot::PathInfo;
  using PeerInfo = LinksSnapshot::PeerInfo;
  using Telemetry = LinksSnapshot::Telemetry;

  static constexpr uint32_t kDefaultChunkBytes = 512 * 1024;
  explicit NodeLinks(Handler handler, uint32_t chunk_bytes = kDefaultChunkBytes,
                     transports::ReliableChannel::Settings channel = {}, Telemetry telemetry = {},
                     PeerLinks::Retirement retirement = {});
  NodeLinks(const NodeLinks&) = delete;
  NodeLinks& operator=(const NodeLinks&) = delete;

  // Per local NIC ("?" when unknown), the windows of every path over it, past and present
  // (empty when telemetry is off); safe from any thread.
  std::map<std::string, std::shared_ptr<const monitor::WindowRing>> nic_windows() const {
    return published_.nic_windows();
  }

  // Readable when a link has I/O ready: the engine adds it to the set it parks on.
  int epoll_fd() const { return peers_.epoll_fd(); }

  // Opens a path to peer node `peer` over local NIC `nic` ("" when unknown) with `open` (a
  // connection set up and authenticated by the peer server): a path of its channel (the
  // first one opens the channel). `backup`: a pre-connected path across rails, on standby
  // while the channel has an active path. `latency`: the latency class's connection
  // (ReliableChannel::add_path).
  // `rail_key`: the rail the control thread dialled it for ("" when the peer dialled it),
  // handed back when the path fails (Handler::on_path_lost).
  void add(uint64_t peer, std::string name, transports::PathOpener open, std::string nic = "",
           bool backup = false, bool latency = false, std::string rail_key = "") {
    peers_.add(peer, std::move(name), std::move(open), std::move(nic), backup, latency,
               std::move(rail_key));
  }
  // Paths open on first use: a link to peer node `peer` (`name`, for messages) is needed now.
  // With none, one is made with no path: what is sent to it waits on its channel until the
  // first path comes (add), and it is lost at `deadline` if none has; a dormant link (one
  // that closed its paths while idle) waits the same way. Returns true when it did: the
  // caller then has a connection opened to one of `addresses` (the peer server, on the
  // control thread); a link still closing its paths asks through the handler's on_wanted
  // once they have closed. open_failed: that could not be done (`reason`); a link still
  // waiting for its first path is lost with it.
  bool want(uint64_t peer, std::string name, transports::ReliableChannel::TimePoint deadline,
            std::vector<std::string> addresses = {}) {
    return peers_.want(peer, std::move(name), deadline, std::move(addresses));
  }
  void open_failed(uint64_t peer, const std::string& reason) { peers_.open_failed(peer, reason); }
  // The link to `peer` stays open while idle while pinned (PeerLinks::pin).
  void pin(uint64_t peer, bool pinned) { peers_.pin(peer, pinned); }
  // Follows local NICs going down and up (netlink); without it only silence and socket
  // errors fail paths. Returns "" or why it cannot.
  std::string watch_nics() { return nics_.watch(peers_.epoll_fd(), PeerLinks::kNicMonitorKey); }
  // The peer's daemon is gone (its control connection closed): lost now, not after the
  // grace period its silent paths would get.
  void peer_gone(uint64_t peer, const std::string& reason) { peers_.lose(peer, reason); }
  // Local NIC `nic` is down (`how`, for messages): its paths fail now and their peers are
  // told over their other paths. What netlink events lead to; returns how many failed.
  size_t nic_down(const std::string& nic, const std::string& how) {
    return peers_.nic_down(nic, how);
  }
  // Drained: the paths over `nic` (and those that join later) take no new frames, in
  // both directions (the peers are told). Returns how many paths it applies to now.
  size_t drain_nic(const std::string& nic, bool drained) {
    nics_.set_drained(nic, drained);
    return peers_.drain_nic(nic, drained);
  }
  // Fault injection (plexusd --fault-injection): each path over `nic` has its transport fail
  // it as a fault of its own would (DataPath::inject_fault). Returns how many it was injected
  // into (0: no path runs over `nic`), or the first refusal when every path refused.
  common::Result<size_t> inject_fault(const std::string& nic) { return peers_.inject_fault(nic); }
  // The drained NICs as of the last snapshot; safe from any thread.
  std::vector<std::string> drained_snapshot() const { return published_.drained(); }
  // The links as of the last tick with traffic (at most ~100 ms old then; idle links change
  // only in heartbeat counts); safe from any thread.
  std::vector<PeerInfo> snapshot() const { return published_.peers(); }
  // A link that carries frames without a connection being opened first (not dormant).
  bool has(uint64_t peer) const { return peers_.has(peer); }
  // Any link to `peer`, dormant too.
  bool known(uint64_t peer) const { return peers_.known(peer); }
  // Whether poll() has anything to do (links, or NIC events to read).
  bool active() const { return peers_.size() != 0 || nics_.watching(); }
  size_t size() const { return peers_.size(); }
  // How long the engine may sleep before poll() must run again (heartbeats, timeouts): until
  // the next tick (kTickMs while any link has traffic; an idle daemon's is its earliest
  // heartbeat or silence due); -1 with no link.
  int max_sleep_ms() const { return sleep_ms(Clock::now()); }
  // The same, as of `now`.
  int sleep_ms(transports::ReliableChannel::TimePoint now) const;
  // Sooner than that while frames wait for a path at its queue limit (no event says when
  // the kernel has made room): the channel settings' held_path_retry.
  std::optional<std::chrono::nanoseconds> look_again_in() const { return peers_.look_again_in(); }

  // Frames of communicator comm_id (data, markers, notices) belong to `flow` from now on,
  // scheduled by its policy against other flows' (ReliableChannel's send scheduler); frames
  // of a communicator never named go as flow 0. forget_comm: it is gone.
  void set_comm_flow(uint64_t comm_id, uint32_t flow) { sender_.set_comm_flow(comm_id, flow); }
  void forget_comm(uint64_t comm_id) { sender_.forget_comm(comm_id); }
  // A flow's class and weight, on every channel at once (frames already waiting too).
  void set_flow_policy(uint32_t flow, transports::FlowPolicy policy) {
    flow_policies_.set(flow, policy);
  }

  // Sends `data` as message `step` of op (comm_id, op_seq) in chunk frames: each about
  // path_queue_time at the fastest path's measured rate (between the channel's
  // min_path_queue_bytes and chunk_bytes), so that a frame of a higher class waits behind little.
  // `keep_alive` (the memory `data` lies in) is held, and `done` runs once, when every chunk is
  // released: acknowledged by the peer (--channel-acks on; auto, the default, is on with two
  // or more NICs) or, with acknowledgements off, in its transport's hands (TCP: written).
  // Returns false (and calls nothing) when there is no link to `peer`.
  bool send_message(uint64_t peer, uint64_t comm_id, uint64_t op_seq, uint32_t step,
                    std::span<const std::byte> data, std::shared_ptr<void> keep_alive,
                    std::function<void()> done) {
    return sender_.send_message(peer, comm_id, op_seq, step, data, std::move(keep_alive),
                                std::move(done));
  }

  // A data frame of a few bytes (`payload`, copied) or none, its chunk and offset chosen by the
  // caller (e.g. the end of a message whose size only the sender knows); `done` runs once it
  // is released, as above.
  bool send_marker(uint64_t peer, uint64_t comm_id, uint64_t op_seq, uint32_t step, uint64_t offset,
                   uint32_t chunk, std::function<void()> done,
                   std::span<const std::byte> payload = {}) {
    return sender_.send_marker(peer, comm_id, op_seq, step, offset, chunk, std::move(done),
                               payload);
  }

  // Tells `peer` that communicator comm_id failed here, and why (best effort); `code`: the
  // plexus_result_t its ranks fail with there (0: a lost peer).
  void send_abort(uint64_t peer, uint64_t comm_id, const std::string& reason, uint32_t code = 0) {
    sender_.send_notice(peer, transports::wire::make_abort(comm_id, code), reason);
  }
  // Tells `peer` that `rank` of this node left communicator comm_id.
  // `collectives`: how many collectives the rank had submitted.
  void send_departed(uint64_t peer, uint64_t comm_id, int rank, uint64_t collectives,
                     const std::string& reason) {
    sender_.send_notice(
        peer,
        transports::wire::make_departed(
            {.comm_id = comm_id, .rank = static_cast<uint32_t>(rank), .collectives = collectives}),
        reason);
  }

  // This node's bandwidth as its links measured it, which the nodes' speed agreement
  // compares, in bytes/s, 0 when nothing is measured (node_bandwidth.h says how).
  double own_bandwidth() const { return bandwidth_.own(peers_.active_paths()); }
  // What peer `peer` last reported of its own (a kNodeRate frame every kBandwidthReportEvery
  // while they exchange traffic, every kBandwidthRefreshEvery otherwise), or 0: none, or none
  // for NodeBandwidth::kStaleReport.
  double peer_bandwidth(uint64_t peer, transports::ReliableChannel::TimePoint now) const {
    return bandwidth_.peer(peer, now);
  }

  // Frames being read straight into memory kept alive by `owner` finish into a sink
  // instead (DataPath::abandon_placement), on every link.
  void abandon_placements(const void* owner) { peers_.abandon_placements(owner); }

  // Runs the I/O that is ready (waiting up to timeout_ms for some); returns whether
  // anything was read or written.
  bool poll(int timeout_ms);

 private:
  using Clock = transports::ReliableChannel::Clock;
  static constexpr auto kSnapshotEvery = std::chrono::milliseconds(100);
  static constexpr auto kBandwidthReportEvery = std::chrono::milliseconds(100);
  static constexpr auto kBandwidthRefreshEvery = std::chrono::milliseconds(1000);
  void tick(transports::ReliableChannel::TimePoint now);
  // When the next tick is due: the links' ask, but not sooner than kTickMs after the last.
  transports::ReliableChannel::TimePoint next_tick() const {
    return std::max(last_tick_ + std::chrono::milliseconds(PeerLinks::kTickMs), peers_.next_tick());
  }

  // Declared in the order they are made: a part points only to those before it; hooks run
  // once NodeLinks is whole.
  LinksSnapshot published_;
  transports::FlowPolicies flow_policies_;  // the channels read it
  NodeBandwidth bandwidth_;
  NicEvents nics_;
  PeerLinks peers_;
  MessageSender sender_;
  transports::ReliableChannel::TimePoint last_tick_{};
  transports::ReliableChannel::TimePoint published_at_{};
  bool published_idle_ = false;  // a snapshot was taken since the links went idle
  transports::ReliableChannel::TimePoint reported_at_{};
  transports::ReliableChannel::TimePoint refreshed_at_{};
};

}  // namespace plexus::daemon
