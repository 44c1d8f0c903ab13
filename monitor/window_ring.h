// Windowed telemetry of one subject (a path, a NIC): per window of fixed width (default
// 1 ms), bytes and chunks each way, resent bytes, errors and a chunk-latency histogram,
// the last N windows kept in a ring. One thread records (the engine's, on the data path)
// with no lock and no read-modify-write instruction; any thread reads. A slot is reused for
// a newer window under a sequence lock, so a reader either copies a whole window or sees
// that it was recycled. A window nothing was recorded in is never written: readers see it
// as idle (zeros).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "monitor/latency_histogram.h"

namespace plexus::monitor {

// What moved: in a window, over a run of windows, or since a ring was made.
struct TrafficCounts {
  uint64_t bytes_out = 0;
  uint64_t bytes_in = 0;
  uint64_t chunks_out = 0;
  uint64_t chunks_in = 0;
  uint64_t resent_bytes = 0;
  uint64_t errors = 0;
  bool busy() const { return chunks_out + chunks_in > 0; }
  TrafficCounts& operator+=(const TrafficCounts& other);
};

class WindowRing {
 public:
  using Clock = std::chrono::steady_clock;

  struct Window : TrafficCounts {  // a reader's copy
    int64_t index = 0;             // window number: it starts at index * width on the steady clock
    uint64_t latency_max_ns = 0;
    LatencyCounts latency{};
  };
  using Totals = TrafficCounts;  // since the ring was made; never decrease

  // `width` at least 1 us; `windows` at least 2. `totals`: where totals() starts (a
  // subject's earlier ring's, when one ring takes over from another).
  WindowRing(std::chrono::nanoseconds width, size_t windows, const TrafficCounts& totals = {});
  WindowRing(const WindowRing&) = delete;
  WindowRing& operator=(const WindowRing&) = delete;

  // The recording thread only.
  void sent(Clock::time_point now, uint64_t bytes);
  void received(Clock::time_point now, uint64_t bytes);
  // A chunk acknowledged `latency` after it was queued.
  void acknowledged(Clock::time_point now, std::chrono::nanoseconds latency);
  void resent(Clock::time_point now, uint64_t bytes);
  void error(Clock::time_point now);

  // Any thread: the `count` complete windows before the one `now` falls in, oldest first
  // (at most capacity() - 1); windows nothing was recorded in come as zeros.
  std::vector<Window> recent(Clock::time_point now, size_t count) const;
  Totals totals() const;
  std::chrono::nanoseconds width() const { return width_; }
  size_t capacity() const { return size_; }

 private:
  using Counter = std::atomic<uint64_t>;
  struct Slot {
    std::atomic<uint64_t> sequence{0};  // odd while the slot is being reset
    std::atomic<int64_t> index{-1};
    Counter bytes_out{0};
    Counter bytes_in{0};
    Counter chunks_out{0};
    Counter chunks_in{0};
    Counter resent_bytes{0};
    Counter errors{0};
    Counter latency_max_ns{0};
    std::array<std::atomic<uint32_t>, kLatencyBuckets> latency{};
  };
  // Single writer: a plain load and store, no locked instruction.
  template <typename T, typename V>
  static void bump(std::atomic<T>& counter, V by) {
    counter.store(counter.load(std::memory_order_relaxed) + static_cast<T>(by),
                  std::memory_order_relaxed);
  }
  Slot& slot_for(Clock::time_point now);
  // One chunk one way: into the window's counters and the totals.
  void count_chunk(Clock::time_point now, uint64_t bytes, Counter Slot::*slot_bytes,
                   Counter Slot::*slot_chunks, Counter& total_bytes, Counter& total_chunks);

  std::chrono::nanoseconds width_;
  size_t size_;
  std::unique_ptr<Slot[]> slots_;
  int64_t current_ = -1;  // the window being written (writer only)
  Slot* current_slot_ = nullptr;
  Counter total_bytes_out_{0};
  Counter total_bytes_in_{0};
  Counter total_chunks_out_{0};
  Counter total_chunks_in_{0};
  Counter total_resent_bytes_{0};
  Counter total_errors_{0};
};

}  // namespace plexus::monitor
