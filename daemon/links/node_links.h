// This daemon's data connections to peer daemons: per peer node a reliable channel
// (transports/channel/reliable_channel.h) over one path per NIC pair, and a latency-class
// twin beside each where configured (a DataPath: TCP or whatever transport opened it), all
// in an epoll set the engine polls. Cuts messages into chunk frames (no allocation per
// chunk), keeps the memory a message is read from alive until the peer has acknowledged its
// every chunk (with --channel-acks off, until each is in its transport's hands), and hands
// arriving frames to the engine once each. Each path runs over one local NIC: a NIC that goes
// down (netlink) fails its paths at once and tells the peers over their other paths; a
// drained NIC takes no new frames. A peer is lost when it has had no live path for the grace
// period (at once when it closed them, or without acknowledgements).
// Single-threaded (the engine thread), but for snapshot().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/unique_fd.h"
#include "daemon/links/nic_pace.h"
#include "monitor/window_ring.h"
#include "transports/channel/reliable_channel.h"
#include "transports/netlink/link_monitor.h"
#include "transports/path/data_path.h"

namespace plexus::daemon {

class NodeLinks {
 public:
  struct Handler {
    // A data frame from `peer`. Return "" or why it is unacceptable: the link then fails.
    std::function<std::string(uint64_t peer, const transports::wire::DataFrameHeader&,
                              std::span<const std::byte>)>
        on_frame;
    // Optional: where a large data frame's payload may be read to directly
    // (DataPath::Callbacks::place), and its end.
    std::function<transports::Placement(uint64_t peer, const transports::wire::DataFrameHeader&)>
        place;
    std::function<std::string(uint64_t peer, const transports::wire::DataFrameHeader&)> on_placed;
    // The link to `peer` failed (reason says how); it has been removed.
    std::function<void(uint64_t peer, const std::string& name, const std::string& reason)> on_lost;
    // Optional: a path to `peer` over local NIC `nic`, to the peer's "ip:port" `remote`
    // (the latency class's or not), failed while the peer is kept (other paths, or the grace
    // period); the side that opened it connects it again.
    std::function<void(uint64_t peer, const std::string& nic, const std::string& remote,
                       bool latency)>
        on_path_lost;
    // Optional: local NIC `nic` is up again (netlink).
    std::function<void(const std::string& nic)> on_nic_up;
    // Optional: a frame of `flow` with `bytes` of payload left a channel's send scheduler
    // for a path after waiting `waited` there (per-job share and queue delay).
    std::function<void(uint32_t flow, uint64_t bytes, std::chrono::nanoseconds waited)>
        on_scheduled;
  };

  // What plexusctl shows of the links (snapshot()).
  struct PathInfo {
    std::string nic;        // local interface
    std::string transport;  // "tcp", "rdma" (DataPath::transport)
    std::string local;
    std::string remote;
    std::string state;     // active, standby (a backup), probation, drained
    bool latency = false;  // the latency class's connection
    uint64_t bytes_sent = 0;
    uint64_t bytes_received = 0;
    double rate_bytes_per_s = 0;  // measured while busy; 0 until then
    // The transport's latest delivery-rate sample and RTT (DataPath::delivery).
    double delivery_bytes_per_s = 0;
    bool delivery_app_limited = false;
    double rtt_us = 0;
    uint64_t kernel_unsent_bytes = 0;  // queued in its socket, not yet sent
    // Its windowed telemetry (null when off): data bytes and chunks each way, resent bytes,
    // failures, and the time from a chunk's send to its acknowledgement.
    std::shared_ptr<const monitor::WindowRing> windows;
  };
  struct PeerInfo {
    uint64_t instance = 0;
    std::string name;
    bool reliable = false;
    std::vector<PathInfo> paths;
    transports::ReliableChannel::Counters counters;
    int64_t down_for_ms = -1;  // no live path for this long; -1 while one is live
  };

  // Windowed telemetry per path and per NIC (monitor/window_ring.h): `windows` of `width`
  // each kept; a zero width (Telemetry{}) turns it off. No member initializers: GCC cannot
  // use them in the constructor's default argument inside this class.
  struct Telemetry {
    std::chrono::nanoseconds width;
    size_t windows;
  };

  static constexpr uint32_t kDefaultChunkBytes = 512 * 1024;
  explicit NodeLinks(Handler handler, uint32_t chunk_bytes = kDefaultChunkBytes,
                     transports::ReliableChannel::Settings channel = {}, Telemetry telemetry = {});
  ~NodeLinks();
  NodeLinks(const NodeLinks&) = delete;
  NodeLinks& operator=(const NodeLinks&) = delete;

  // Per local NIC ("?" when unknown), the windows of every path over it, past and present
  // (empty when telemetry is off); safe from any thread.
  std::map<std::string, std::shared_ptr<const monitor::WindowRing>> nic_windows() const;

  // Readable when a link has I/O ready: the engine adds it to the set it parks on.
  int epoll_fd() const { return epoll_.get(); }

  // Opens a path to peer node `peer` over local NIC `nic` ("" when unknown) with `open` (a
  // connection set up and authenticated by the peer server): a path of its channel (the
  // first one opens the channel). `backup`: a pre-connected path across rails, on standby
  // while the channel has an active path. `latency`: the latency class's connection
  // (ReliableChannel::add_path).
  void add(uint64_t peer, std::string name, transports::PathOpener open, std::string nic = "",
           bool backup = false, bool latency = false);
  // Follows local NICs going down and up (netlink); without it only silence and socket
  // errors fail paths. Returns "" or why it cannot.
  std::string watch_nics();
  // The peer's daemon is gone (its control connection closed): lost now, not after the
  // grace period its silent paths would get.
  void peer_gone(uint64_t peer, const std::string& reason) { lose(peer, reason); }
  // Local NIC `nic` is down (`how`, for messages): its paths fail now and their peers are
  // told over their other paths. What netlink events lead to; returns how many failed.
  size_t nic_down(const std::string& nic, const std::string& how);
  // Drained: the paths over `nic` (and those that join later) take no new frames, in
  // both directions (the peers are told). Returns how many paths it applies to now.
  size_t drain_nic(const std::string& nic, bool drained);
  // Fault injection (plexusd --fault-injection): each path over `nic` has its transport fail
  // it as a fault of its own would (DataPath::inject_fault). Returns how many it was injected
  // into; `why` gets the first refusal.
  size_t inject_fault(const std::string& nic, std::string* why);
  // The drained NICs as of the last snapshot; safe from any thread.
  std::vector<std::string> drained_snapshot() const;
  // The links as of the last tick (at most ~100 ms old); safe from any thread.
  std::vector<PeerInfo> snapshot() const;
  bool has(uint64_t peer) const { return links_.count(peer) != 0; }
  // Whether poll() has anything to do (links, or NIC events to read).
  bool active() const { return !links_.empty() || nic_monitor_ != nullptr; }
  size_t size() const { return links_.size(); }
  // How long the engine may sleep before poll() must run again (heartbeats, timeouts).
  int max_sleep_ms() const { return links_.empty() ? -1 : kTickMs; }
  // Sooner than that while frames wait for a path at its queue limit (no event says when
  // the kernel has made room): the channel settings' held_path_retry.
  std::optional<std::chrono::nanoseconds> look_again_in() const {
    if (!held_) return std::nullopt;
    return std::chrono::nanoseconds(channel_settings_.held_path_retry);
  }

  // Frames of communicator comm_id (data, markers, notices) belong to `flow` from now on,
  // scheduled by its policy against other flows' (ReliableChannel's send scheduler); frames
  // of a communicator never named go as flow 0. forget_comm: it is gone.
  void set_comm_flow(uint64_t comm_id, uint32_t flow) { comm_flows_[comm_id] = flow; }
  void forget_comm(uint64_t comm_id) { comm_flows_.erase(comm_id); }
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
                    std::function<void()> done);

  // A data frame with no payload, its chunk and offset chosen by the caller (e.g. the end
  // of a message whose size only the sender knows); `done` runs once it is released, as above.
  bool send_marker(uint64_t peer, uint64_t comm_id, uint64_t op_seq, uint32_t step, uint64_t offset,
                   uint32_t chunk, std::function<void()> done);

  // Tells `peer` that communicator comm_id failed here, and why (best effort).
  void send_abort(uint64_t peer, uint64_t comm_id, const std::string& reason);
  // Tells `peer` that `rank` of this node left communicator comm_id.
  // `collectives`: how many collectives the rank had submitted.
  void send_departed(uint64_t peer, uint64_t comm_id, int rank, uint64_t collectives,
                     const std::string& reason);

  // This node's bandwidth as its links measured it, which the nodes' speed agreement
  // compares, in bytes/s, 0 when nothing is measured: per local NIC with an active path, a
  // NicPace sample every report (bytes acknowledged over the time the network set the pace,
  // from TCP_INFO read every tick), summed over the NICs. A NIC pressed for at least
  // kPressedShare of the report's span moves its measure (weight kRateWeight), up or down; one
  // pressed less (a light load, a window opening again after idle, which reads low) only raises
  // it. Over pressed time, as a delivery-rate sample is one round trip's worth (a shaper's
  // burst reads as gigabytes a second) and user-space counts see a socket buffer fill. Paths
  // whose transport counts neither (RDMA) add the largest per-peer sum of the channel's own
  // measure (ReliableChannel::capacity). Paths to a peer that reports itself much slower than
  // the median node are left out (kSlowerPeer of the median of this node's and its peers'):
  // their acknowledgements come back at the peer's pace.
  double own_bandwidth() const;
  // What peer `peer` last reported of its own (a kNodeRate frame every
  // kBandwidthReportEveryTicks), or 0: none, or none for kStaleReport.
  double peer_bandwidth(uint64_t peer, transports::ReliableChannel::TimePoint now) const;
  static constexpr double kPressedShare = 0.5;
  // Paths to a peer that reports less than this fraction of the median node's figure are
  // left out of this node's (their pace is the peer's).
  static constexpr double kSlowerPeer = 0.75;
  static constexpr double kRateWeight = 0.3;
  // A report's NIC sample counts once its paths were pressed at least this long (3
  // jiffies: shorter ones are mostly rounding).
  static constexpr double kMinBusyUs = 12'000;
  static constexpr auto kStaleReport = std::chrono::seconds(2);

  // Frames being read straight into memory kept alive by `owner` finish into a sink
  // instead (DataPath::abandon_placement), on every link.
  void abandon_placements(const void* owner);

  // Runs the I/O that is ready (waiting up to timeout_ms for some); returns whether
  // anything was read or written.
  bool poll(int timeout_ms);

 private:
  static constexpr int kTickMs = 10;
  static constexpr int kSnapshotEveryTicks = 10;
  static constexpr int kBandwidthReportEveryTicks = 10;
  static constexpr uint64_t kNicMonitorKey = 0;         // in the epoll set; paths start at 1
  static constexpr uint64_t kNoticeToken = UINT64_MAX;  // path notices: nothing to release
  static constexpr size_t kReadBiteBytes = 1 << 20;
  struct Link;
  // A path and what the links keep of it; the channel sees `conn` (a FramePath).
  struct Path {
    Link* link = nullptr;
    uint32_t id = 0;   // in the channel
    uint64_t key = 0;  // in the epoll set
    std::unique_ptr<transports::DataPath> conn;
    bool watching_out = false;
    std::string nic;     // local interface
    std::string local;   // "ip:port", for messages
    std::string remote;  // "ip:port"
    // IPv4 endpoints as address << 16 | port (path notices name paths by them); 0: not IPv4.
    uint64_t local_key = 0;
    uint64_t remote_key = 0;
    bool peer_drained = false;  // the peer drained its end (a kPathNotice)
    bool latency = false;       // the latency class's connection
    // own_bandwidth: the transport's counters as last read, every tick (0: it has none).
    uint64_t acked_seen = 0;
    uint64_t busy_us_seen = 0;
    // Telemetry (null when off): this path's windows and its NIC's.
    std::shared_ptr<monitor::WindowRing> windows;
    std::shared_ptr<monitor::WindowRing> nic_windows;
    template <typename Record>
    void record(Record record) {
      if (windows) {
        record(*windows);
        record(*nic_windows);
      }
    }
  };
  struct Link {
    uint64_t peer;
    std::string name;
    std::unique_ptr<transports::ReliableChannel> channel;
    std::vector<std::unique_ptr<Path>> paths;  // by channel path id; null once failed
    uint64_t peer_incarnation = 0;             // the peer's channel, from its first heartbeat
    std::string last_failure;                  // why the latest path failed
    double peer_bandwidth = 0;                 // its latest kNodeRate report
    bool paced_by_peer = false;                // much slower than the median (kSlowerPeer)
    transports::ReliableChannel::TimePoint peer_bandwidth_at{};
  };
  struct DoomedPath {  // a path to fail once no connection is mid-read
    uint64_t peer;
    uint64_t key;
    std::string reason;
  };
  struct Pending {  // one queued chunk
    uint64_t peer = 0;
    transports::ReliableChannel::TimePoint sent_at;  // handed to the channel
    std::shared_ptr<void> keep_alive;
    std::function<void()> done;  // the message's: run once its every chunk is released
    bool used = false;
  };
  uint64_t take_token(uint64_t peer, std::shared_ptr<void> keep_alive, std::function<void()> done,
                      transports::ReliableChannel::TimePoint now);
  // The peer has chunk `token` (acknowledged, or written when unacknowledged), its latest
  // copy sent on channel path `path`.
  void chunk_sent(uint64_t token, uint32_t path);
  Path* path_of(uint64_t peer, uint32_t path) const;
  void update_interest(Path& path);
  void flush(Link& link);  // hands paths frames and writes now; fails paths that cannot
  uint32_t flow_of(uint64_t comm_id) const {
    auto it = comm_flows_.find(comm_id);
    return it == comm_flows_.end() ? 0 : it->second;
  }
  uint32_t chunk_bytes_for(const Link& link) const;
  // `notify`: tell the peer over another path (the failure is local: a NIC went down).
  void fail_path(Path& path, std::string reason, bool notify = false);
  // A control frame from the peer about its paths (checked before the channel sees it).
  std::string on_path_frame(Path& path, const transports::wire::DataFrameHeader& header);
  void send_path_notice(Link& link, const Path& about, transports::wire::PathNotice what);
  // Turns the NIC samples since the last report (sample_paths) into each NIC's measure
  // (own_bandwidth), judges which peers are much slower than the median, then sends
  // own_bandwidth() to every peer, on one live path each.
  void report_bandwidth();
  // Every tick: each path's transport counters, and each NIC's pressed time (own_bandwidth).
  void sample_paths();
  void fail_doomed();
  void on_nic_events();
  void publish_snapshot();
  void lose(uint64_t peer, std::string reason);  // by value: it may be the dying link's own error
  bool service(Path& path, uint32_t events);
  void tick();
  void send_notice(uint64_t peer, transports::wire::FrameType type, uint64_t comm_id, uint32_t step,
                   const std::string& text, uint64_t op_seq = 0);

  Handler handler_;
  uint32_t chunk_bytes_;
  transports::FlowPolicies flow_policies_;  // the channels read it
  std::unordered_map<uint64_t, uint32_t> comm_flows_;
  transports::ReliableChannel::Settings channel_settings_;
  common::UniqueFd epoll_;
  std::unordered_map<uint64_t, std::unique_ptr<Link>> links_;
  std::unordered_map<uint64_t, Path*> paths_by_key_;
  uint64_t next_key_ = 1;
  transports::ReliableChannel::TimePoint last_tick_{};
  // Some link's frames wait for a path at its queue limit: poll() flushes the links again
  // once held_path_retry has passed since held_since_.
  bool held_ = false;
  transports::ReliableChannel::TimePoint held_since_{};
  std::vector<Pending> pending_;
  std::vector<uint64_t> free_tokens_;
  std::unique_ptr<transports::LinkMonitor> nic_monitor_;
  std::set<std::string> drained_nics_;
  std::map<std::string, double> nic_measures_;           // own_bandwidth: bytes/s per local NIC
  std::chrono::steady_clock::time_point measured_at_{};  // the last report
  NicPace nic_pace_;                                     // since the last report
  std::chrono::steady_clock::time_point sampled_at_{};   // the last sample_paths
  std::vector<DoomedPath> doomed_;
  bool mid_read_ = false;  // service() is in a connection's read or write
  uint64_t ticks_ = 0;
  mutable std::mutex snapshot_mutex_;
  std::vector<PeerInfo> snapshot_;
  std::vector<std::string> drained_snapshot_;
  Telemetry telemetry_;
  std::map<std::string, std::shared_ptr<monitor::WindowRing>> nic_windows_;  // under the mutex
};

}  // namespace plexus::daemon
