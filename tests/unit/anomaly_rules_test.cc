// The anomaly rules on synthetic input: the stall watch, rank skew and slow paths (from
// real telemetry windows), and the event log they report to.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "monitor/event_log.h"
#include "monitor/rank_skew.h"
#include "monitor/slow_path_streaks.h"
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

// A path over a span as the daemon's monitor sees it: the kernel's delivery rate, and
// `sends` windows each sending two chunks (every other window idle) recorded into a real
// ring and summarized for its busy windows.
PathTraffic traffic(size_t group, double rate, size_t sends, bool app_limited = false,
                    uint64_t unsent = 0) {
  const auto width = 1ms;
  WindowRing ring(width, 2000);
  for (size_t w = 0; w < sends; ++w) {
    const auto start = Clock::time_point(width * static_cast<int64_t>(2 * w + 1));
    ring.sent(start, 1000);
    ring.sent(start + 100us, 1000);
  }
  const auto now = Clock::time_point(width * static_cast<int64_t>(2 * sends + 2));
  const WindowSummary s = summarize(ring.recent(now, 1999), width);
  return {group, rate, app_limited, s.sending_windows, unsent};
}

std::vector<PathVerdict::Kind> kinds(const std::vector<PathTraffic>& paths, SlowPathRule rule) {
  std::vector<PathVerdict::Kind> out;
  for (const PathVerdict& v : judge_paths(paths, rule)) out.push_back(v.kind);
  return out;
}

using K = PathVerdict::Kind;
constexpr SlowPathRule kRule{1, 0.3};

TEST(SlowPathsTest, BusyWindowsAreTheWindowsThatSent) {
  const PathTraffic t = traffic(3, 1e9, 100);
  EXPECT_EQ(t.group, 3u);
  EXPECT_EQ(t.busy_windows, 100u);
}

TEST(SlowPathsTest, APathFarBelowItsSiblingsMedianIsSlow) {
  // Peer 0 over four rails, one delivering 2.4 MB/s (a 20 Mbit/s shaper) that sent in no
  // window of the span but has bytes queued; peer 1 over two even rails.
  std::vector<PathTraffic> paths = {
      traffic(0, 1.0e9, 200), traffic(0, 0.9e9, 180, true), traffic(0, 2.4e6, 0, false, 900000),
      traffic(0, 1.1e9, 210), traffic(1, 5e8, 100),         traffic(1, 4e8, 100)};
  const auto verdicts = judge_paths(paths, kRule);
  EXPECT_EQ(kinds(paths, kRule),
            (std::vector<K>{K::kAtPar, K::kUnjudged, K::kSlow, K::kAtPar, K::kAtPar, K::kAtPar}));
  EXPECT_EQ(verdicts[2].siblings, 3u);
  EXPECT_DOUBLE_EQ(verdicts[2].siblings_median_rate, 1.0e9);
}

TEST(SlowPathsTest, IdleUnmeasuredAppLimitedApartOrAMildDipIsNotSlow) {
  // Idle (no window, nothing queued), or no rate yet: unjudged, and no sibling to the other.
  EXPECT_EQ(kinds({traffic(0, 1e9, 200), traffic(0, 1e6, 0), traffic(0, 0, 200)}, kRule),
            (std::vector<K>{K::kUnjudged, K::kUnjudged, K::kUnjudged}));
  // A low sample taken with too little queued says nothing about the path.
  EXPECT_EQ(kinds({traffic(0, 1e9, 200), traffic(0, 1e6, 200, true)}, kRule),
            (std::vector<K>{K::kAtPar, K::kUnjudged}));
  // Busy paths to different peers are not siblings, however different.
  EXPECT_EQ(kinds({traffic(0, 1e9, 200), traffic(1, 1e6, 200)}, kRule),
            (std::vector<K>{K::kUnjudged, K::kUnjudged}));
  // 40% of the sibling is under par, not slow at ratio 0.3.
  EXPECT_EQ(kinds({traffic(0, 1e9, 200), traffic(0, 4e8, 200)}, kRule),
            (std::vector<K>{K::kAtPar, K::kAtPar}));
  // Judged against an app-limited sibling's sample (a lower bound on it).
  EXPECT_EQ(kinds({traffic(0, 1e9, 200, true), traffic(0, 2e8, 200)}, kRule),
            (std::vector<K>{K::kUnjudged, K::kSlow}));
  // Several busy windows required, when asked for.
  EXPECT_EQ(kinds({traffic(0, 1e9, 200), traffic(0, 2e8, 3)}, SlowPathRule{12, 0.3}),
            (std::vector<K>{K::kUnjudged, K::kUnjudged}));
}

// The indices SlowPathStreaks reports for one look at paths "a" and "b".
std::vector<size_t> reported(SlowPathStreaks& streaks, K a, K b) {
  const std::vector<std::string> keys = {"a", "b"};
  std::vector<PathVerdict> verdicts(2);
  verdicts[0].kind = a;
  verdicts[1].kind = b;
  std::vector<size_t> out;
  for (const SlowPathStreaks::Report& r : streaks.look(keys, verdicts)) out.push_back(r.index);
  return out;
}

TEST(SlowPathStreaksTest, ALookThatCannotJudgeNeitherConfirmsNorClearsAStreak) {
  SlowPathStreaks streaks(3, 8);
  const std::vector<size_t> none;
  // "a" is slow, then unjudged (starved by the senders, or an app-limited sample) between
  // its slow looks: still reported on its third slow look. "b" is slow twice, at par once.
  EXPECT_EQ(reported(streaks, K::kSlow, K::kSlow), none);
  EXPECT_EQ(reported(streaks, K::kUnjudged, K::kSlow), none);
  EXPECT_EQ(reported(streaks, K::kSlow, K::kAtPar), none);
  EXPECT_EQ(reported(streaks, K::kUnjudged, K::kSlow), none);
  EXPECT_EQ(reported(streaks, K::kSlow, K::kSlow), std::vector<size_t>{0});
  // Reported once while it stays slow; "b" then completes its own streak after the at-par look.
  EXPECT_EQ(reported(streaks, K::kSlow, K::kSlow), std::vector<size_t>{1});
  EXPECT_EQ(reported(streaks, K::kSlow, K::kSlow), none);
  // Back at par, then slow in three looks: reported again.
  EXPECT_EQ(reported(streaks, K::kAtPar, K::kUnjudged), none);
  EXPECT_EQ(reported(streaks, K::kSlow, K::kUnjudged), none);
  EXPECT_EQ(reported(streaks, K::kSlow, K::kUnjudged), none);
  EXPECT_EQ(reported(streaks, K::kSlow, K::kUnjudged), std::vector<size_t>{0});
}

TEST(SlowPathStreaksTest, AStreakLapsesAfterTooManyLooksThatCannotJudgeIt) {
  SlowPathStreaks streaks(3, 2);
  const std::vector<size_t> none;
  // "a": slow twice, two unjudged looks (the most a streak survives), slow: reported.
  // "b": slow twice, three unjudged looks: its streak lapsed, two more slow looks are not
  // enough.
  EXPECT_EQ(reported(streaks, K::kSlow, K::kSlow), none);
  EXPECT_EQ(reported(streaks, K::kSlow, K::kSlow), none);
  EXPECT_EQ(reported(streaks, K::kUnjudged, K::kUnjudged), none);
  EXPECT_EQ(reported(streaks, K::kUnjudged, K::kUnjudged), none);
  EXPECT_EQ(reported(streaks, K::kSlow, K::kUnjudged), std::vector<size_t>{0});
  EXPECT_EQ(reported(streaks, K::kSlow, K::kSlow), none);
  EXPECT_EQ(reported(streaks, K::kSlow, K::kSlow), none);
  EXPECT_EQ(reported(streaks, K::kSlow, K::kSlow), std::vector<size_t>{1});
  // A slow look starts the gap again: "a" slow, two unjudged, slow, two unjudged, slow.
  SlowPathStreaks gaps(3, 2);
  for (K k : {K::kSlow, K::kUnjudged, K::kUnjudged, K::kSlow, K::kUnjudged, K::kUnjudged}) {
    EXPECT_EQ(reported(gaps, k, K::kUnjudged), none);
  }
  EXPECT_EQ(reported(gaps, K::kSlow, K::kUnjudged), std::vector<size_t>{0});
}

TEST(SlowPathStreaksTest, APathLeavingTheLooksIsForgottenItsStreakAndItsReport) {
  SlowPathStreaks streaks(2, 8);
  const std::vector<std::string> both = {"a", "b"}, only_b = {"b"};
  std::vector<PathVerdict> slow(2);
  slow[0].kind = slow[1].kind = K::kSlow;
  EXPECT_TRUE(streaks.look(both, slow).empty());
  // "a" goes (failed, or drained): its streak with it; "b" completes its own.
  const auto first = streaks.look(only_b, std::span(slow).first(1));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].streak, 2);
  // "a" back: it starts again from nothing, and is reported after two slow looks.
  EXPECT_TRUE(streaks.look(both, slow).empty());
  auto again = streaks.look(both, slow);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].index, 0u);
  // Reported, then gone and back slow: a new path, reported again; "b" stays reported.
  EXPECT_TRUE(streaks.look(only_b, std::span(slow).first(1)).empty());
  EXPECT_TRUE(streaks.look(both, slow).empty());
  again = streaks.look(both, slow);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].index, 0u);
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
