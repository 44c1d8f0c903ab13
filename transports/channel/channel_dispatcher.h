// The sending side of a reliable channel (ReliableChannel; docs/architecture.md, sections
// 3 and 4): new frames wait in the send scheduler and are numbered (ChannelSender) only as
// they leave it, each for the path expected to finish it first (ChannelPaths::pick), so
// that what goes next is chosen at the last moment; the frames of a failed path go again on
// the others; the peer's acknowledgements (cumulative and selective) release them. It also
// notes when frames of several flows leave in turn (mixing), which holds the paths'
// transports to their queue in flight too.
// Owns the scheduler, the sender and that note; queues on the channel's paths (not owned).
// Called on the channel's thread (its owner's), through ReliableChannel. The clock is read
// as frames enter and leave the scheduler (how long each waited, when flows last mixed).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "transports/channel/channel_counters.h"
#include "transports/channel/channel_paths.h"
#include "transports/channel/channel_sender.h"
#include "transports/channel/flow_policy.h"
#include "transports/channel/send_scheduler.h"
#include "transports/wire/frame_views.h"

namespace plexus::transports {

class ChannelDispatcher {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  struct Settings {  // as ReliableChannel::Settings's of the same names
    bool reliable = true;
    std::chrono::milliseconds hold_queue_after_mixing{200};
    SendScheduler::Settings scheduling{};
  };
  struct Hooks {  // as ReliableChannel::Handler's of the same names
    std::function<void(uint64_t token, uint32_t path)> on_released;
    std::function<void(uint32_t path, uint64_t bytes)> on_resent;
    std::function<void(uint32_t flow, uint64_t bytes, std::chrono::nanoseconds waited)>
        on_scheduled;
  };

  // `policies` (null: every flow alike), `paths` and `counters` outlive this; frames sent and
  // resent are added to `counters`.
  ChannelDispatcher(const Settings& settings, Hooks hooks, const FlowPolicies* policies,
                    ChannelPaths& paths, ChannelCounters& counters);
  ChannelDispatcher(const ChannelDispatcher&) = delete;
  ChannelDispatcher& operator=(const ChannelDispatcher&) = delete;

  // As ReliableChannel's send() and pump().
  void send(const wire::DataFrameHeader& header, std::span<const std::byte> payload, uint64_t token,
            uint32_t flow);
  bool pump();
  // An acknowledgement or heartbeat from the peer: releases what it covers. Returns "" or
  // why it is impossible.
  std::string acknowledge(const wire::ChannelControl& ack);
  // The path failed: its unacknowledged frames wait for another (the caller pumps).
  void path_failed(uint32_t path) { sender_.path_failed(path); }
  // Without reliability, frames with no live path are lost, but for a channel that never had
  // one or (`closed`) whose paths were closed by agreement: they wait for the next path.
  void paths_closed(bool closed) { paths_closed_ = closed; }
  // Held: pump() moves nothing to a path (acknowledgements and heartbeats still go).
  void hold(bool held) { held_ = held; }
  bool held() const { return held_; }
  // Path `path` handed the frame queued with `token` to the network: without reliability,
  // it is done with.
  void written(uint64_t token, uint32_t path);

  size_t unacknowledged() const { return sender_.unacknowledged(); }
  // Frames not yet on a path: numbered ones waiting for one, and the scheduler's.
  size_t waiting() const { return sender_.waiting() + scheduler_.size(); }
  // Whether frames wait in the scheduler (a path without room then holds them up).
  bool scheduled() const { return scheduler_.size() > 0; }
  // Frames of more than one flow left the scheduler within hold_queue_after_mixing.
  bool mixing(TimePoint now) const {
    return mixed_at_ != TimePoint{} && now - mixed_at_ < settings_.hold_queue_after_mixing;
  }

 private:
  bool is_latency(uint32_t flow) const {
    return policies_->of(flow).traffic_class == TrafficClass::kLatency;
  }
  // A frame of `flow` left the scheduler: when flows start to mix, the paths' transports are
  // held short from now.
  void note_flow(uint32_t flow);

  Settings settings_;
  Hooks hooks_;
  FlowPolicies own_policies_;     // when none are given
  const FlowPolicies* policies_;  // the caller's or own_policies_
  ChannelPaths& paths_;
  ChannelCounters& counters_;
  SendScheduler scheduler_;
  ChannelSender sender_;
  static constexpr uint32_t kNoFlowYet = UINT32_MAX;
  uint32_t last_flow_ = kNoFlowYet;  // of the last frame to leave the scheduler
  TimePoint mixed_at_{};             // when one of another flow than the one before it last left
  bool paths_closed_ = false;        // paths_closed()
  bool held_ = false;                // hold()
  std::vector<ChannelSender::Released> released_;  // scratch for acknowledge()
};

}  // namespace plexus::transports
