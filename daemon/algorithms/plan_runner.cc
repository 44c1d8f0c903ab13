// The plan runner's bookkeeping: message lookup, early and held pieces, pending sends, round ends.
#include "daemon/algorithms/plan_runner.h"

#include <algorithm>
#include <cstring>

namespace plexus::daemon::algo {
namespace {

bool is_receive(const Step& step) {
  return step.kind == StepKind::kRecv || step.kind == StepKind::kRecvReduce;
}

bool within(uint64_t offset, uint64_t bytes, uint64_t size) {
  return offset <= size && bytes <= size - offset;
}

}  // namespace

std::string check_plan_fits(const Plan& plan, const PlanBuffers& b) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    const bool reads_send = s.buffer == BufferId::kSend;
    const uint64_t size = reads_send ? b.send_bytes : b.work_bytes;
    if (reads_send && b.send == nullptr) return "step " + std::to_string(i) + " reads no buffer";
    if (!within(s.offset, s.bytes, size)) {
      return "step " + std::to_string(i) + " reaches past its buffer (" + std::to_string(size) +
             " bytes)";
    }
    if (s.kind == StepKind::kCopy && !within(s.dst_offset, s.bytes, b.work_bytes)) {
      return "copy step " + std::to_string(i) + " reaches past the work buffer";
    }
  }
  return {};
}

PlanRunner::PlanRunner(const Plan& plan, PlanBuffers buffers, ReduceFn reduce,
                       PlanTransport& transport)
    : plan_(plan), buffers_(buffers), reduce_(std::move(reduce)), transport_(transport) {
  const size_t n = plan_.steps.size();
  step_round_.assign(n, 0);  // (resize: GCC 12's Release build warns -Wnull-dereference)
  received_.assign(n, 0);
  sent_.assign(n, false);
  held_.resize(n);
  for (size_t r = 0; r < plan_.rounds(); ++r) {
    for (uint32_t i = plan_.round_begin(r); i < plan_.round_ends[r]; ++i) {
      step_round_[i] = static_cast<uint32_t>(r);
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    const Step& s = plan_.steps[i];
    if (s.kind == StepKind::kCopy) continue;
    auto& table = s.kind == StepKind::kSend ? send_steps_ : recv_steps_;
    const auto peer = static_cast<size_t>(s.peer);
    if (table.size() <= peer) table.resize(peer + 1);
    if (table[peer].size() <= s.message) table[peer].resize(s.message + 1);
    table[peer][s.message] = i;
  }
}

void PlanRunner::start() {
  started_ = true;
  advance();
}

bool PlanRunner::read_by_pending_send(uint64_t offset, uint64_t bytes) const {
  for (uint32_t i : pending_sends_) {
    const Step& send = plan_.steps[i];
    if (send.buffer != BufferId::kWork) continue;
    if (offset < send.offset + send.bytes && send.offset < offset + bytes) return true;
  }
  return false;
}

bool PlanRunner::can_begin_round() const {
  for (uint32_t i = plan_.round_begin(round_); i < plan_.round_ends[round_]; ++i) {
    const Step& s = plan_.steps[i];
    if (s.kind == StepKind::kCopy && read_by_pending_send(s.dst_offset, s.bytes)) return false;
  }
  return true;
}

bool PlanRunner::receive_ready(uint32_t step) const {
  const Step& s = plan_.steps[step];
  return started_ && begun_ && step_round_[step] == round_ &&
         !read_by_pending_send(s.offset, s.bytes);
}

void PlanRunner::begin_round() {
  for (uint32_t i = plan_.round_begin(round_); i < plan_.round_ends[round_]; ++i) {
    const Step& s = plan_.steps[i];
    switch (s.kind) {
      case StepKind::kCopy:
        std::memmove(buffers_.work + s.dst_offset, buffers_.send + s.offset, s.bytes);
        break;
      case StepKind::kSend: {
        const std::byte* base = s.buffer == BufferId::kSend ? buffers_.send : buffers_.work;
        pending_sends_.push_back(i);
        transport_.post_send(s.peer, s.message, {base + s.offset, s.bytes});
        break;
      }
      case StepKind::kRecv:
      case StepKind::kRecvReduce:
        break;
    }
  }
}

bool PlanRunner::round_complete() const {
  for (uint32_t i = plan_.round_begin(round_); i < plan_.round_ends[round_]; ++i) {
    const Step& s = plan_.steps[i];
    if (!is_receive(s)) continue;
    if (received_[i] < s.bytes) return false;
    if (!held_[i].empty() && !receive_ready(i)) return false;
  }
  return true;
}

// Moves the plan on as far as it can: begins the current round once its copies may write,
// applies the pieces whose bytes no pending send reads, and ends rounds whose receives are
// all in. A transport may report a send done inside post_send: the guard keeps begin_round
// from being re-entered.
void PlanRunner::advance() {
  if (advancing_ || !started_) return;
  advancing_ = true;
  while (round_ < plan_.rounds()) {
    if (!begun_) {
      if (!can_begin_round()) break;
      begun_ = true;
      begin_round();
    }
    for (uint32_t i = plan_.round_begin(round_); i < plan_.round_ends[round_]; ++i) {
      if (held_[i].empty() || !receive_ready(i)) continue;
      for (HeldPiece& piece : held_[i]) apply(plan_.steps[i], piece.offset, piece.data);
      held_[i].clear();
    }
    if (!round_complete()) break;
    ++round_;
    begun_ = false;
  }
  advancing_ = false;
}

void PlanRunner::apply(const Step& step, uint64_t offset, std::span<const std::byte> data) {
  std::byte* target = buffers_.work + step.offset + offset;
  if (step.kind == StepKind::kRecvReduce) {
    reduce_(target, data.data(), data.size());
  } else {
    std::memcpy(target, data.data(), data.size());
  }
}

void PlanRunner::send_done(int peer, uint32_t message) {
  const auto p = static_cast<size_t>(peer);
  if (peer < 0 || p >= send_steps_.size() || message >= send_steps_[p].size()) return;
  const uint32_t step = send_steps_[p][message];
  if (sent_[step]) return;
  sent_[step] = true;
  for (size_t i = 0; i < pending_sends_.size(); ++i) {
    if (pending_sends_[i] == step) {
      pending_sends_[i] = pending_sends_.back();
      pending_sends_.pop_back();
      break;
    }
  }
  advance();
}

std::string PlanRunner::deliver(int peer, uint32_t message, uint64_t offset,
                                std::span<const std::byte> data) {
  const auto p = static_cast<size_t>(peer);
  if (peer < 0 || p >= recv_steps_.size() || message >= recv_steps_[p].size()) {
    return "unexpected message " + std::to_string(message) + " from participant " +
           std::to_string(peer) + " (the plan holds no such receive)";
  }
  const uint32_t index = recv_steps_[p][message];
  const Step& s = plan_.steps[index];
  const uint64_t bytes = data.size();
  if (!within(offset, bytes, s.bytes)) {
    return "piece [" + std::to_string(offset) + ", +" + std::to_string(bytes) + ") of message " +
           std::to_string(message) + " from participant " + std::to_string(peer) +
           " lies outside its " + std::to_string(s.bytes) + " bytes";
  }
  if (bytes > s.bytes - received_[index]) {
    return "message " + std::to_string(message) + " from participant " + std::to_string(peer) +
           " carries more than its " + std::to_string(s.bytes) + " bytes";
  }
  if (s.kind == StepKind::kRecvReduce &&
      (offset % buffers_.elem_bytes != 0 || bytes % buffers_.elem_bytes != 0)) {
    return "piece of message " + std::to_string(message) + " from participant " +
           std::to_string(peer) + " splits an element";
  }
  received_[index] += bytes;
  if (receive_ready(index) && held_[index].empty()) {
    apply(s, offset, data);
  } else {
    held_[index].push_back(HeldPiece{offset, {data.begin(), data.end()}});
  }
  advance();
  return {};
}

std::byte* PlanRunner::placement(int peer, uint32_t message, uint64_t offset, uint64_t bytes) {
  const auto p = static_cast<size_t>(peer);
  if (peer < 0 || p >= recv_steps_.size() || message >= recv_steps_[p].size()) return nullptr;
  const uint32_t index = recv_steps_[p][message];
  const Step& s = plan_.steps[index];
  // Pieces of a plain receive the current round applies at once, in any order (a channel
  // stripes a message over several paths): nothing else reads that range now. A piece that
  // does not fit takes deliver's checks. Two copies of one piece (a resend) may be placed
  // at once: the channel abandons the other when the first ends, and only that one counts.
  if (s.kind != StepKind::kRecv || !receive_ready(index) || !held_[index].empty() || bytes == 0 ||
      !within(offset, bytes, s.bytes) || bytes > s.bytes - received_[index]) {
    return nullptr;
  }
  return buffers_.work + s.offset + offset;
}

void PlanRunner::deliver_placed(int peer, uint32_t message, uint64_t offset, uint64_t bytes) {
  const uint32_t index = recv_steps_[static_cast<size_t>(peer)][message];
  const Step& s = plan_.steps[index];
  if (!within(offset, bytes, s.bytes) || bytes > s.bytes - received_[index]) return;
  received_[index] += bytes;
  advance();
}

std::vector<int> PlanRunner::waiting_for() const {
  std::vector<int> peers;
  auto add = [&peers](int peer) {
    if (std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
  };
  if (round_ < plan_.rounds()) {
    for (uint32_t i = plan_.round_begin(round_); i < plan_.round_ends[round_]; ++i) {
      const Step& s = plan_.steps[i];
      if (is_receive(s) && received_[i] < s.bytes) add(s.peer);
    }
  }
  // Past the last round (or in a round whose receives are in), what is left are sends the
  // peers have not acknowledged: a node that went away mid-op is found here too.
  if (peers.empty()) {
    for (uint32_t i : pending_sends_) add(plan_.steps[i].peer);
  }
  return peers;
}

bool PlanRunner::expects_from(int peer) const {
  if (done()) return false;
  for (uint32_t i = plan_.round_begin(round_); i < plan_.steps.size(); ++i) {
    const Step& s = plan_.steps[i];
    if (!is_receive(s) || s.peer != peer) continue;
    if (received_[i] < s.bytes) return true;  // counts held pieces too
  }
  return false;
}

}  // namespace plexus::daemon::algo
