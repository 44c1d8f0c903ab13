// Striping, acknowledgement, failover and failback over a channel's paths.
#include "transports/channel/reliable_channel.h"

#include <algorithm>

namespace plexus::transports {
namespace {

// Path tokens: a frame's channel_seq (reliable), the caller's token (not reliable), or this
// for acknowledgements and heartbeats.
constexpr uint64_t kControlToken = UINT64_MAX;
// Rate samples span at least this long, over which the path had a backlog throughout.
constexpr auto kRateSample = std::chrono::milliseconds(20);
// A rate not measured again for this long is forgotten: a path once measured slow gets a
// fair share again and is measured afresh, rather than being starved of the backlog that
// would show it has recovered.
constexpr auto kRateForgetAfter = std::chrono::seconds(1);

}  // namespace

ReliableChannel::ReliableChannel(Settings settings, Handler handler, const FlowPolicies* policies)
    : settings_(settings),
      handler_(std::move(handler)),
      policies_(policies != nullptr ? policies : &own_policies_),
      scheduler_(settings.scheduling, policies_) {}

uint32_t ReliableChannel::add_path(FramePath* io, TimePoint now, bool probation, bool backup,
                                   bool latency) {
  uint32_t id = 0;
  while (id < paths_.size() && paths_[id].state != PathState::kFailed) ++id;
  if (id == paths_.size()) paths_.emplace_back();
  Path& p = paths_[id];
  p = Path{};
  p.io = io;
  p.backup = backup;
  p.latency = latency;
  p.state = probation ? PathState::kProbation : settled(p);
  p.last_received = now;
  p.last_sent = now - settings_.heartbeat_interval;  // announce liveness at the next tick
  p.live_since = now;
  p.sample_start = now;
  if (handler_.on_path_state) handler_.on_path_state(id, p.state, "");
  // First on the path, ahead of any data: names this channel (Settings::incarnation).
  queue_control(id, wire::FrameType::kHeartbeat);
  p.last_sent = now;
  pump();
  return id;
}

void ReliableChannel::set_state(uint32_t path, PathState state, const std::string& detail) {
  Path& p = paths_.at(path);
  if (p.state == state) return;
  p.state = state;
  if (handler_.on_path_state) handler_.on_path_state(path, state, detail);
}

void ReliableChannel::path_failed(uint32_t path, const std::string& reason) {
  Path& p = paths_.at(path);
  if (p.state == PathState::kFailed) return;
  ++counters_.path_failures;
  set_state(path, PathState::kFailed, reason);
  p.io = nullptr;
  sender_.path_failed(path);
  pump();
}

void ReliableChannel::drain(uint32_t path, bool drained) {
  Path& p = paths_.at(path);
  if (p.state == PathState::kFailed) return;
  if (drained) {
    set_state(path, PathState::kDrained, "");
  } else if (p.state == PathState::kDrained) {
    // Straight back: a drained path kept its heartbeats, so it is known to be live.
    set_state(path, settled(p), "");
    pump();
  }
}

size_t ReliableChannel::usable_paths() const {
  return static_cast<size_t>(std::count_if(
      paths_.begin(), paths_.end(), [](const Path& p) { return p.state == PathState::kActive; }));
}

size_t ReliableChannel::live_paths() const {
  return static_cast<size_t>(std::count_if(
      paths_.begin(), paths_.end(), [](const Path& p) { return p.state != PathState::kFailed; }));
}

ReliableChannel::TimePoint ReliableChannel::last_heard() const {
  TimePoint last{};
  for (const Path& p : paths_) last = std::max(last, p.last_received);
  return last;
}

// The active path expected to finish `bytes` first: its backlog over its measured rate
// (paths not measured yet count as fast as the fastest measured one). With no active path,
// a backup on standby, then a path on probation, is better than waiting, and a drained one
// better than a hang. Only paths with room are candidates: when the best tier has none, the
// frame waits (kNoPath) rather than going to a worse tier. A latency frame has only the
// latency paths for candidates while one is active (it then never waits in the kernel's or
// the switches' queues behind another class's bytes); other frames only the other paths
// while one is live in any state (the latency paths' priority queues are not for bulk).
bool ReliableChannel::class_has_path(bool latency, bool active_only) const {
  return std::any_of(paths_.begin(), paths_.end(), [&](const Path& p) {
    return p.latency == latency && p.state != PathState::kFailed &&
           (!active_only || p.state == PathState::kActive);
  });
}

bool ReliableChannel::classes_apart() const {
  return class_has_path(true, true) && class_has_path(false, false);
}

uint32_t ReliableChannel::pick_path(uint64_t bytes, bool latency) const {
  const double fastest = std::max(fastest_rate(), 1.0);
  const bool own_class_only = class_has_path(latency, /*active_only=*/latency);
  for (PathState wanted :
       {PathState::kActive, PathState::kStandby, PathState::kProbation, PathState::kDrained}) {
    uint32_t best = kNoPath;
    double best_cost = 0;
    bool tier = false;
    for (uint32_t i = 0; i < paths_.size(); ++i) {
      const Path& p = paths_[i];
      if (p.state != wanted || (own_class_only && p.latency != latency)) continue;
      tier = true;
      if (!has_room(p)) continue;
      const double rate = p.rate > 0 ? p.rate : fastest;
      const double cost = static_cast<double>(p.io->backlog_bytes() + bytes) / rate;
      if (best == kNoPath || cost < best_cost) {
        best = i;
        best_cost = cost;
      }
    }
    if (tier) return best;
  }
  return kNoPath;
}

double ReliableChannel::fastest_rate() const {
  double fastest = 0;
  for (const Path& p : paths_) {
    if (p.state == PathState::kActive) fastest = std::max(fastest, p.rate);
  }
  return fastest;
}

bool ReliableChannel::has_room(const Path& p) const {
  return p.io->waiting_bytes() <= settings_.path_queue_bytes;
}

bool ReliableChannel::busy(const Path& p) const {
  return p.io->unsent_bytes() > 0 || (scheduler_.size() > 0 && !has_room(p));
}

// The transport queues about path_queue_time of the path's measured rate; until the rate is
// measured, what it holds by itself. Changed only when it moves by a quarter.
void ReliableChannel::set_queue_limit(Path& p, TimePoint now) {
  if (p.rate <= 0) return;
  const double seconds = std::chrono::duration<double>(settings_.path_queue_time).count();
  const uint64_t want =
      std::max(settings_.min_path_queue_bytes, static_cast<uint64_t>(p.rate * seconds));
  // A latency path carries one class alone: what it holds in flight delays no other class.
  const bool in_flight = mixing(now) && !p.latency;
  // The rate counts on its own too: it sets the round trip's share of the in-flight limit,
  // and on a slow path `want` stays at its minimum however the rate moves.
  auto within_a_quarter = [](double value, double then) {
    return value * 4 >= then * 3 && value * 4 <= then * 5;
  };
  if (p.queue_limit != 0 && p.queue_in_flight == in_flight &&
      within_a_quarter(static_cast<double>(want), static_cast<double>(p.queue_limit)) &&
      within_a_quarter(p.rate, p.queue_rate)) {
    return;
  }
  p.queue_limit = want;
  p.queue_rate = p.rate;
  p.queue_in_flight = in_flight;
  p.io->limit_queue(want, p.rate, in_flight);
}

// Acknowledgements go on the live path with the least backlog, an active latency path first
// (they are small, and a sender's ops wait on them: they should not queue behind bulk data);
// on a backup only when no other is left (an idle backup would otherwise take them all, and
// a silent fault of the route between the rails would then hold them up until the path
// timeout).
uint32_t ReliableChannel::pick_control_path() const {
  uint32_t best = kNoPath;
  auto better = [this](const Path& p, const Path& than) {
    const bool fast = p.latency && p.state == PathState::kActive;
    const bool than_fast = than.latency && than.state == PathState::kActive;
    if (fast != than_fast) return fast;
    return p.io->backlog_bytes() < than.io->backlog_bytes();
  };
  for (const bool standby : {false, true}) {
    for (uint32_t i = 0; i < paths_.size(); ++i) {
      const Path& p = paths_[i];
      if (p.state == PathState::kFailed || (p.state == PathState::kStandby) != standby) continue;
      if (best == kNoPath || better(p, paths_[best])) best = i;
    }
    if (best != kNoPath) return best;
  }
  return kNoPath;
}

void ReliableChannel::send(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
                           uint64_t token, uint32_t flow) {
  SendScheduler::Frame frame;
  frame.header = header;
  frame.payload = payload;
  frame.token = token;
  frame.flow = flow;
  if (handler_.on_scheduled) frame.queued_at = Clock::now();
  scheduler_.push(frame);
  pump();
}

bool ReliableChannel::pump() {
  bool handed = false;
  for (;;) {
    if (settings_.reliable) {
      // Numbered frames first: they go again after a path failed, or were numbered while
      // no path had room. While the classes travel apart, the other class's oldest goes
      // when this one's paths have no room.
      ChannelSender::Frame* frame = sender_.next_waiting();
      uint32_t path = frame != nullptr ? pick_path(frame->payload.size(), frame->latency) : kNoPath;
      if (frame != nullptr && path == kNoPath && classes_apart()) {
        frame = sender_.next_waiting(!frame->latency);
        if (frame != nullptr) path = pick_path(frame->payload.size(), frame->latency);
      }
      if (path != kNoPath) {
        if (paths_[path].state == PathState::kProbation) {
          set_state(path, settled(paths_[path]), "taken early: no other path");
        }
        paths_[path].io->queue(frame->header, frame->payload, frame->header.channel_seq);
        paths_[path].queued_since_tick = true;
        sender_.assigned(*frame, path);
        handed = true;
        if (frame->sends > 1) {
          ++counters_.frames_resent;
          counters_.bytes_resent += frame->payload.size();
          if (handler_.on_resent) handler_.on_resent(path, frame->payload.size());
        } else {
          ++counters_.frames_sent;
        }
        continue;
      }
      // Frames wait (no room on their paths, or the window is full): a new frame may still
      // go where the classes travel apart, on the other class's paths.
      if (sender_.waiting() > 0 && (sender_.window_full() || !classes_apart())) return handed;
    }
    SendScheduler::ClassMask classes = SendScheduler::kAllClasses;
    const SendScheduler::Frame* next = scheduler_.peek(classes);
    if (next == nullptr) return handed;
    bool latency = is_latency(next->flow);
    uint32_t path = pick_path(next->payload.size(), latency);
    if (path == kNoPath && classes_apart()) {
      // Its class's paths have no room: the other class's frames go on theirs meanwhile
      // (by the scheduler's order among them), rather than wait behind it.
      constexpr auto kLatencyOnly = SendScheduler::mask_of(TrafficClass::kLatency);
      classes = latency ? SendScheduler::kAllClasses & ~kLatencyOnly : kLatencyOnly;
      next = scheduler_.peek(classes);
      if (next == nullptr) return handed;
      latency = !latency;
      path = pick_path(next->payload.size(), latency);
    }
    if (path == kNoPath && (settings_.reliable || live_paths() > 0)) return handed;
    SendScheduler::Frame frame = scheduler_.pop(classes);
    if (handler_.on_scheduled) {
      handler_.on_scheduled(frame.flow, frame.payload.size(), Clock::now() - frame.queued_at);
    }
    if (frame.flow != last_flow_) {
      const bool first = last_flow_ == kNoFlowYet;  // the first flow alone is not mixing
      last_flow_ = frame.flow;
      if (!first) {
        const auto now = Clock::now();
        const bool was_mixing = mixing(now);
        mixed_at_ = now;
        if (!was_mixing) {
          for (Path& p : paths_) {  // hold the queues short from now
            if (p.io != nullptr) set_queue_limit(p, now);
          }
        }
      }
    }
    if (settings_.reliable) {
      sender_.add(frame.header, frame.payload, frame.token, latency);  // queued on the next pass
      continue;
    }
    if (path == kNoPath) {  // unreliable and no path: lost, as on a broken TCP connection
      if (handler_.on_released) handler_.on_released(frame.token, kNoPath);
      continue;
    }
    frame.header.channel_seq = 0;
    paths_[path].io->queue(frame.header, frame.payload, frame.token);
    paths_[path].queued_since_tick = true;
    ++counters_.frames_sent;
    handed = true;
  }
}

void ReliableChannel::queue_control(uint32_t path, wire::FrameType type) {
  wire::DataFrameHeader h;
  h.type = type;
  h.comm_id = settings_.incarnation;
  // A selective run goes on acknowledgements only (flush_ack's path): a heartbeat may leave
  // on a standby or a new path, and the run is not sent again.
  ChannelReceiver::Range selective;
  h.channel_seq = receiver_.take_ack(type == wire::FrameType::kAck ? &selective : nullptr);
  h.op_seq = selective.first;  // take_acknowledgement
  h.offset = selective.last;
  paths_[path].io->queue_urgent(h, kControlToken);
  paths_[path].queued_since_tick = true;
}

void ReliableChannel::flush_ack() {
  // Twice at most: a second selective run may be due (ChannelReceiver::take_ack).
  for (int i = 0; i < 2 && receiver_.ack_due(); ++i) {
    const uint32_t path = pick_control_path();
    if (path == kNoPath) return;
    queue_control(path, wire::FrameType::kAck);
    ++counters_.acks_sent;
  }
}

// An acknowledgement's or heartbeat's header: channel_seq the cumulative point; op_seq and
// offset, when op_seq is not 0, a run of frames the peer has beyond it (queue_control).
std::string ReliableChannel::take_acknowledgement(const wire::DataFrameHeader& header) {
  released_.clear();
  const uint64_t acknowledged = sender_.acknowledged();
  std::string error;
  if (header.channel_seq > acknowledged)
    error = sender_.acknowledge(header.channel_seq, &released_);
  if (error.empty() && header.op_seq != 0 && header.offset > sender_.acknowledged()) {
    error = sender_.acknowledge_selectively(header.op_seq, header.offset, &released_);
  }
  // What was released before an error is still released: the sender has forgotten it.
  if (handler_.on_released) {
    for (const auto& frame : released_) handler_.on_released(frame.token, frame.path);
  }
  if (!error.empty()) return error;
  // The window may have opened (even when every frame it passed was released before).
  if (!released_.empty() || sender_.acknowledged() != acknowledged) pump();
  return {};
}

bool ReliableChannel::fenced(const wire::DataFrameHeader& header) {
  return header.type == wire::FrameType::kAbort || header.type == wire::FrameType::kDeparted ||
         (header.type == wire::FrameType::kData && header.length == 0);
}

std::string ReliableChannel::deliver(const wire::DataFrameHeader& header,
                                     std::span<const std::byte> payload) {
  std::string error = handler_.on_frame(header, payload);
  if (!error.empty()) return error;
  if (header.channel_seq == 0) return {};
  receiver_.record(header.channel_seq);
  abandon_other_copies(header.channel_seq, kNoPath);
  return deliver_fenced();
}

void ReliableChannel::abandon_other_copies(uint64_t seq, uint32_t except_path) {
  for (uint32_t i = 0; i < paths_.size(); ++i) {
    if (i != except_path && paths_[i].state != PathState::kFailed) {
      paths_[i].io->abandon_placement_of(seq);
    }
  }
}

// Fenced frames whose predecessors have all arrived now.
std::string ReliableChannel::deliver_fenced() {
  while (!fenced_.empty() && fenced_.begin()->first == receiver_.cumulative() + 1) {
    HeldFrame held = std::move(fenced_.begin()->second);
    fenced_.erase(fenced_.begin());
    std::string error = handler_.on_frame(held.header, held.payload);
    if (!error.empty()) return error;
    receiver_.record(held.header.channel_seq);
  }
  return {};
}

std::string ReliableChannel::receive(uint32_t path, const wire::DataFrameHeader& header,
                                     std::span<const std::byte> payload, TimePoint now) {
  paths_.at(path).last_received = now;
  if (header.type == wire::FrameType::kAck || header.type == wire::FrameType::kHeartbeat) {
    return take_acknowledgement(header);
  }
  const uint64_t seq = header.channel_seq;
  if (seq == 0) return handler_.on_frame(header, payload);  // a peer without reliability
  switch (receiver_.classify(seq)) {
    case ChannelReceiver::Verdict::kOutOfWindow:
      return "frame " + std::to_string(seq) + " is outside the channel window (every frame up to " +
             std::to_string(receiver_.cumulative()) + " has arrived)";
    case ChannelReceiver::Verdict::kDuplicate:
      ++counters_.duplicates_dropped;
      return {};
    case ChannelReceiver::Verdict::kNew:
      break;
  }
  if (fenced(header) && seq != receiver_.cumulative() + 1) {
    if (!fenced_.count(seq)) {
      HeldFrame& held = fenced_[seq];
      held.header = header;
      held.payload.assign(payload.begin(), payload.end());
    } else {
      ++counters_.duplicates_dropped;
    }
    return {};
  }
  std::string error = deliver(header, payload);
  // A latency path's frame is acknowledged on its own: its sender's op must not wait for
  // bulk frames numbered before it, which travel on other connections.
  if (error.empty() && paths_[path].latency) receiver_.acknowledge_selectively(seq);
  return error;
}

Placement ReliableChannel::place(uint32_t path, const wire::DataFrameHeader& header,
                                 TimePoint now) {
  paths_.at(path).last_received = now;
  if (!handler_.place) return {};
  const uint64_t seq = header.channel_seq;
  // A duplicate or a bad frame goes through receive(), which drops or refuses it.
  if (seq != 0 && (receiver_.classify(seq) != ChannelReceiver::Verdict::kNew || fenced(header))) {
    return {};
  }
  return handler_.place(header);
}

std::string ReliableChannel::placed(uint32_t path, const wire::DataFrameHeader& header,
                                    TimePoint now) {
  paths_.at(path).last_received = now;
  const uint64_t seq = header.channel_seq;
  if (seq != 0 && receiver_.classify(seq) != ChannelReceiver::Verdict::kNew) {
    ++counters_.duplicates_dropped;  // its other copy finished first
    return {};
  }
  std::string error = handler_.on_placed(header);
  if (!error.empty() || seq == 0) return error;
  receiver_.record(seq);
  if (paths_[path].latency) receiver_.acknowledge_selectively(seq);
  abandon_other_copies(seq, path);
  return deliver_fenced();
}

void ReliableChannel::on_path_sent(uint32_t path, uint64_t token, uint64_t bytes) {
  paths_.at(path).sent_bytes += bytes;
  if (!settings_.reliable && token != kControlToken && handler_.on_released) {
    handler_.on_released(token, path);
  }
}

bool ReliableChannel::transport_hears_peer(const Path& p) const {
  const int64_t quiet_ms = p.io->network_silence_ms();
  return quiet_ms >= 0 && std::chrono::milliseconds(quiet_ms) <= settings_.path_timeout;
}

std::vector<ReliableChannel::SilentPath> ReliableChannel::tick(TimePoint now) {
  // Time this side did not look (its own thread was held up) is nobody's silence.
  const auto since_tick = now - last_tick_;
  const bool had_tick = last_tick_ != TimePoint{};
  last_tick_ = now;
  std::vector<SilentPath> silent;
  for (uint32_t i = 0; i < paths_.size(); ++i) {
    Path& p = paths_[i];
    if (p.state == PathState::kFailed) continue;
    if (had_tick && since_tick > settings_.heartbeat_interval) {
      p.last_received =
          std::min(now, p.last_received + (since_tick - settings_.heartbeat_interval));
    }
    const auto quiet = now - p.last_received;
    // Asked of the kernel only for a path that is quiet: this runs every tick.
    if (quiet > settings_.path_timeout) {
      // The last live path is given the grace period: failing it loses the peer, and there
      // is nowhere to fail over to.
      const auto allowed = live_paths() > 1
                               ? settings_.path_timeout
                               : std::max(settings_.path_timeout, settings_.last_path_grace);
      if (transport_hears_peer(p)) {
        ++counters_.slow_peer_ticks;
      } else if (quiet <= allowed) {
        ++counters_.last_path_silent_ticks;
      } else {
        using std::chrono::duration_cast;
        using std::chrono::milliseconds;
        std::string reason =
            "nothing received for " + std::to_string(duration_cast<milliseconds>(quiet).count()) +
            " ms (timeout " + std::to_string(duration_cast<milliseconds>(allowed).count()) + " ms)";
        path_failed(i, reason);
        silent.push_back({i, std::move(reason)});
        continue;
      }
    }
    if (p.state == PathState::kProbation && now - p.live_since >= settings_.stable_after) {
      ++counters_.failbacks;
      set_state(i, settled(p), "");
      pump();
    }
    // Rate: bytes the network took over a span in which the path always had a backlog, or
    // frames waited for it to make room (so the network, not the sender, set the pace).
    if (!busy(p)) p.busy_since_sample = false;
    if (now - p.sample_start >= kRateSample) {
      const double seconds = std::chrono::duration<double>(now - p.sample_start).count();
      if (p.busy_since_sample && p.sent_bytes > 0) {
        const double sample = static_cast<double>(p.sent_bytes) / seconds;
        p.rate = p.rate > 0 ? 0.7 * p.rate + 0.3 * sample : sample;
        p.rate_measured_at = now;
        // A sliding peak, near enough: a new high, or the old one's window over.
        if (p.rate >= p.peak_rate || now - p.peak_at >= kPeakWindow) {
          p.peak_rate = p.rate;
          p.peak_at = now;
        }
      } else if (p.rate > 0 && now - p.rate_measured_at >= kRateForgetAfter) {
        p.rate = 0;
      }
      set_queue_limit(p, now);
      p.sent_bytes = 0;
      p.sample_start = now;
      p.busy_since_sample = busy(p);
    }
    if (p.queued_since_tick || p.io->backlog_bytes() > 0) {
      p.last_sent = now;
      p.queued_since_tick = false;
    }
    if (now - p.last_sent >= settings_.heartbeat_interval) {
      queue_control(i, wire::FrameType::kHeartbeat);
      p.last_sent = now;
      p.queued_since_tick = false;
      ++counters_.heartbeats_sent;
    }
  }
  flush_ack();
  return silent;
}

}  // namespace plexus::transports
