// This daemon's data connections to peer daemons: per peer node a reliable channel
// (transports/channel/reliable_channel.h) over one path per NIC pair, and a latency-class
// twin beside each where configured (a DataPath: TCP or whatever transport opened it), all
// in an epoll set NodeLinks polls. Keeps the memory a chunk is read from alive until the peer
// has acknowledged it (with --channel-acks off, until it is in its transport's hands), and
// hands arriving frames to the handler once each. Each path runs over one local NIC: a NIC
// that goes down fails its paths at once and tells the peers over their other paths; a
// drained NIC takes no new frames. A peer is lost when it has had no live path for the grace
// period (at once when it closed them, or without acknowledgements). An idle link closes
// its paths by agreement with the peer (quiet for Retirement::idle_close, or the least
// recently busy past Retirement::max_open) and stays, dormant, with its channel: the next
// frame for it opens a path again and nothing is lost (peer_links_retire.cc).
//
// Owns the links (channels and paths), the epoll set, the chunks not yet released
// (ChunkTokens), and the paths to fail once no connection is mid-read. Reads NodeLinks' other
// parts (Parts) and tells them what it hears (Hooks). Engine thread only.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "daemon/links/chunk_tokens.h"
#include "daemon/links/link_retire.h"
#include "daemon/links/links_handler.h"
#include "daemon/links/links_snapshot.h"
#include "daemon/links/nic_events.h"
#include "daemon/links/node_bandwidth.h"
#include "daemon/links/path_windows.h"
#include "monitor/window_ring.h"
#include "transports/channel/reliable_channel.h"
#include "transports/path/data_path.h"

namespace plexus::daemon {

// When idle links close their paths (peer_links_retire.cc).
struct LinkRetirement {
  // A link whose paths have all been idle (ReliableChannel::idle) this long, with nothing
  // queued or unacknowledged, asks the peer to close them. 0: never for idleness.
  std::chrono::milliseconds idle_close{30000};
  // Past this many links with paths, the quiet ones close, least recently busy first,
  // whatever idle_close says. 0: no cap. With both 0 this side also refuses its peers' asks.
  size_t max_open = 64;
  // A link that closed while frames were queued for it waits this long for a new path (the
  // daemon's --connect-timeout-ms); one wanted through want() gets the caller's deadline.
  std::chrono::milliseconds reopen_within{10000};
};

class PeerLinks {
 public:
  // What NodeLinks' other parts hear from the links.
  struct Hooks {
    // `peer` reported its own bandwidth (a kNodeRate frame): NodeBandwidth.
    std::function<void(uint64_t peer, uint64_t bytes_per_s)> peer_rate;
    // The NIC monitor's socket, in the epoll set under kNicMonitorKey, is readable: NicEvents.
    std::function<void()> nic_readable;
    // The link to `peer` is gone (called before the handler's on_lost): NodeBandwidth.
    std::function<void(uint64_t peer)> peer_lost;
  };
  // What it reads of NodeLinks' other parts; each outlives it.
  struct Parts {
    const NicEvents* nics = nullptr;                          // which NICs are drained here
    const transports::FlowPolicies* flow_policies = nullptr;  // every channel's
    LinksSnapshot* published = nullptr;                       // where publish() puts it
  };

  using Retirement = LinkRetirement;

  static constexpr int kTickMs = 10;
  static constexpr uint64_t kNicMonitorKey = 0;  // in the epoll set; paths start at 1

  PeerLinks(LinksHandler handler, Hooks hooks, Parts parts, uint32_t chunk_bytes,
            transports::ReliableChannel::Settings channel, Retirement retirement = {});

  // Readable when a link has I/O ready.
  int epoll_fd() const { return epoll_.get(); }

  // Opens a path to `peer` (NodeLinks::add). A link waiting for its first path gets it.
  void add(uint64_t peer, std::string name, transports::PathOpener open, std::string nic,
           bool backup, bool latency, std::string rail_key);
  // A link to `peer` is needed (NodeLinks::want): with none, one is made that has no path yet
  // (frames queue on its channel) until `deadline`, when it is lost unless a path came; a
  // dormant one waits for a path the same way. Returns true when it did: the caller has a
  // connection opened to one of `addresses`. A link whose paths are closing by agreement
  // asks through the handler's on_wanted once they are closed (the addresses are kept).
  bool want(uint64_t peer, std::string name, transports::ReliableChannel::TimePoint deadline,
            std::vector<std::string> addresses = {});
  // No connection to `peer` could be opened: a link still waiting for its first path is lost
  // with `reason`; a link with paths keeps its own watch.
  void open_failed(uint64_t peer, const std::string& reason);
  // The link is removed, its chunks let go, and the handler told.
  void lose(uint64_t peer, std::string reason);  // by value: it may be the dying link's own error
  // Whether frames for `peer` go out without a connection being opened: a link that is
  // neither dormant nor holding its frames while it agreed to close.
  bool has(uint64_t peer) const;
  bool known(uint64_t peer) const { return links_.count(peer) != 0; }  // dormant too
  size_t size() const { return links_.size(); }
  // Links with paths, or waiting for their first (not dormant).
  size_t open_links() const { return links_.size() - dormant_; }
  // The link to `peer` (if any) stays open while idle while pinned more often than unpinned
  // (a speed-agreement leader hears its members' rates over theirs): it neither asks nor
  // agrees to close its paths.
  void pin(uint64_t peer, bool pinned);
  // While frames wait for a path at its queue limit: the settings' held_path_retry.
  std::optional<std::chrono::nanoseconds> look_again_in() const {
    if (!held_) return std::nullopt;
    return std::chrono::nanoseconds(channel_settings_.held_path_retry);
  }

  // For MessageSender: the channel to `peer` (null when there is no link) to queue frames on,
  // each with a token from take_token; then flush(peer) hands them to the paths.
  transports::ReliableChannel* channel(uint64_t peer);
  uint64_t take_token(uint64_t peer, std::shared_ptr<void> keep_alive, std::function<void()> done,
                      transports::ReliableChannel::TimePoint now) {
    return tokens_.take(peer, std::move(keep_alive), std::move(done), now);
  }
  void flush(uint64_t peer);

  // Frames being read straight into memory kept alive by `owner` finish into a sink
  // instead (DataPath::abandon_placement), on every link.
  void abandon_placements(const void* owner);

  // Every kTickMs while any link has traffic, else when the earliest link asks
  // (next_tick): heartbeats, silent paths, probation, rate samples, acknowledgements; peers
  // with no live path past the grace period are lost. Only links whose channel asked for a
  // tick by `now` are visited; idle paths let their full telemetry rings go.
  void tick(transports::ReliableChannel::TimePoint now);
  // When tick() must run next (ReliableChannel::next_tick, the earliest link's): a sent or
  // received frame other than a heartbeat brings it forward. TimePoint::max() with no link.
  transports::ReliableChannel::TimePoint next_tick() const { return next_tick_; }
  // Whether the last tick found a link with traffic (a channel that asked to tick again at
  // once).
  bool busy() const { return busy_; }
  // Flushes links held at a queue limit once held_path_retry has passed, then runs the I/O
  // that is ready (waiting up to timeout_ms, at most kTickMs); returns whether anything was
  // read or written.
  bool poll(int timeout_ms);
  // Puts the links and the drained NICs where other threads read them.
  void publish();

  // NICs (peer_links_nics.cc). Local NIC `nic` is down (`how`, for messages): its paths fail
  // now and their peers are told over their other paths; returns how many failed.
  size_t nic_down(const std::string& nic, const std::string& how);
  // NicEvents has `nic` drained (or not) now: the paths over it take no new frames (or take
  // them again), in both directions (the peers are told). Returns how many paths it applies to.
  size_t drain_nic(const std::string& nic, bool drained);
  // Each path over `nic` has its transport fail it as a fault of its own would
  // (DataPath::inject_fault). Returns how many it was injected into (0: no path runs over
  // `nic`), or the first refusal when every path refused.
  common::Result<size_t> inject_fault(const std::string& nic);

  // For NodeBandwidth (peer_links_nics.cc): the transport counters of every path with
  // traffic (ReliableChannel::idle: an idle one is not read, and is gone from NodeBandwidth
  // until it has traffic again), every tick; publish() shows the last read.
  void read_counters(NodeBandwidth& bandwidth);
  std::vector<NodeBandwidth::ActivePath> active_paths() const;
  // Sends the node's figure to every peer with traffic (`all`: to every peer), on one live
  // path each.
  void send_node_rate(double bytes_per_s, bool all);

 private:
  static constexpr uint64_t kNoticeToken = UINT64_MAX;  // path notices: nothing to release
  static constexpr size_t kReadBiteBytes = 1 << 20;
  struct Link;
  using Retire = LinkRetire::State;
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
    std::string rail_key;       // the rail it was dialled for ("": the peer dialled it)
    bool retired = false;       // closing by agreement: its end is no failure
    // Its transport's counters as last read (read_counters: while it has traffic).
    std::optional<transports::PathDelivery> delivery;
    // Telemetry (null when off): this path's windows and its NIC's.
    std::unique_ptr<PathWindows> windows;
    std::shared_ptr<monitor::WindowRing> nic_windows;
    template <typename Record>
    void record(transports::ReliableChannel::TimePoint now, Record record) {
      if (windows) {
        record(windows->at(now));
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
    // Made by want() and no path has come yet: lost at this time rather than after the grace.
    std::optional<transports::ReliableChannel::TimePoint> opening_until;
    uint64_t incarnation = 0;  // this side's channel's (crossed kRetire: the lower one asks)
    LinkRetire retire;         // closing its paths while idle (link_retire.h)
    // want() while kAgreed: a connection is opened once the paths have closed (on_wanted).
    std::optional<transports::ReliableChannel::TimePoint> reopen_until;
    std::vector<std::string> addresses;  // the peer's, as want() last named them
    uint32_t pins = 0;                   // pin(): never closed while idle
    uint64_t paths_added = 0;            // ever; one added since an ask refuses the close
  };
  struct DoomedPath {  // a path to fail once no connection is mid-read
    uint64_t peer;
    uint64_t key;
    std::string reason;
  };
  Link& make_link(uint64_t peer, std::string name);
  // The peer has chunk `token` (acknowledged, or written when unacknowledged), its latest
  // copy sent on channel path `path`.
  void chunk_sent(uint64_t token, uint32_t path);
  Path* path_of(uint64_t peer, uint32_t path) const;
  void update_interest(Path& path);
  void flush(Link& link);  // hands paths frames and writes now; fails paths that cannot
  // `notify`: tell the peer over another path (the failure is local: a NIC went down).
  void fail_path(Path& path, std::string reason, bool notify = false);
  // A control frame from the peer about its paths (checked before the channel sees it).
  std::string on_path_frame(Path& path, const transports::wire::DataFrameHeader& header);
  void send_path_notice(Link& link, const Path& about, transports::wire::PathNotice what);
  void fail_doomed();
  bool service(Path& path, uint32_t events);
  // Idle links (peer_links_retire.cc). What LinkRetire decides on: quiet (nothing queued,
  // unacknowledged or being written; every path idle by its liveness); whether it may close
  // at all (not pinned or opening, no op under way with the peer, and without
  // acknowledgements a single live path: frames written on one path could still be on their
  // way while the close goes over another).
  RetireFacts retire_facts(const Link& link) const;
  // Does what LinkRetire decided (`id`: the ask it is about). kUnretire flushes the link
  // (may lose it, outside a read); nothing else closes a path or loses the link at once.
  void retire_step(Link& link, LinkRetire::Step step, uint64_t id);
  // While more than max_open links have paths, asks the peers of the quiet ones, least
  // recently busy first, to close theirs (a scan of the links, only then).
  void retire_over_cap(transports::ReliableChannel::TimePoint now);
  // Closes a path by agreement (no failure); the link goes dormant with its last.
  void close_retired(Path& path);
  // When `link` wants its next tick: its channel's, or its deadline to have a first path.
  static transports::ReliableChannel::TimePoint due(const Link& link) {
    if (link.retire.state() == Retire::kDormant) {
      return transports::ReliableChannel::TimePoint::max();
    }
    return link.opening_until ? std::min(*link.opening_until, link.channel->next_tick())
                              : link.channel->next_tick();
  }
  // The link's channel may want a tick sooner now (it sent or heard traffic).
  void follow(const Link& link) { next_tick_ = std::min(next_tick_, due(link)); }

  LinksHandler handler_;
  Hooks hooks_;
  Parts parts_;
  uint32_t chunk_bytes_;
  transports::ReliableChannel::Settings channel_settings_;
  Retirement retirement_;
  size_t dormant_ = 0;  // links in Retire::kDormant
  common::UniqueFd epoll_;
  std::unordered_map<uint64_t, std::unique_ptr<Link>> links_;
  std::unordered_map<uint64_t, Path*> paths_by_key_;
  uint64_t next_key_ = 1;
  // Some link's frames wait for a path at its queue limit: poll() flushes the links again
  // once held_path_retry has passed since held_since_.
  bool held_ = false;
  transports::ReliableChannel::TimePoint held_since_{};
  ChunkTokens tokens_;
  transports::ReliableChannel::TimePoint next_tick_ = transports::ReliableChannel::TimePoint::max();
  bool busy_ = false;
  std::vector<DoomedPath> doomed_;
  bool mid_read_ = false;  // service() is in a connection's read or write
};

}  // namespace plexus::daemon
