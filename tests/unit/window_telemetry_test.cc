// Windowed telemetry: latency buckets and percentiles, window rollover and recycling, what
// a run of windows sums to, and a reader racing the writer never copies a torn window.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "monitor/latency_histogram.h"
#include "monitor/window_ring.h"
#include "monitor/window_summary.h"

namespace plexus::monitor {
namespace {

using namespace std::chrono_literals;
using Clock = WindowRing::Clock;

// The start of a window of width `width` (so that tests place samples exactly).
Clock::time_point window_start(std::chrono::nanoseconds width, int64_t index) {
  return Clock::time_point(width * index);
}

TEST(LatencyHistogramTest, BucketsArePowersOfTwoMicroseconds) {
  EXPECT_EQ(latency_bucket(0ns), 0);
  EXPECT_EQ(latency_bucket(-5ns), 0);
  EXPECT_EQ(latency_bucket(1999ns), 0);
  EXPECT_EQ(latency_bucket(2us), 1);
  EXPECT_EQ(latency_bucket(3999ns), 1);
  EXPECT_EQ(latency_bucket(4us), 2);
  EXPECT_EQ(latency_bucket(1ms), 9);  // 1000 us: [512, 1024)
  EXPECT_EQ(latency_bucket(1s), 19);  // 1e6 us: [524288, 1048576)
  EXPECT_EQ(latency_bucket(1h), kLatencyBuckets - 1);
}

TEST(LatencyHistogramTest, QuantilesInterpolateInsideTheirBucket) {
  LatencyCounts counts{};
  EXPECT_EQ(latency_quantile_us(counts, 0.5), 0.0);  // empty
  counts[6] = 100;                                   // [64, 128) us
  EXPECT_DOUBLE_EQ(latency_quantile_us(counts, 0.5), 96.0);
  EXPECT_DOUBLE_EQ(latency_quantile_us(counts, 0.99), 64.0 + 0.99 * 64.0);
  // Never above the largest latency seen.
  EXPECT_DOUBLE_EQ(latency_quantile_us(counts, 0.99, 100.0), 100.0);

  LatencyCounts two{};
  two[3] = 90;   // [8, 16) us
  two[10] = 10;  // [1024, 2048) us
  EXPECT_NEAR(latency_quantile_us(two, 0.5), 8.0 + 50.0 / 90.0 * 8.0, 1e-9);
  EXPECT_NEAR(latency_quantile_us(two, 0.99), 1024.0 + 0.9 * 1024.0, 1e-9);
  EXPECT_NEAR(latency_quantile_us(two, 0.90), 16.0, 1e-9);  // the 90th sample ends bucket 3
}

TEST(WindowRingTest, SamplesLandInTheWindowTheirTimeFallsIn) {
  WindowRing ring(1ms, 10);
  const auto t0 = window_start(1ms, 1000);
  ring.sent(t0, 100);
  ring.sent(t0 + 500us, 50);
  ring.sent(t0 + 1ms, 200);
  ring.received(t0 + 1ms + 10us, 64);
  ring.sent(t0 + 3200us, 7);
  ring.resent(t0 + 3300us, 7);
  ring.error(t0 + 3400us);
  const auto windows = ring.recent(t0 + 4ms, 4);
  ASSERT_EQ(windows.size(), 4u);
  EXPECT_EQ(windows[0].index, 1000);
  EXPECT_EQ(windows[0].bytes_out, 150u);
  EXPECT_EQ(windows[0].chunks_out, 2u);
  EXPECT_EQ(windows[1].bytes_out, 200u);
  EXPECT_EQ(windows[1].bytes_in, 64u);
  EXPECT_EQ(windows[1].chunks_in, 1u);
  EXPECT_FALSE(windows[2].busy());
  EXPECT_EQ(windows[2].index, 1002);
  EXPECT_EQ(windows[3].bytes_out, 7u);
  EXPECT_EQ(windows[3].resent_bytes, 7u);
  EXPECT_EQ(windows[3].errors, 1u);
  const auto totals = ring.totals();
  EXPECT_EQ(totals.bytes_out, 357u);
  EXPECT_EQ(totals.chunks_out, 4u);
  EXPECT_EQ(totals.bytes_in, 64u);
  EXPECT_EQ(totals.resent_bytes, 7u);
  EXPECT_EQ(totals.errors, 1u);
  // The window `now` falls in is not complete: not returned.
  EXPECT_EQ(ring.recent(t0 + 3500us, 1).front().index, 1002);
}

TEST(WindowRingTest, OnlyTheLastWindowsAreKeptAndOldSlotsAreRecycled) {
  WindowRing ring(1ms, 4);
  for (int64_t w = 0; w < 10; ++w) ring.sent(window_start(1ms, 500 + w), 10 + w);
  // Asking for more than the ring holds gives capacity - 1 windows.
  const auto windows = ring.recent(window_start(1ms, 510), 100);
  ASSERT_EQ(windows.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(windows[i].index, 507 + i);
    EXPECT_EQ(windows[i].bytes_out, static_cast<uint64_t>(17 + i));
  }
  EXPECT_EQ(ring.totals().bytes_out, 145u);  // every window, kept or not
}

TEST(WindowRingTest, WindowsLeftIdleLongerThanTheRingReadAsZeros) {
  WindowRing ring(1ms, 4);
  ring.sent(window_start(1ms, 0), 1000);
  ring.sent(window_start(1ms, 101), 5);  // the slot of window 0 + 4k is never rewritten
  const auto windows = ring.recent(window_start(1ms, 102), 3);
  ASSERT_EQ(windows.size(), 3u);
  EXPECT_EQ(windows[0].index, 99);
  EXPECT_EQ(windows[0].bytes_out, 0u);  // the slot holds window 0's bytes: not this window's
  EXPECT_EQ(windows[1].bytes_out, 0u);
  EXPECT_EQ(windows[2].bytes_out, 5u);
  // Window 100 shares its slot with window 0 (4 slots): still idle, not 1000 bytes.
  EXPECT_EQ(ring.recent(window_start(1ms, 101), 1).front().bytes_out, 0u);
}

TEST(WindowRingTest, ASampleStampedBeforeTheOpenWindowCountsInIt) {
  WindowRing ring(1ms, 8);
  ring.sent(window_start(1ms, 20), 1);
  ring.sent(window_start(1ms, 19) + 100us, 2);  // read its clock earlier
  const auto windows = ring.recent(window_start(1ms, 21), 2);
  EXPECT_EQ(windows[0].bytes_out, 0u);
  EXPECT_EQ(windows[1].bytes_out, 3u);
}

TEST(WindowRingTest, RejectsAWidthUnderAMicrosecondOrARingOfOne) {
  EXPECT_THROW(WindowRing(999ns, 10), std::invalid_argument);
  EXPECT_THROW(WindowRing(1ms, 1), std::invalid_argument);
}

TEST(WindowSummaryTest, ThroughputCountsBusyWindowsAndLatencyMergesHistograms) {
  WindowRing ring(1ms, 16);
  const auto t0 = window_start(1ms, 7000);
  ring.sent(t0, 1000);
  ring.sent(t0 + 2ms, 1000);                                       // window 7001 idle, 7003 idle
  for (int i = 0; i < 99; ++i) ring.acknowledged(t0 + 2ms, 10us);  // [8, 16) us
  ring.acknowledged(t0 + 2ms, 3ms);
  const auto windows = ring.recent(t0 + 4ms, 4);
  const WindowSummary s = summarize(windows, ring.width());
  EXPECT_EQ(s.windows, 4u);
  EXPECT_EQ(s.busy_windows, 2u);
  EXPECT_EQ(s.bytes_out, 2000u);
  EXPECT_DOUBLE_EQ(s.busy_out_bytes_per_s, 1e6);  // 2000 B in 2 busy ms
  EXPECT_EQ(s.latency.count, 100u);
  EXPECT_DOUBLE_EQ(s.latency.max_us, 3000.0);
  EXPECT_LT(s.latency.p50_us, 16.0);
  EXPECT_GE(s.latency.p50_us, 8.0);
  EXPECT_LE(s.latency.p99_us, 16.0);  // the 99th of 100 is still a 10 us one
  EXPECT_EQ(summarize({}, 1ms).busy_out_bytes_per_s, 0.0);
}

// Tiny windows in a small ring, so slots are recycled all the time under the reader. The
// writer sends chunks of a size that depends on the window: a copy mixing two windows, or
// one recycled half-way, breaks bytes == size * chunks. Only windows the writer has left
// are checked (it says which window it is in after each sample). The writer goes on for at
// least 150 ms and until the reader has checked 1,000 windows (at most 20 s): a reader the
// scheduler kept off a busy machine's cores still gets its turn under the writer.
TEST(WindowRingTest, AReaderRacingTheWriterNeverCopiesATornWindow) {
  constexpr auto kWidth = 20us;
  WindowRing ring(kWidth, 4);
  std::atomic<int64_t> writing{-1};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> checked{0};
  std::thread writer([&] {
    const auto start = Clock::now();
    for (auto now = start; now - start < 20s; now = Clock::now()) {
      if (now - start >= 150ms && checked.load(std::memory_order_relaxed) >= 1000) break;
      const int64_t index = now.time_since_epoch() / kWidth;
      ring.sent(now, static_cast<uint64_t>(index % 97) + 1);
      writing.store(index, std::memory_order_release);
    }
    stop = true;
  });
  while (!stop) {
    const int64_t left_before = writing.load(std::memory_order_acquire);
    for (const auto& w : ring.recent(Clock::now(), 3)) {
      if (w.index >= left_before || !w.busy()) continue;
      checked.fetch_add(1, std::memory_order_relaxed);
      const uint64_t size = static_cast<uint64_t>(w.index % 97) + 1;
      EXPECT_EQ(w.bytes_out, size * w.chunks_out)
          << "window " << w.index << ": " << w.bytes_out << " bytes, " << w.chunks_out
          << " chunks of " << size;
      if (w.bytes_out != size * w.chunks_out) stop = true;  // once said (the writer is joined)
    }
  }
  writer.join();
  EXPECT_GT(checked.load(), 0u)
      << "the reader never saw a finished busy window: nothing was checked";
}

}  // namespace
}  // namespace plexus::monitor
