// Which frame goes next, on which path, and what the peer's acknowledgements release.
#include "transports/channel/channel_dispatcher.h"

namespace plexus::transports {

ChannelDispatcher::ChannelDispatcher(const Settings& settings, Hooks hooks,
                                     const FlowPolicies* policies, ChannelPaths& paths,
                                     ChannelCounters& counters)
    : settings_(settings),
      hooks_(std::move(hooks)),
      policies_(policies != nullptr ? policies : &own_policies_),
      paths_(paths),
      counters_(counters),
      scheduler_(settings.scheduling, policies_) {}

void ChannelDispatcher::send(const wire::DataFrameHeader& header,
                             std::span<const std::byte> payload, uint64_t token, uint32_t flow) {
  SendScheduler::Frame frame;
  frame.header = header;
  frame.payload = payload;
  frame.token = token;
  frame.flow = flow;
  if (hooks_.on_scheduled) frame.queued_at = Clock::now();
  scheduler_.push(frame);
  pump();
}

bool ChannelDispatcher::pump() {
  if (held_) return false;
  bool handed = false;
  for (;;) {
    if (settings_.reliable) {
      // Numbered frames first: they go again after a path failed, or were numbered while
      // no path had room. While the classes travel apart, the other class's oldest goes
      // when this one's paths have no room.
      ChannelSender::Frame* frame = sender_.next_waiting();
      uint32_t path =
          frame != nullptr ? paths_.pick(frame->payload.size(), frame->latency) : kNoPath;
      if (frame != nullptr && path == kNoPath && paths_.classes_apart()) {
        frame = sender_.next_waiting(!frame->latency);
        if (frame != nullptr) path = paths_.pick(frame->payload.size(), frame->latency);
      }
      if (path != kNoPath) {
        if (paths_.state(path) == PathState::kProbation) {
          paths_.settle(path, "taken early: no other path");
        }
        paths_.queue(path, frame->header, frame->payload, frame->header.channel_seq);
        sender_.assigned(*frame, path);
        handed = true;
        if (frame->sends > 1) {
          ++counters_.frames_resent;
          counters_.bytes_resent += frame->payload.size();
          if (hooks_.on_resent) hooks_.on_resent(path, frame->payload.size());
        } else {
          ++counters_.frames_sent;
        }
        continue;
      }
      // Frames wait (no room on their paths, or the window is full): a new frame may still
      // go where the classes travel apart, on the other class's paths.
      if (sender_.waiting() > 0 && (sender_.window_full() || !paths_.classes_apart())) {
        return handed;
      }
    }
    SendScheduler::ClassMask classes = SendScheduler::kAllClasses;
    const SendScheduler::Frame* next = scheduler_.peek(classes);
    if (next == nullptr) return handed;
    bool latency = is_latency(next->flow);
    uint32_t path = paths_.pick(next->payload.size(), latency);
    if (path == kNoPath && paths_.classes_apart()) {
      // Its class's paths have no room: the other class's frames go on theirs meanwhile
      // (by the scheduler's order among them), rather than wait behind it.
      constexpr auto kLatencyOnly = SendScheduler::mask_of(TrafficClass::kLatency);
      classes = latency ? SendScheduler::kAllClasses & ~kLatencyOnly : kLatencyOnly;
      next = scheduler_.peek(classes);
      if (next == nullptr) return handed;
      latency = !latency;
      path = paths_.pick(next->payload.size(), latency);
    }
    // Frames wait for a path while one may come: reliable, a live path busy, or none yet (a
    // channel opened before its first path, PeerLinks::want, or one whose paths closed by
    // agreement while idle).
    if (path == kNoPath &&
        (settings_.reliable || paths_.live() > 0 || paths_.size() == 0 || paths_closed_)) {
      return handed;
    }
    SendScheduler::Frame frame = scheduler_.pop(classes);
    if (hooks_.on_scheduled) {
      hooks_.on_scheduled(frame.flow, frame.payload.size(), Clock::now() - frame.queued_at);
    }
    note_flow(frame.flow);
    if (settings_.reliable) {
      sender_.add(frame.header, frame.payload, frame.token, latency);  // queued on the next pass
      continue;
    }
    if (path == kNoPath) {  // unreliable and no path: lost, as on a broken TCP connection
      if (hooks_.on_released) hooks_.on_released(frame.token, kNoPath);
      continue;
    }
    frame.header.channel_seq = 0;
    paths_.queue(path, frame.header, frame.payload, frame.token);
    ++counters_.frames_sent;
    handed = true;
  }
}

void ChannelDispatcher::note_flow(uint32_t flow) {
  if (flow == last_flow_) return;
  const bool first = last_flow_ == kNoFlowYet;  // the first flow alone is not mixing
  last_flow_ = flow;
  if (first) return;
  const auto now = Clock::now();
  const bool was_mixing = mixing(now);
  mixed_at_ = now;
  if (!was_mixing) paths_.limit_queues(mixing(now));  // hold the queues short from now
}

// An acknowledgement or heartbeat: the cumulative point, and on an acknowledgement a run of
// frames the peer has beyond it (run_first not 0; ReliableChannel::queue_control).
std::string ChannelDispatcher::acknowledge(const wire::ChannelControl& ack) {
  released_.clear();
  const uint64_t acknowledged = sender_.acknowledged();
  std::string error;
  if (ack.acknowledged > acknowledged) error = sender_.acknowledge(ack.acknowledged, &released_);
  if (error.empty() && ack.run_first != 0 && ack.run_last > sender_.acknowledged()) {
    error = sender_.acknowledge_selectively(ack.run_first, ack.run_last, &released_);
  }
  // What was released before an error is still released: the sender has forgotten it.
  if (hooks_.on_released) {
    for (const auto& frame : released_) hooks_.on_released(frame.token, frame.path);
  }
  if (!error.empty()) return error;
  // The window may have opened (even when every frame it passed was released before).
  if (!released_.empty() || sender_.acknowledged() != acknowledged) pump();
  return {};
}

void ChannelDispatcher::written(uint64_t token, uint32_t path) {
  if (!settings_.reliable && hooks_.on_released) hooks_.on_released(token, path);
}

}  // namespace plexus::transports
