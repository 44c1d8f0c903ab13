// The engine's own parts beside its loop: the command queue other threads post to, the
// watchdog's pinger, and the session table's polling order (latency class first, arrival
// order within a class, sorted again when a session comes or goes or a policy changes).
#include <poll.h>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/engine/command_queue.h"
#include "daemon/engine/session_table.h"
#include "daemon/engine/watchdog_pinger.h"

namespace plexus::daemon {
namespace {

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

TEST(CommandQueueTest, CommandsPostedFromAnotherThreadRunInOrderAndWakeTheEngine) {
  CommandQueue<std::vector<int>> queue;
  EXPECT_FALSE(queue.pending());
  EXPECT_FALSE(readable(queue.fd()));
  std::thread poster([&] {
    for (int i = 0; i < 3; ++i) queue.post([i](std::vector<int>& seen) { seen.push_back(i); });
  });
  poster.join();
  EXPECT_TRUE(queue.pending());
  EXPECT_TRUE(readable(queue.fd())) << "a parked engine must wake";
  std::vector<int> seen;
  queue.run(seen);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(queue.pending());
  queue.run(seen);
  EXPECT_EQ(seen.size(), 3u) << "each command runs once";
}

TEST(CommandQueueTest, ACommandMayPostAnotherWhichRunsNextTime) {
  CommandQueue<int> queue;
  int runs = 0;
  queue.post([&](int& n) {
    ++n;
    queue.post([](int& m) { m += 10; });
  });
  queue.run(runs);
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(queue.pending());
  queue.run(runs);
  EXPECT_EQ(runs, 11);
}

TEST(WatchdogPingerTest, UnsetItNeverPings) {
  WatchdogPinger pinger;
  pinger.turn(true);  // no ping to call: must not crash
  pinger.set(nullptr, std::chrono::microseconds(0));
  pinger.turn(true);
}

TEST(WatchdogPingerTest, AnIdleTurnPingsWhenDueABusyLoopOnlyEveryKTurns) {
  WatchdogPinger pinger;
  int pings = 0;
  pinger.set([&] { ++pings; }, std::chrono::microseconds(0));
  pinger.turn(true);
  EXPECT_EQ(pings, 1);
  for (uint32_t i = 0; i + 1 < WatchdogPinger::kTurns; ++i) pinger.turn(false);
  EXPECT_EQ(pings, 1) << "a busy loop looks at the clock only every kTurns turns";
  pinger.turn(false);
  EXPECT_EQ(pings, 2);
}

TEST(WatchdogPingerTest, NoSecondPingBeforeTheIntervalPassed) {
  WatchdogPinger pinger;
  int pings = 0;
  pinger.set([&] { ++pings; }, std::chrono::hours(1));
  pinger.turn(true);
  pinger.turn(true);
  pinger.turn(true);
  EXPECT_EQ(pings, 1);
}

std::shared_ptr<Session> session_of(uint64_t id, const std::shared_ptr<JobCounters>& job) {
  Session::Identity identity;
  identity.role = SessionRole::kRank;
  identity.job = job->job;
  identity.job_counters = job;
  return std::make_shared<Session>(id, PeerCredentials{}, std::move(identity));
}

std::vector<uint64_t> ids(const SessionTable::List& list) {
  std::vector<uint64_t> out;
  for (const auto& s : list) out.push_back(s->id());
  return out;
}

TEST(SessionTableTest, TheLatencyClassIsPolledFirstArrivalOrderWithinAClass) {
  auto bulk = std::make_shared<JobCounters>("trainer", 1);
  auto latency = std::make_shared<JobCounters>("rollout", 2);
  latency->traffic_class = transports::TrafficClass::kLatency;
  SessionTable table;
  table.add(session_of(1, bulk));
  table.add(session_of(2, latency));
  table.add(session_of(3, bulk));
  table.add(session_of(4, latency));
  EXPECT_EQ(ids(table.by_class(0)), (std::vector<uint64_t>{2, 4, 1, 3}));
  EXPECT_EQ(ids(table.all()), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(SessionTable::is_latency(*table.by_class().front()));

  // A policy change is seen through the jobs' version.
  latency->traffic_class = bulk->traffic_class.load();
  EXPECT_EQ(ids(table.by_class(0)), (std::vector<uint64_t>{2, 4, 1, 3})) << "same version";
  EXPECT_EQ(ids(table.by_class(1)), (std::vector<uint64_t>{1, 2, 3, 4}));
}

TEST(SessionTableTest, AnErasedSessionStaysInTheOrderUntilTheNextSort) {
  auto job = std::make_shared<JobCounters>("trainer", 1);
  SessionTable table;
  Session& first = table.add(session_of(1, job));
  table.add(session_of(2, job));
  EXPECT_EQ(ids(table.by_class(0)), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(table.find(1), &first);
  EXPECT_EQ(table.shared(&first).get(), &first);

  std::shared_ptr<Session> held = table.shared(1);
  table.erase(held.get());
  EXPECT_EQ(table.find(1), nullptr);
  EXPECT_EQ(table.shared(held.get()), nullptr) << "no longer served";
  EXPECT_EQ(ids(table.by_class()), (std::vector<uint64_t>{1, 2})) << "the loop's order holds it";
  EXPECT_EQ(ids(table.by_class(0)), (std::vector<uint64_t>{2})) << "sorted again: gone";
  table.erase(held.get());  // twice: nothing happens
  EXPECT_EQ(table.all().size(), 1u);
}

TEST(SessionTableTest, ASessionHoldingEntriesForItsStreamWaitsOnTheGpu) {
  auto job = std::make_shared<JobCounters>("trainer", 1);
  SessionTable table;
  Session& session = table.add(session_of(1, job));
  EXPECT_FALSE(table.wait_on_gpu());
  session.held_for_stream.push_back(shm::SubmissionEntry{});
  EXPECT_TRUE(table.wait_on_gpu());
}

}  // namespace
}  // namespace plexus::daemon
