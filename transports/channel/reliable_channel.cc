// The channel's events handed to its parts, and interleaved where one concerns several.
#include "transports/channel/reliable_channel.h"

#include <algorithm>

#include "transports/wire/frame_views.h"

namespace plexus::transports {
namespace {

// Path tokens: a frame's channel_seq (reliable), the caller's token (not reliable), or this
// for acknowledgements and heartbeats.
constexpr uint64_t kControlToken = UINT64_MAX;

}  // namespace

ReliableChannel::ReliableChannel(Settings settings, Handler handler, const FlowPolicies* policies)
    : incarnation_(settings.incarnation),
      paths_({.liveness = {.heartbeat_interval = settings.heartbeat_interval,
                           .path_timeout = settings.path_timeout,
                           .stable_after = settings.stable_after,
                           .last_path_grace = settings.last_path_grace,
                           .idle_heartbeat_interval = settings.idle_heartbeat_interval,
                           .idle_after = settings.idle_after},
              .pace = {.queue_bytes = settings.path_queue_bytes,
                       .queue_time = settings.path_queue_time,
                       .min_queue_bytes = settings.min_path_queue_bytes}},
             {.on_state = std::move(handler.on_path_state)}),
      dispatcher_({.reliable = settings.reliable,
                   .hold_queue_after_mixing = settings.hold_queue_after_mixing,
                   .scheduling = settings.scheduling},
                  {.on_released = std::move(handler.on_released),
                   .on_resent = std::move(handler.on_resent),
                   .on_scheduled = std::move(handler.on_scheduled)},
                  policies, paths_, counters_),
      delivery_({.on_frame = std::move(handler.on_frame),
                 .place = std::move(handler.place),
                 .on_placed = std::move(handler.on_placed),
                 .abandon_other_copies =
                     [this](uint64_t seq, uint32_t except_path) {
                       paths_.abandon_other_copies(seq, except_path);
                     }},
                counters_) {}

uint32_t ReliableChannel::add_path(FramePath* io, TimePoint now, bool probation, bool backup,
                                   bool latency) {
  const uint32_t id = paths_.add(io, now, probation, backup, latency);
  dispatcher_.paths_closed(false);
  next_tick_ = {};
  // First on the path, ahead of any data: names this channel (Settings::incarnation).
  queue_control(id, wire::FrameType::kHeartbeat);
  pump();
  return id;
}

void ReliableChannel::path_failed(uint32_t path, const std::string& reason) {
  if (paths_.state(path) == PathState::kFailed) return;
  ++counters_.path_failures;
  next_tick_ = {};
  paths_.fail(path, reason);
  dispatcher_.path_failed(path);
  pump();
}

void ReliableChannel::path_closed(uint32_t path) {
  if (paths_.state(path) != PathState::kFailed) {
    next_tick_ = {};
    paths_.fail(path, "closed while idle");
    dispatcher_.path_failed(path);
  }
  if (paths_.live() == 0) dispatcher_.paths_closed(true);
}

void ReliableChannel::drain(uint32_t path, bool drained) {
  if (paths_.drain(path, drained)) pump();
}

void ReliableChannel::send(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
                           uint64_t token, uint32_t flow) {
  next_tick_ = {};
  dispatcher_.send(header, payload, token, flow);
}

bool ReliableChannel::pump() { return dispatcher_.pump(); }

void ReliableChannel::queue_control(uint32_t path, wire::FrameType type) {
  // A selective run goes on acknowledgements only (flush_ack's path): a heartbeat may leave
  // on a standby or a new path, and the run is not sent again.
  ChannelReceiver::Range selective;
  const uint64_t acknowledged =
      delivery_.take_ack(type == wire::FrameType::kAck ? &selective : nullptr);
  const auto promise_ms = type == wire::FrameType::kHeartbeat
                              ? static_cast<uint32_t>(paths_.liveness(path).promise().count())
                              : 0u;
  paths_.queue_urgent(path,
                      wire::make_channel_control(type, {.incarnation = incarnation_,
                                                        .acknowledged = acknowledged,
                                                        .run_first = selective.first,
                                                        .run_last = selective.last,
                                                        .promise_ms = promise_ms}),
                      kControlToken);
}

void ReliableChannel::flush_ack() {
  // Twice at most: a second selective run may be due (ChannelReceiver::take_ack).
  for (int i = 0; i < 2 && delivery_.ack_due(); ++i) {
    const uint32_t path = paths_.pick_control();
    if (path == kNoPath) return;
    queue_control(path, wire::FrameType::kAck);
    ++counters_.acks_sent;
  }
}

std::string ReliableChannel::receive(uint32_t path, const wire::DataFrameHeader& header,
                                     std::span<const std::byte> payload, TimePoint now) {
  PathLiveness& liveness = paths_.liveness(path);
  const bool heartbeat = header.type == wire::FrameType::kHeartbeat;
  liveness.heard(now, !heartbeat);
  if (heartbeat) {
    liveness.peer_promised(
        std::chrono::milliseconds(wire::read_channel_control(header).promise_ms));
  } else {
    next_tick_ = {};  // traffic: ticks as often as the owner ticks
  }
  if (wire::is_channel_control(header)) {
    return dispatcher_.acknowledge(wire::read_channel_control(header));
  }
  return delivery_.receive(header, payload, paths_.latency(path));
}

Placement ReliableChannel::place(uint32_t path, const wire::DataFrameHeader& header,
                                 TimePoint now) {
  paths_.liveness(path).heard(now);
  next_tick_ = {};
  return delivery_.place(header);
}

std::string ReliableChannel::placed(uint32_t path, const wire::DataFrameHeader& header,
                                    TimePoint now) {
  paths_.liveness(path).heard(now);
  return delivery_.placed(header, path, paths_.latency(path));
}

std::string ReliableChannel::discarded(uint32_t path, const wire::DataFrameHeader& header,
                                       TimePoint now) {
  paths_.liveness(path).heard(now);
  return delivery_.discarded(header, path, paths_.latency(path));
}

void ReliableChannel::on_path_sent(uint32_t path, uint64_t token, uint64_t bytes) {
  paths_.pace(path).sent(bytes);
  if (token != kControlToken) dispatcher_.written(token, path);
}

std::vector<ReliableChannel::SilentPath> ReliableChannel::tick(TimePoint now) {
  paths_.begin_tick(now, next_tick_);
  std::vector<SilentPath> silent;
  for (uint32_t i = 0; i < paths_.size(); ++i) {
    if (paths_.state(i) == PathState::kFailed) continue;
    PathLiveness::Verdict verdict =
        paths_.liveness(i).silence(now, paths_.io(i), paths_.live() == 1);
    switch (verdict.silence) {
      case PathLiveness::Silence::kNone:
        break;
      case PathLiveness::Silence::kSlowPeer:
        ++counters_.slow_peer_ticks;
        break;
      case PathLiveness::Silence::kWithinGrace:
        ++counters_.last_path_silent_ticks;
        break;
      case PathLiveness::Silence::kFailed:
        path_failed(i, verdict.reason);
        silent.push_back({i, std::move(verdict.reason)});
        continue;
    }
    if (paths_.state(i) == PathState::kProbation && paths_.liveness(i).proven(now)) {
      ++counters_.failbacks;
      paths_.settle(i, "");
      pump();
    }
    PathLiveness& liveness = paths_.liveness(i);
    // An idle path has no pace to measure: its transport is not asked (system calls).
    if (!liveness.idle()) {
      paths_.pace(i).tick(now, paths_.io(i), dispatcher_.scheduled(), dispatcher_.mixing(now));
    }
    const uint64_t backlog = liveness.wants_backlog() ? paths_.io(i).backlog_bytes() : 0;
    if (liveness.heartbeat_due(now, backlog)) {
      queue_control(i, wire::FrameType::kHeartbeat);
      liveness.heartbeat_sent(now);
      ++counters_.heartbeats_sent;
    }
  }
  flush_ack();
  next_tick_ = compute_next_tick(now);
  return silent;
}

ReliableChannel::TimePoint ReliableChannel::compute_next_tick(TimePoint now) const {
  if (paths_.live() == 0 || dispatcher_.unacknowledged() > 0 || dispatcher_.waiting() > 0 ||
      delivery_.ack_due()) {
    return now;
  }
  TimePoint next = TimePoint::max();
  for (uint32_t i = 0; i < paths_.size(); ++i) {
    if (paths_.state(i) == PathState::kFailed) continue;
    const PathLiveness& liveness = paths_.liveness(i);
    if (paths_.state(i) == PathState::kProbation || !liveness.idle()) return now;
    next = std::min({next, liveness.heartbeat_at(), liveness.silence_due()});
  }
  return next;
}

}  // namespace plexus::transports
