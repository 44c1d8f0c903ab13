// The anomaly rules on synthetic input: the stall watch, rank skew and slow paths (from
// real telemetry windows), and the event log they report to.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "monitor/event_log.h"
#include "monitor/rank_skew.h"
#include "monitor/slow_paths.h"
#include "monitor/stall_watch.h"
#include "monitor/window_ring.h"
#include "monitor/window_summary.h"

namespace plexus::monitor {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const Clock::time_point t0 = Clock::time_point(1000s);

TEST(StallWatchTest, ReportsOnceAfterTheThresholdWithoutProgress) {
  StallWatch watch;
  EXPECT_EQ(watch.observe(7, t0), 0ms);
  EXPECT_FALSE(watch.should_report(t0 + 999ms, 1s));
  EXPECT_EQ(watch.observe(7, t0 + 999ms), 999ms);
  EXPECT_TRUE(watch.should_report(t0 + 1s, 1s));
  EXPECT_TRUE(watch.reported());
  EXPECT_FALSE(watch.should_report(t0 + 5s, 1s)) << "one report per stall";
  // Progress re-arms it, from the time it was seen.
  EXPECT_EQ(watch.observe(8, t0 + 6s), 0ms);
  EXPECT_FALSE(watch.reported());
  EXPECT_FALSE(watch.should_report(t0 + 6s + 500ms, 1s));
  EXPECT_TRUE(watch.should_report(t0 + 7s, 1s));
  watch.reset();
  EXPECT_FALSE(watch.should_report(t0 + 60s, 1s)) << "nothing pending after a reset";
}

TEST(RankSkewTest, ReportsARankLateInMostOfTheWindowWithItsMedianLateness) {
  RankSkewDetector detector(RankSkewRule{16, 12, 10ms, 10s});
  std::optional<RankSkewFinding> finding;
  int op = 0;
  // 12 of 16 ops: rank 3 arrives 20..31 ms late; the rest: rank 1 just 1 ms late.
  for (; op < 16 && !finding; ++op) {
    const auto now = t0 + op * 50ms;
    if (op % 4 == 0) {
      finding = detector.observe(now, 1, 1ms);
    } else {
      finding = detector.observe(now, 3, std::chrono::milliseconds(20 + op % 12));
    }
  }
  ASSERT_TRUE(finding.has_value());
  EXPECT_EQ(op, 16) << "only once the window is full";
  EXPECT_EQ(finding->rank, 3);
  EXPECT_EQ(finding->late_ops, 12u);
  EXPECT_EQ(finding->window, 16u);
  // Lateness of ops 1,2,3,5,6,7,9,10,11,13,14,15: 21..35 minus multiples; median of 12.
  EXPECT_GE(finding->median_lateness, 20ms);
  EXPECT_LE(finding->median_lateness, 31ms);
  // Quiet for 10 s even though rank 3 stays late.
  for (int i = 0; i < 64; ++i) {
    EXPECT_FALSE(detector.observe(t0 + 1s + i * 10ms, 3, 40ms).has_value());
  }
  int later = 0;
  while (!detector.observe(t0 + 12s + later * 10ms, 3, 40ms) && later < 100) ++later;
  EXPECT_LT(later, 16) << "reported again once the quiet time passed";
}

TEST(RankSkewTest, JitterAndRotatingStragglersAreNotSkew) {
  RankSkewDetector detector(RankSkewRule{16, 12, 10ms, 10s});
  for (int op = 0; op < 200; ++op) {
    // Late by a lot, but a different rank each time; or the same rank but under 10 ms.
    const bool same_rank_small = op % 2 == 0;
    const int rank = same_rank_small ? 2 : op % 7;
    const auto lateness = same_rank_small ? 9ms : 50ms;
    EXPECT_FALSE(detector.observe(t0 + op * 10ms, rank, lateness).has_value()) << "op " << op;
  }
}

// Sending windows of a path: `sends` windows each sending `bytes_per_window`, recorded
// into a real ring and summarized as the daemon's monitor does.
PathSendingRate rate_from_windows(size_t sends, uint64_t bytes_per_window) {
  const auto width = 1ms;
  WindowRing ring(width, 2000);
  for (size_t w = 0; w < sends; ++w) {
    // Two chunks per window; every other window idle (gaps must not count against it).
    const auto start = Clock::time_point(width * static_cast<int64_t>(2 * w + 1));
    ring.sent(start, bytes_per_window / 2);
    ring.sent(start + 100us, bytes_per_window - bytes_per_window / 2);
  }
  const auto now = Clock::time_point(width * static_cast<int64_t>(2 * sends + 2));
  const WindowSummary s = summarize(ring.recent(now, 1999), width);
  return {s.sending_bytes_per_s, s.sending_windows};
}

TEST(SlowPathsTest, SendingRateCountsOnlyWindowsThatSent) {
  const PathSendingRate r = rate_from_windows(100, 125000);
  EXPECT_EQ(r.sending_windows, 100u);
  EXPECT_DOUBLE_EQ(r.bytes_per_s, 125000.0 / 0.001);  // 125 MB/s, not half that
}

TEST(SlowPathsTest, APathFarBelowItsPeersMedianIsSlow) {
  std::vector<PathSendingRate> paths = {rate_from_windows(200, 125000),
                                        rate_from_windows(180, 120000),
                                        rate_from_windows(150, 12500),  // a tenth
                                        rate_from_windows(210, 118000)};
  const auto slow = find_slow_paths(paths, SlowPathRule{50, 0.5});
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].index, 2u);
  EXPECT_EQ(slow[0].peers, 3u);
  EXPECT_DOUBLE_EQ(slow[0].peers_median_bytes_per_s, 120000.0 / 0.001);
  EXPECT_DOUBLE_EQ(slow[0].bytes_per_s, 12500.0 / 0.001);
}

TEST(SlowPathsTest, TooFewWindowsOrNoPeersOrAMildDipIsNotSlow) {
  // The slow one sent in too few windows to judge.
  std::vector<PathSendingRate> few = {rate_from_windows(200, 125000), rate_from_windows(20, 1000)};
  EXPECT_TRUE(find_slow_paths(few, SlowPathRule{50, 0.5}).empty());
  // Alone: nothing to compare with.
  std::vector<PathSendingRate> alone = {rate_from_windows(200, 1000)};
  EXPECT_TRUE(find_slow_paths(alone, SlowPathRule{50, 0.5}).empty());
  // 60% of the median is under par, not slow at ratio 0.5.
  std::vector<PathSendingRate> dip = {rate_from_windows(200, 100000),
                                      rate_from_windows(200, 60000)};
  EXPECT_TRUE(find_slow_paths(dip, SlowPathRule{50, 0.5}).empty());
  // With two paths the slower is judged against the other alone.
  std::vector<PathSendingRate> two = {rate_from_windows(200, 100000),
                                      rate_from_windows(200, 40000)};
  const auto slow = find_slow_paths(two, SlowPathRule{50, 0.5});
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].index, 1u);
}

TEST(EventLogTest, EventsAreNumberedJsonLinesKeptInMemoryAndAppendedToTheFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("plexus-events-" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove(path);
  {
    EventLog log("node-x", path, 3);
    for (int i = 1; i <= 5; ++i) {
      EXPECT_EQ(log.emit("op_stalled", "warning", "event " + std::to_string(i), {{"i", i}}),
                static_cast<uint64_t>(i));
    }
    EXPECT_EQ(log.last_seq(), 5u);
    // Only the newest 3 are kept: asking from the start says 2 were missed.
    EventLog::Page page = log.after(0, 10);
    EXPECT_EQ(page.missed, 2u);
    ASSERT_EQ(page.lines.size(), 3u);
    EXPECT_EQ(page.next_after, 5u);
    const auto first = nlohmann::json::parse(page.lines[0]);
    EXPECT_EQ(first["seq"], 3);
    EXPECT_EQ(first["node"], "node-x");
    EXPECT_EQ(first["kind"], "op_stalled");
    EXPECT_EQ(first["severity"], "warning");
    EXPECT_EQ(first["message"], "event 3");
    EXPECT_EQ(first["evidence"]["i"], 3);
    EXPECT_EQ(first["time"].get<std::string>().size(), 24u);  // 2026-11-23T19:40:00.123Z
    // Paging: at most `max`, then continue from next_after; past the end: nothing.
    page = log.after(3, 1);
    ASSERT_EQ(page.lines.size(), 1u);
    EXPECT_EQ(nlohmann::json::parse(page.lines[0])["seq"], 4);
    EXPECT_EQ(page.next_after, 4u);
    page = log.after(5, 10);
    EXPECT_TRUE(page.lines.empty());
    EXPECT_EQ(page.next_after, 5u);
    page = log.after(UINT64_MAX, 10);
    EXPECT_TRUE(page.lines.empty());
    EXPECT_EQ(page.next_after, 5u) << "past the newest: from the newest on";
    // Invalid UTF-8 in a message is replaced, not thrown.
    log.emit("rank_skew", "warning", std::string("bad \xff byte"));
  }
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  std::filesystem::remove(path);
  ASSERT_EQ(lines.size(), 6u) << "the file has every event, not just the kept ones";
  EXPECT_EQ(lines[0]["message"], "event 1");
  EXPECT_EQ(lines[5]["seq"], 6);
}

TEST(EventLogTest, AnUnwritableFileIsAnErrorNamingIt) {
  try {
    EventLog log("n", "/nonexistent-dir/events.jsonl");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/events.jsonl"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace plexus::monitor
