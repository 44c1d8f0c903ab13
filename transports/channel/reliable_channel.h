// A channel to one peer daemon over several paths (one per NIC pair, and a latency-class
// twin beside each where configured; docs/architecture.md, sections 3 and 4). Every frame
// gets a channel sequence number and is kept until the peer acknowledges it cumulatively;
// frames are striped over the healthy paths of their class (pick_path), each
// new frame to the path expected to finish it first (its backlog over its measured rate),
// so a slow path gets less. A path that fails (socket error, a local link down, or silence
// longer than the path timeout: every path carries a heartbeat when idle) has its
// unacknowledged frames sent again on the others; the receiver drops the copies it already
// has. A path that comes back is on probation until it has been live for `stable_after`;
// a drained path takes no new frames. A backup path (pre-connected, e.g. across rails) is on
// standby: heartbeats only, frames once no active path is left. Notices (abort, departed) and
// zero-length frames are fenced: delivered only after every frame the channel numbered before
// them (of any flow: deliver_fenced waits for the cumulative count), as on one TCP stream.
//
// Several flows (jobs) share the channel: new frames wait in a send scheduler
// (send_scheduler.h) and are numbered only as they leave it, and a path takes a frame only
// while little waits in it (Settings::path_queue_bytes), so the choice of what goes next is
// made at the last moment, not first come first served. Each path is also asked to keep no
// more than about path_queue_time of its measured rate unsent in its transport (TCP: the
// socket's send buffer) and, while frames of several flows leave the scheduler, about that
// much beyond a round trip in flight (FramePath::limit_queue), so that the kernel does not
// become a queue of its own.
//
// No I/O, and no clock but for what send() and pump() read as frames enter and leave the
// scheduler (how long each waited, when flows last mixed): the owner queues nothing itself,
// does the reads and writes of its paths, passes `now`, and calls tick() every few
// milliseconds.
//
// This class is the facade its owner calls; the work is done by its parts, each owning its
// state: ChannelPaths (the paths: states and their notices, the choice of a path, and each
// path's PathLiveness and PathPace), ChannelDispatcher (the sending side: the scheduler, the
// numbering, resending, the peer's acknowledgements) and ChannelDelivery (the receiving
// side: duplicates, fencing, the acknowledgement to send). It owns the counters, and
// interleaves its parts where one event concerns several: a path's failure, the tick.
// Single-threaded: the owner's thread (NodeLinks': the engine thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "transports/channel/channel_counters.h"
#include "transports/channel/channel_delivery.h"
#include "transports/channel/channel_dispatcher.h"
#include "transports/channel/channel_paths.h"
#include "transports/channel/frame_path.h"
#include "transports/channel/send_scheduler.h"

namespace plexus::transports {

class ReliableChannel {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  struct Settings {
    std::chrono::milliseconds heartbeat_interval{50};  // idle paths send one this often
    // ... and this often once they have had no traffic for idle_after, each heartbeat
    // promising the peer its interval (path_liveness.h): the peer allows that much more
    // silence. Not above heartbeat_interval: no backing off.
    std::chrono::milliseconds idle_heartbeat_interval{1000};
    std::chrono::milliseconds idle_after{1000};
    std::chrono::milliseconds path_timeout{200};  // silence that fails a path (beyond a promise)
    std::chrono::milliseconds stable_after{500};  // probation of a returning path
    // The last live path is failed for silence only after this long (losing it loses the
    // peer); a socket error still fails it at once.
    std::chrono::milliseconds last_path_grace{2000};
    // Off: no sequence numbers or acknowledgements (a frame is done once written), one
    // path, for measuring what reliability costs. Receivers accept both.
    bool reliable = true;
    // Names this channel to the peer (carried in every heartbeat and acknowledgement, the
    // first frame on each path): a peer that sees it change knows this side gave the old
    // channel up and started afresh. 0: not carried.
    uint64_t incarnation = 0;
    // Between flows: classes, floors, the round-robin quantum.
    SendScheduler::Settings scheduling{};
    // A path takes another frame only while at most this many bytes wait in it (not yet
    // handed to its transport): frames wait in the scheduler instead, where a later frame of
    // a higher class can still go first.
    uint64_t path_queue_bytes = 0;
    // How much a path's transport may queue, in time at the path's measured rate, and at
    // least (FramePath::limit_queue). A latency frame waits behind about this much.
    std::chrono::microseconds path_queue_time{1000};
    uint64_t min_path_queue_bytes = 32 << 10;
    // Paths' transports are held to that in flight too (FramePath::limit_queue) only while
    // frames of more than one flow left the scheduler within this long: a flow alone gets
    // the transport's own queue, as with no scheduler, and so loses nothing when the sender
    // is slow to refill a short queue (a loaded host).
    std::chrono::milliseconds hold_queue_after_mixing{200};
    // A path at its queue limit is not polled writable (the kernel empties its queue without
    // an event): while frames wait for one, the caller looks again this often. Short enough
    // that the held queue does not run dry in between: a TCP path holds path_queue_time of
    // its rate (4x this by default; the daemon takes a quarter of a shorter --path-queue-us)
    // and at least 64 KiB (250 µs is 12.5 KB at 400 Mbit/s). Long enough not to spend the
    // engine's core on looks: at 50 µs, 2-core nodes running a bulk and a latency job spent
    // the CPU that the latency job's ops then waited for (docs/BENCHMARKS.md, "The latency
    // class on its own connections").
    std::chrono::microseconds held_path_retry{250};
  };

  // kStandby: a healthy backup path (add_path's `backup`), used only without an active one.
  using PathState = transports::PathState;

  struct Handler {
    // A frame delivered once (never a duplicate). Return "" or why it is unacceptable.
    std::function<std::string(const wire::DataFrameHeader&, std::span<const std::byte>)> on_frame;
    // Optional, as DataPath::Callbacks::place / on_placed.
    std::function<Placement(const wire::DataFrameHeader&)> place;
    std::function<std::string(const wire::DataFrameHeader&)> on_placed;
    // The frame queued with `token` is done with: acknowledged by the peer (or written, when
    // not reliable). Its payload may change now. Not reliable, `path` kNoPath: it was never
    // written (no path was left: lost, as on a broken TCP connection), not delivered.
    std::function<void(uint64_t token, uint32_t path)> on_released;  // path: its latest copy's
    // Optional: a frame of `bytes` payload goes again, on `path` (its previous one failed).
    std::function<void(uint32_t path, uint64_t bytes)> on_resent;
    // A path changed state (detail: why it failed, or "").
    std::function<void(uint32_t path, PathState state, const std::string& detail)> on_path_state;
    // Optional: a frame of `flow` with `bytes` of payload left the scheduler for a path
    // after waiting there `waited`.
    std::function<void(uint32_t flow, uint64_t bytes, std::chrono::nanoseconds waited)>
        on_scheduled;
  };

  using Counters = ChannelCounters;

  // `policies` (flows' classes and weights) outlives the channel; null: every flow alike.
  ReliableChannel(Settings settings, Handler handler, const FlowPolicies* policies = nullptr);
  ReliableChannel(const ReliableChannel&) = delete;
  ReliableChannel& operator=(const ReliableChannel&) = delete;

  // A connected path (not owned: the owner keeps it until path_failed or the channel's
  // end). `probation`: a path coming back, which carries only heartbeats and
  // acknowledgements until it has been live for stable_after. `backup`: it settles on
  // standby rather than active. `latency`: the latency class's path (its own connection, which
  // the kernel and the switches queue apart): frames of latency-class flows go on an active
  // one where there is one, and other frames only when no other path is active. Returns its
  // id.
  uint32_t add_path(FramePath* path, TimePoint now, bool probation = false, bool backup = false,
                    bool latency = false);
  void path_failed(uint32_t path, const std::string& reason);
  // The path was closed by agreement (an idle link closing, its channel held): as
  // path_failed, but not counted as a failure (unless a tick had already failed it for
  // silence), so the next path is not on probation. Once none is live, frames wait for the
  // next path even without reliability.
  void path_closed(uint32_t path);
  // Held: new and waiting frames stay in the channel, none is handed to a path (pump moves
  // nothing); acknowledgements and heartbeats still go. Released, they go (the caller pumps).
  void hold(bool held) { dispatcher_.hold(held); }
  bool held() const { return dispatcher_.held(); }
  // Drained paths take no new frames; what they have still drains.
  void drain(uint32_t path, bool drained);

  // Sends a frame of `flow` (its channel_seq is set here, once the scheduler lets it go).
  // `token` comes back in on_released.
  void send(const wire::DataFrameHeader& header, std::span<const std::byte> payload, uint64_t token,
            uint32_t flow = 0);
  // Hands waiting frames to the paths that have room; the owner calls it when a path's
  // queue went down (after its writes). Returns whether any frame was handed over.
  bool pump();

  // What the owner reports from path `path`. Each returns "" or why the frame is
  // unacceptable (the owner then fails that path).
  std::string receive(uint32_t path, const wire::DataFrameHeader& header,
                      std::span<const std::byte> payload, TimePoint now);
  Placement place(uint32_t path, const wire::DataFrameHeader& header, TimePoint now);
  std::string placed(uint32_t path, const wire::DataFrameHeader& header, TimePoint now);
  std::string discarded(uint32_t path, const wire::DataFrameHeader& header, TimePoint now);
  // `token` (as queued on the path) is in the network's hands; `bytes` of payload.
  void on_path_sent(uint32_t path, uint64_t token, uint64_t bytes);

  struct SilentPath {
    uint32_t path;
    std::string reason;
  };
  // Heartbeats, silence, probation, rate estimates, and an acknowledgement if one is due.
  // Returns the paths that failed of silence, and why (already handled here; the owner
  // closes them).
  std::vector<SilentPath> tick(TimePoint now);
  // When tick() must run next: at once (TimePoint{} or a time past) while any path has
  // traffic, is on probation or silent past its due, or frames wait or are unacknowledged;
  // else the earliest heartbeat or silence due of its idle paths. Sending and receiving
  // frames other than heartbeats bring it forward.
  TimePoint next_tick() const { return next_tick_; }
  // Path `path` has had no traffic either way for idle_after (its transport is not read).
  bool idle(uint32_t path) const { return paths_.liveness(path).idle(); }
  static constexpr std::chrono::seconds kPeakWindow = PathPace::kPeakWindow;  // capacity()
  // Sends the cumulative acknowledgement if it moved (after a batch of reads).
  void flush_ack();
  bool ack_due() const { return delivery_.ack_due(); }

  PathState state(uint32_t path) const { return paths_.state(path); }
  size_t usable_paths() const { return paths_.usable(); }  // active ones (not standby ones)
  size_t live_paths() const { return paths_.live(); }      // not failed
  // When a frame last arrived on any path (own stalls discounted, as for silence).
  TimePoint last_heard() const { return paths_.last_heard(); }
  double rate_estimate(uint32_t path) const { return paths_.pace(path).rate(); }
  size_t unacknowledged() const { return dispatcher_.unacknowledged(); }
  // Frames not yet on a path: numbered ones waiting for one, and the scheduler's.
  size_t waiting() const { return dispatcher_.waiting(); }
  // The fastest measured rate of an active path (bytes/s; 0 until one is measured).
  double fastest_rate() const { return paths_.fastest_rate(); }
  // What path `path` can carry as the channel measures it: its peak measured rate over
  // about kPeakWindow (kept after that until it is measured again; the striping's rate above
  // is forgotten), and when that peak was taken (TimePoint{} when never measured). A peak,
  // as samples fall below what a path can carry whenever its receiver is slow to read (a
  // busy host). For transports that measure no delivery rate of their own (RDMA): their
  // paths' share of the node's bandwidth figure, which the slow-node schedule compares.
  using Capacity = PathCapacity;
  Capacity capacity(uint32_t path) const { return paths_.pace(path).capacity(); }
  const Counters& counters() const { return counters_; }

 private:
  // An acknowledgement or a heartbeat (`type`) on `path`: the acknowledgement to send, and
  // this channel's incarnation.
  void queue_control(uint32_t path, wire::FrameType type);
  TimePoint compute_next_tick(TimePoint now) const;

  uint64_t incarnation_;
  TimePoint next_tick_{};
  Counters counters_;
  ChannelPaths paths_;
  ChannelDispatcher dispatcher_;
  ChannelDelivery delivery_;
};

}  // namespace plexus::transports
