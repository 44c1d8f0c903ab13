#include "monitor/window_ring.h"

#include <algorithm>
#include <stdexcept>

namespace plexus::monitor {

TrafficCounts& TrafficCounts::operator+=(const TrafficCounts& other) {
  bytes_out += other.bytes_out;
  bytes_in += other.bytes_in;
  chunks_out += other.chunks_out;
  chunks_in += other.chunks_in;
  resent_bytes += other.resent_bytes;
  errors += other.errors;
  return *this;
}

WindowRing::WindowRing(std::chrono::nanoseconds width, size_t windows, const TrafficCounts& totals)
    : width_(width),
      size_(windows),
      slots_(std::make_unique<Slot[]>(windows)),
      total_bytes_out_(totals.bytes_out),
      total_bytes_in_(totals.bytes_in),
      total_chunks_out_(totals.chunks_out),
      total_chunks_in_(totals.chunks_in),
      total_resent_bytes_(totals.resent_bytes),
      total_errors_(totals.errors) {
  if (width < std::chrono::microseconds(1)) {
    throw std::invalid_argument("a telemetry window must be at least 1 us wide");
  }
  if (windows < 2) throw std::invalid_argument("a telemetry ring needs at least 2 windows");
}

WindowRing::Slot& WindowRing::slot_for(Clock::time_point now) {
  const int64_t index = now.time_since_epoch() / width_;
  // A sample stamped a little before the window being written (its caller read the clock
  // earlier) counts in that window: windows are only ever opened forwards.
  if (index <= current_ && current_slot_ != nullptr) return *current_slot_;
  Slot& slot = slots_[static_cast<size_t>(index % static_cast<int64_t>(size_))];
  // Recycled under the sequence lock: a reader copying it meanwhile sees the change.
  const uint64_t sequence = slot.sequence.load(std::memory_order_relaxed);
  slot.sequence.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.index.store(index, std::memory_order_relaxed);
  for (Counter* c : {&slot.bytes_out, &slot.bytes_in, &slot.chunks_out, &slot.chunks_in,
                     &slot.resent_bytes, &slot.errors, &slot.latency_max_ns}) {
    c->store(0, std::memory_order_relaxed);
  }
  for (auto& bucket : slot.latency) bucket.store(0, std::memory_order_relaxed);
  slot.sequence.store(sequence + 2, std::memory_order_release);
  current_ = index;
  current_slot_ = &slot;
  return slot;
}

void WindowRing::count_chunk(Clock::time_point now, uint64_t bytes, Counter Slot::*slot_bytes,
                             Counter Slot::*slot_chunks, Counter& total_bytes,
                             Counter& total_chunks) {
  Slot& slot = slot_for(now);
  bump(slot.*slot_bytes, bytes);
  bump(slot.*slot_chunks, 1);
  bump(total_bytes, bytes);
  bump(total_chunks, 1);
}

void WindowRing::sent(Clock::time_point now, uint64_t bytes) {
  count_chunk(now, bytes, &Slot::bytes_out, &Slot::chunks_out, total_bytes_out_, total_chunks_out_);
}

void WindowRing::received(Clock::time_point now, uint64_t bytes) {
  count_chunk(now, bytes, &Slot::bytes_in, &Slot::chunks_in, total_bytes_in_, total_chunks_in_);
}

void WindowRing::acknowledged(Clock::time_point now, std::chrono::nanoseconds latency) {
  Slot& slot = slot_for(now);
  bump(slot.latency[static_cast<size_t>(latency_bucket(latency))], 1);
  const auto ns = static_cast<uint64_t>(std::max<int64_t>(latency.count(), 0));
  if (ns > slot.latency_max_ns.load(std::memory_order_relaxed)) {
    slot.latency_max_ns.store(ns, std::memory_order_relaxed);
  }
}

void WindowRing::resent(Clock::time_point now, uint64_t bytes) {
  bump(slot_for(now).resent_bytes, bytes);
  bump(total_resent_bytes_, bytes);
}

void WindowRing::error(Clock::time_point now) {
  bump(slot_for(now).errors, 1);
  bump(total_errors_, 1);
}

std::vector<WindowRing::Window> WindowRing::recent(Clock::time_point now, size_t count) const {
  const int64_t current = now.time_since_epoch() / width_;
  count = std::min(count, size_ - 1);  // the slot after the current one may be recycled next
  std::vector<Window> out;
  out.reserve(count);
  for (int64_t index = current - static_cast<int64_t>(count); index < current; ++index) {
    Window w;
    w.index = index;
    if (index < 0) {  // before the clock's epoch: nothing was recorded there
      out.push_back(w);
      continue;
    }
    const Slot& slot = slots_[static_cast<size_t>(index % static_cast<int64_t>(size_))];
    const uint64_t before = slot.sequence.load(std::memory_order_acquire);
    if (before % 2 == 0 && slot.index.load(std::memory_order_relaxed) == index) {
      Window copy;
      copy.index = index;
      copy.bytes_out = slot.bytes_out.load(std::memory_order_relaxed);
      copy.bytes_in = slot.bytes_in.load(std::memory_order_relaxed);
      copy.chunks_out = slot.chunks_out.load(std::memory_order_relaxed);
      copy.chunks_in = slot.chunks_in.load(std::memory_order_relaxed);
      copy.resent_bytes = slot.resent_bytes.load(std::memory_order_relaxed);
      copy.errors = slot.errors.load(std::memory_order_relaxed);
      copy.latency_max_ns = slot.latency_max_ns.load(std::memory_order_relaxed);
      for (size_t b = 0; b < copy.latency.size(); ++b) {
        copy.latency[b] = slot.latency[b].load(std::memory_order_relaxed);
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      // Unchanged: the copy is of window `index`; else it was recycled (idle meanwhile).
      if (slot.sequence.load(std::memory_order_relaxed) == before) w = copy;
    }
    out.push_back(w);
  }
  return out;
}

WindowRing::Totals WindowRing::totals() const {
  Totals t;
  t.bytes_out = total_bytes_out_.load(std::memory_order_relaxed);
  t.bytes_in = total_bytes_in_.load(std::memory_order_relaxed);
  t.chunks_out = total_chunks_out_.load(std::memory_order_relaxed);
  t.chunks_in = total_chunks_in_.load(std::memory_order_relaxed);
  t.resent_bytes = total_resent_bytes_.load(std::memory_order_relaxed);
  t.errors = total_errors_.load(std::memory_order_relaxed);
  return t;
}

}  // namespace plexus::monitor
