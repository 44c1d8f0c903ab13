// Which data connections the rail connector opens to a peer and when it opens them again
// (daemon/peers/rail_connector.h), without a socket: its dials are recorded, and their
// failures and successes are told to it as PeerConnections would.
#include "daemon/peers/rail_connector.h"

#include "daemon/peers/dial_backoff.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <uv.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace plexus::daemon {
namespace {

using namespace std::chrono_literals;

uint32_t ip(const char* text) {
  in_addr a{};
  EXPECT_EQ(::inet_pton(AF_INET, text, &a), 1) << text;
  return ntohl(a.s_addr);
}

// Node 0 of a 2-rail cluster: nic0 198.18.0.1/24, nic1 198.18.1.1/24.
std::vector<LocalNic> two_rails() {
  return {{"nic0", ip("198.18.0.1"), 0xFFFFFF00u}, {"nic1", ip("198.18.1.1"), 0xFFFFFF00u}};
}

const std::vector<std::string> kPeer{"198.18.0.2:7355", "198.18.1.2:7355"};
constexpr uint64_t kInstance = 0x42;

// A /proc/net/route line, as rail_plan_test.cc makes them (any byte order).
std::string route_line(const char* nic, const char* destination) {
  in_addr d{};
  in_addr m{};
  ::inet_pton(AF_INET, destination, &d);
  ::inet_pton(AF_INET, "255.255.255.0", &m);
  char line[160];
  std::snprintf(line, sizeof(line), "%s\t%08X\t00000000\t0001\t0\t0\t100\t%08X\t0\t0\t0\n", nic,
                d.s_addr, m.s_addr);
  return line;
}

// Each NIC routes to its own subnet, and where `joined` (a spine) to the other rail's.
RouteTable routes(bool joined) {
  std::string text = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n" +
                     route_line("nic0", "198.18.0.0") + route_line("nic1", "198.18.1.0");
  if (joined) text += route_line("nic0", "198.18.1.0") + route_line("nic1", "198.18.0.0");
  std::istringstream in(text);
  return RouteTable::parse(in);
}

struct Dial {
  uint64_t instance = 0;
  Rail rail;
  uint64_t id = 0;
  std::chrono::milliseconds connect_within{0};
};

class RailConnectorTest : public ::testing::Test {
 protected:
  void SetUp() override { uv_loop_init(&loop_); }
  void TearDown() override {
    if (rails_) rails_->close();
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  void make(std::vector<LocalNic> nics, bool latency = false, bool backups = true) {
    rails_ = std::make_unique<RailConnector>(
        &loop_,
        RailConnector::Settings{.nics = std::move(nics),
                                .latency_connections = latency,
                                .reconnect_max = reconnect_max_,
                                .grace = grace_,
                                .jitter_seed = 7},
        RailConnector::Hooks{
            .dial =
                [this](uint64_t instance, const Rail& rail, uint64_t id,
                       std::chrono::milliseconds within) {
                  dials_.push_back({instance, rail, id, within});
                  if (!fail_at_once_.empty())
                    rails_->dial_failed(instance, rail.key, id, fail_at_once_ + " " + rail.key);
                },
            .failed = [this](uint64_t instance,
                             const std::string& reason) { failed_.emplace_back(instance, reason); },
            .routes = [this] { return routes(joined_); },
            .now = [this] { return now_ ? *now_ : std::chrono::steady_clock::now() + skew_; }});
    rails_->start(backups);
  }

  std::vector<std::string> keys() const {
    std::vector<std::string> keys;
    for (const Dial& d : dials_) keys.push_back(d.rail.key);
    return keys;
  }

  // Runs the loop until `n` dials were made, or two seconds passed.
  bool run_until_dials(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (dials_.size() < n && std::chrono::steady_clock::now() < deadline)
      uv_run(&loop_, UV_RUN_ONCE);
    return dials_.size() >= n;
  }

  // Whether `done` holds once the loop has run until it does, or until a libuv timer of
  // `span` from now fired (then: whether it held as that timer fired). libuv runs expired
  // timers in the order they fall due, so a retry due before `span` is dialled first, and
  // one due after it is not counted, however late a loaded machine runs the loop. The
  // connector's timers are armed from the same loop time: call uv_update_time first.
  bool within(const std::function<bool()>& done, std::chrono::milliseconds span) {
    struct Deadline {
      uv_timer_t timer{};
      const std::function<bool()>* done = nullptr;
      std::optional<bool> held;  // when it fired
    };
    auto* deadline = new Deadline;
    deadline->done = &done;
    uv_timer_init(&loop_, &deadline->timer);
    deadline->timer.data = deadline;
    uv_timer_start(
        &deadline->timer,
        [](uv_timer_t* t) {
          auto* d = static_cast<Deadline*>(t->data);
          d->held = (*d->done)();
        },
        static_cast<uint64_t>(span.count()), 0);
    while (!done() && !deadline->held) uv_run(&loop_, UV_RUN_ONCE);
    const bool held = deadline->held ? *deadline->held : true;
    uv_timer_stop(&deadline->timer);
    uv_close(reinterpret_cast<uv_handle_t*>(&deadline->timer),
             [](uv_handle_t* h) { delete static_cast<Deadline*>(h->data); });
    return held;
  }
  // The rails dialled from dial `from` on.
  std::set<std::string> keys_from(size_t from) const {
    std::set<std::string> keys;
    for (size_t i = from; i < dials_.size(); ++i) keys.insert(dials_[i].rail.key);
    return keys;
  }

  uv_loop_t loop_{};
  std::unique_ptr<RailConnector> rails_;
  std::vector<Dial> dials_;
  std::vector<std::pair<uint64_t, std::string>> failed_;
  std::string fail_at_once_;                        // when set, every dial fails before it returns
  std::chrono::milliseconds reconnect_max_ = 20ms;  // make()'s settings
  std::chrono::milliseconds grace_ = 0ms;
  bool joined_ = true;
  // When set, the connector's clock: deadlines are then decided by the test alone (a
  // retry's libuv timer waits at most the 20 ms backoff, computed from this clock).
  std::optional<std::chrono::steady_clock::time_point> now_;
  // Otherwise the real clock, moved on by this much: time passes as it does for libuv's
  // timers, and a test can still jump past a span without waiting it out.
  std::chrono::milliseconds skew_{0};
};

TEST_F(RailConnectorTest, DialsEveryRailAndABackupAcrossWhereARouteJoinsThem) {
  make(two_rails());
  rails_->connect(kInstance, kPeer);
  EXPECT_EQ(keys(), (std::vector<std::string>{"nic0", "nic1", "nic0>198.18.1.2:7355",
                                              "nic1>198.18.0.2:7355"}));
  for (const Dial& d : dials_) EXPECT_EQ(d.instance, kInstance);
  EXPECT_EQ(dials_[0].rail.local_address, ip("198.18.0.1"));
  EXPECT_TRUE(dials_[2].rail.backup);

  // Asked again, it dials nothing that is being dialled.
  rails_->connect(kInstance, kPeer);
  EXPECT_EQ(dials_.size(), 4u);
  EXPECT_TRUE(failed_.empty());
}

TEST_F(RailConnectorTest, LatencyTwinsBesideTheRailsAndNoBackupsWithoutBinding) {
  make(two_rails(), /*latency=*/true, /*backups=*/false);
  rails_->connect(kInstance, kPeer);
  EXPECT_EQ(keys(), (std::vector<std::string>{"nic0", "nic1", "nic0+latency", "nic1+latency"}));
  EXPECT_FALSE(dials_[0].rail.latency);
  EXPECT_TRUE(dials_[2].rail.latency);
  EXPECT_EQ(dials_[2].rail.nic, "nic0");
}

TEST_F(RailConnectorTest, ABackupWithNoRouteBetweenTheRailsIsNotDialled) {
  joined_ = false;
  make(two_rails());
  rails_->connect(kInstance, kPeer);
  EXPECT_EQ(keys(), (std::vector<std::string>{"nic0", "nic1"}));
}

TEST_F(RailConnectorTest, APeerWhoseEveryRailFailsAtOnceIsGivenUpOnce) {
  fail_at_once_ = "no route";
  make(two_rails());
  rails_->connect(kInstance, kPeer);
  EXPECT_EQ(dials_.size(), 4u);
  ASSERT_EQ(failed_.size(), 1u);
  EXPECT_EQ(failed_[0].first, kInstance);
  EXPECT_EQ(failed_[0].second, "no route nic1");  // a rail's error, not a backup's
  EXPECT_FALSE(rails_->redialing(kInstance, "nic0"));

  // Given up: nothing is retried, and a new connect starts afresh.
  uv_run(&loop_, UV_RUN_NOWAIT);
  fail_at_once_.clear();
  rails_->connect(kInstance, kPeer);
  EXPECT_EQ(dials_.size(), 8u);
}

TEST_F(RailConnectorTest, ARailThatFailsWhileAnotherIsUpIsDialledAgainWithBackoff) {
  make({two_rails()[0]});
  rails_->connect(kInstance, {"198.18.0.2:7355"});
  ASSERT_EQ(dials_.size(), 1u);
  rails_->dial_established(kInstance, "nic0");

  // Its path fails: dialled again after the backoff, not at once.
  rails_->lost(kInstance, "nic0", /*pathless=*/false);
  EXPECT_EQ(dials_.size(), 1u);
  ASSERT_TRUE(run_until_dials(2));
  EXPECT_EQ(dials_[1].rail.key, "nic0");
  EXPECT_NE(dials_[1].id, dials_[0].id);
  EXPECT_FALSE(rails_->redialing(kInstance, "nic0"));  // the first attempt again

  // That dial fails too: the peer stays linked, so again, now a second attempt.
  rails_->dial_failed(kInstance, "nic0", dials_[1].id, "connect: refused");
  EXPECT_TRUE(failed_.empty());
  EXPECT_TRUE(rails_->redialing(kInstance, "nic0"));
  ASSERT_TRUE(run_until_dials(3));
  rails_->dial_established(kInstance, "nic0");
  EXPECT_FALSE(rails_->redialing(kInstance, "nic0"));
}

// A lost path is redialled by the key its dial had: a backup whose socket was reset before
// its path knew the peer's address was once taken for the NIC's own rail, which left the
// backup gone for good (CI's RDMA cluster after a queue pair fault).
TEST_F(RailConnectorTest, ALostBackupIsDialledAgainAsTheBackup) {
  make(two_rails());
  rails_->connect(kInstance, kPeer);
  ASSERT_EQ(dials_.size(), 4u);
  for (const Dial& d : dials_) rails_->dial_established(kInstance, d.rail.key);
  rails_->lost(kInstance, "nic1>198.18.0.2:7355", /*pathless=*/false);
  ASSERT_TRUE(run_until_dials(5));
  EXPECT_EQ(dials_[4].rail.key, "nic1>198.18.0.2:7355");
  EXPECT_TRUE(dials_[4].rail.backup);
}

TEST_F(RailConnectorTest, AStaleDialsFailureAndALossWhileDiallingAreIgnored) {
  make({two_rails()[0]});
  rails_->connect(kInstance, {"198.18.0.2:7355"});
  ASSERT_EQ(dials_.size(), 1u);
  rails_->dial_failed(kInstance, "nic0", dials_[0].id + 1, "not this dial");
  rails_->lost(kInstance, "nic0", /*pathless=*/false);  // being dialled: no retry
  EXPECT_TRUE(failed_.empty());
  rails_->dial_failed(kInstance, "nic0", dials_[0].id, "connect: refused");
  ASSERT_EQ(failed_.size(), 1u);
  EXPECT_EQ(failed_[0].second, "connect: refused");
}

TEST_F(RailConnectorTest, AForgottenPeerIsNotDialledAgain) {
  make({two_rails()[0]});
  rails_->connect(kInstance, {"198.18.0.2:7355"});
  rails_->dial_established(kInstance, "nic0");
  rails_->lost(kInstance, "nic0", /*pathless=*/false);
  rails_->forget(kInstance);
  auto run_for = [this](std::chrono::milliseconds span) {
    const auto until = std::chrono::steady_clock::now() + span;
    while (std::chrono::steady_clock::now() < until) uv_run(&loop_, UV_RUN_NOWAIT);
  };
  run_for(100ms);  // past the 20 ms backoff
  EXPECT_EQ(dials_.size(), 1u);
  rails_->lost(kInstance, "nic0", /*pathless=*/false);  // no longer kept
  run_for(100ms);
  EXPECT_EQ(dials_.size(), 1u);
  EXPECT_TRUE(failed_.empty());
}

TEST_F(RailConnectorTest, ANicComingUpDialsItsWaitingRailsNow) {
  make(two_rails());
  rails_->connect(kInstance, kPeer);
  ASSERT_EQ(dials_.size(), 4u);
  for (const Dial& d : dials_) rails_->dial_established(kInstance, d.rail.key);
  rails_->lost(kInstance, "nic1", /*pathless=*/false);
  rails_->nic_up("nic0");  // not its NIC: still waiting
  EXPECT_EQ(dials_.size(), 4u);
  rails_->nic_up("nic1");
  ASSERT_EQ(dials_.size(), 5u);
  EXPECT_EQ(dials_[4].rail.key, "nic1");
}

// A link with no path left waits out its grace period for one, and so may the peer's while
// this side still has a path: a lost rail is dialled again at least every eighth of the
// grace for a grace period after its loss, and every rail while the link has no path left
// (those already backing off too); each connect gets a quarter of it (at least 100 ms), so
// that a SYN lost to a NIC that was down is not left to TCP's resend 1 s later. CI's NIC
// failover lost a node cut off for 0.7 s of a 2 s grace: its peer's retries had backed off
// past the grace.
TEST_F(RailConnectorTest, ALostRailAndALinkWithNoPathLeftAreDialledWithinAnEighthOfTheGrace) {
  reconnect_max_ = 2000ms;
  // Hurried retries wait 25-50 ms; each connect gets 100 ms. Its hurry spans are real time
  // (400 ms): a loaded machine may stall the loop for a good part of that and still pass.
  grace_ = 400ms;
  make(two_rails(), false, /*backups=*/false);
  rails_->connect(kInstance, kPeer);
  ASSERT_EQ(keys(), (std::vector<std::string>{"nic0", "nic1"}));
  EXPECT_EQ(dials_[0].connect_within, 0ms) << "a first dial keeps the dialler's own limit";
  for (const Dial& d : dials_) rails_->dial_established(kInstance, d.rail.key);
  auto dialled = [this](size_t n) { return [this, n] { return dials_.size() >= n; }; };

  // nic1's path fails while nic0's carries: hurried for a grace period after the loss. Its
  // first retry: 25-50 ms hurried, 50-100 ms not (a timer due at 50 ms exactly runs before
  // the deadline's, started after it).
  fail_at_once_ = "unreachable";
  uv_update_time(&loop_);
  rails_->lost(kInstance, "nic1", /*pathless=*/false);
  EXPECT_TRUE(within(dialled(3), 50ms)) << "not hurried after its loss";
  EXPECT_EQ(dials_[2].connect_within, 100ms) << "a redial of a linked peer's rail";
  // Past that grace period: its backoff as before. The retry drawn while hurried comes
  // first; the one after waits 200-400 ms (its third attempt).
  skew_ += 1s;
  ASSERT_TRUE(within(dialled(4), 200ms));
  EXPECT_FALSE(within(dialled(5), 100ms)) << "still hurried a grace period after the loss";

  // The last path fails: nic1, still 100 ms or more from its retry, is pulled in with nic0.
  const std::set<std::string> both{"nic0", "nic1"};
  const size_t pathless = dials_.size();
  uv_update_time(&loop_);
  rails_->lost(kInstance, "nic0", /*pathless=*/true);
  EXPECT_TRUE(within([&] { return keys_from(pathless) == both; }, 60ms)) << "not hurried";
  // And hurried while the link has no path: each failure is followed within 50 ms (nic1's
  // own backoff would be 400 ms or more).
  const size_t again = dials_.size();
  uv_update_time(&loop_);
  EXPECT_TRUE(within([&] { return keys_from(again) == both; }, 60ms)) << "hurried only once";

  // A path is back: the rail still failing goes back to its own backoff (1 s or more: its
  // sixth attempt or later).
  fail_at_once_.clear();
  const size_t back = dials_.size();
  ASSERT_TRUE(within([&] { return keys_from(back) == both; }, 200ms));
  uint64_t nic1_dial = 0;
  for (size_t i = back; i < dials_.size(); ++i) {
    if (dials_[i].rail.key == "nic1") nic1_dial = dials_[i].id;
  }
  rails_->dial_established(kInstance, "nic0");
  uv_update_time(&loop_);
  rails_->dial_failed(kInstance, "nic1", nic1_dial, "connect: no answer");
  EXPECT_FALSE(within(dialled(dials_.size() + 1), 150ms)) << "still hurried with a path back";
}

// The peer's own connection is a path too: accepting it ends the hurry. And a link reported
// without a path is hurried for a grace period at most: a late report (the engine adds a
// path the control thread already counted) must not hurry it for good.
TEST_F(RailConnectorTest, APathlessLinksHurryEndsWithThePeersConnectionOrAGracePeriod) {
  reconnect_max_ = 2000ms;
  grace_ = 400ms;
  make({two_rails()[0]});
  rails_->connect(kInstance, {"198.18.0.2:7355"});
  rails_->dial_established(kInstance, "nic0");
  auto dialled = [this](size_t n) { return [this, n] { return dials_.size() >= n; }; };
  fail_at_once_ = "unreachable";
  rails_->lost(kInstance, "nic0", /*pathless=*/false);
  skew_ += 1s;                      // past the rail's own hurry: its backoff grows
  ASSERT_TRUE(run_until_dials(4));  // retries 1-3 fail; the next waits 400-800 ms

  // The accepted path was the last: the waiting retry is pulled in. Then the peer's own
  // connection comes: the failure after that backs off as before (800 ms or more).
  size_t before = dials_.size();
  uv_update_time(&loop_);
  rails_->lost(kInstance, "", /*pathless=*/true);
  rails_->accepted(kInstance);
  EXPECT_TRUE(within(dialled(before + 1), 60ms)) << "the waiting retry was not pulled in";
  EXPECT_FALSE(within(dialled(before + 2), 150ms)) << "hurried after the peer's path came";

  // Reported without a path again, and nothing comes for a grace period: pulled in, and
  // after that grace period no longer hurried (1 s or more). nic0's retry is dialled now
  // (its NIC is up), so that it waits again.
  rails_->nic_up("nic0");
  ASSERT_EQ(dials_.size(), before + 2);
  before = dials_.size();
  uv_update_time(&loop_);
  rails_->lost(kInstance, "", /*pathless=*/true);
  skew_ += 1s;
  EXPECT_TRUE(within(dialled(before + 1), 60ms)) << "the waiting retry was not pulled in";
  EXPECT_FALSE(within(dialled(before + 2), 150ms)) << "hurried past the grace period";
}

TEST_F(RailConnectorTest, AFormingPeerWhoseFirstDialTimesOutIsDialledAgainThenLinked) {
  make({two_rails()[0]});
  now_ = std::chrono::steady_clock::now();
  rails_->connect(kInstance, {"198.18.0.2:7355"}, RailConnector::Forming{.deadline = *now_ + 10s});
  ASSERT_EQ(dials_.size(), 1u);

  // Not linked, nothing else dialled: without a deadline this would give the peer up.
  rails_->dial_failed(kInstance, "nic0", dials_[0].id, "no answer within 3500 ms");
  EXPECT_TRUE(failed_.empty());
  EXPECT_EQ(dials_.size(), 1u);  // after the backoff, not at once
  *now_ += 1s;                   // past any wait the backoff can draw (at most 20 ms)
  ASSERT_TRUE(run_until_dials(2));
  EXPECT_EQ(dials_[1].rail.key, "nic0");
  EXPECT_NE(dials_[1].id, dials_[0].id);

  // Its handshake does not finish either: again, a third attempt, which is authenticated.
  rails_->dial_failed(kInstance, "nic0", dials_[1].id, "the handshake did not finish");
  *now_ += 1s;
  ASSERT_TRUE(run_until_dials(3));
  rails_->dial_established(kInstance, "nic0");
  EXPECT_TRUE(failed_.empty());
}

TEST_F(RailConnectorTest, AFormingPeerIsGivenUpOnlyWhenItsNextAttemptWouldPassTheDeadline) {
  make({two_rails()[0]});
  const auto start = std::chrono::steady_clock::now();
  now_ = start;
  const auto deadline = start + 1s;
  rails_->connect(kInstance, {"198.18.0.2:7355"}, RailConnector::Forming{.deadline = deadline});
  ASSERT_EQ(dials_.size(), 1u);

  // 30 ms before the deadline a retry (20 ms at most) still fits.
  now_ = deadline - 30ms;
  rails_->dial_failed(kInstance, "nic0", dials_[0].id, "no answer within 3500 ms");
  EXPECT_TRUE(failed_.empty());
  *now_ += 20ms;
  ASSERT_TRUE(run_until_dials(2));

  // 5 ms before it none does (the backoff waits at least half its 20 ms): given up now,
  // with the last error.
  now_ = deadline - 5ms;
  rails_->dial_failed(kInstance, "nic0", dials_[1].id, "no answer within 3500 ms");
  ASSERT_EQ(failed_.size(), 1u);
  EXPECT_EQ(failed_[0].first, kInstance);
  EXPECT_EQ(failed_[0].second, "no answer within 3500 ms");
}

TEST_F(RailConnectorTest, AFormingPeerThatRefusesIsGivenUpAtOnce) {
  make({two_rails()[0]});
  now_ = std::chrono::steady_clock::now();
  rails_->connect(kInstance, {"198.18.0.2:7355"}, RailConnector::Forming{.deadline = *now_ + 10s});
  ASSERT_EQ(dials_.size(), 1u);
  rails_->dial_failed(kInstance, "nic0", dials_[0].id, "connect: Connection refused",
                      /*refused=*/true);
  ASSERT_EQ(failed_.size(), 1u);
  EXPECT_EQ(failed_[0].second, "connect: Connection refused");
}

TEST_F(RailConnectorTest, ACrossedDialWithoutADeadlineIsForgottenAndNoFailure) {
  make({two_rails()[0]});
  rails_->connect(kInstance, {"198.18.0.2:7355"});
  ASSERT_EQ(dials_.size(), 1u);
  EXPECT_TRUE(rails_->keeps(kInstance));  // a connection from it now crosses this one
  rails_->dial_crossed(kInstance, "nic0", dials_[0].id);
  EXPECT_FALSE(rails_->keeps(kInstance));  // the peer's own connection is the one kept
  EXPECT_TRUE(failed_.empty());
}

TEST_F(RailConnectorTest, ACrossedDialIsTriedAgainWhileTheEngineWaitsUntilThePeersConnectionCame) {
  make({two_rails()[0]});
  now_ = std::chrono::steady_clock::now();
  rails_->connect(kInstance, {"198.18.0.2:7355"}, RailConnector::Forming{.deadline = *now_ + 10s});
  ASSERT_EQ(dials_.size(), 1u);
  // The peer may keep a link it has already lost: the rail is dialled again, not dropped.
  rails_->dial_crossed(kInstance, "nic0", dials_[0].id);
  *now_ += 1s;
  ASSERT_TRUE(run_until_dials(2));
  rails_->dial_crossed(kInstance, "nic0", dials_[1].id);
  // Then the peer's own connection arrives: no more dials, no failure.
  rails_->accepted(kInstance);
  EXPECT_FALSE(rails_->keeps(kInstance));
  *now_ += 1s;
  EXPECT_FALSE(run_until_dials(3));
  EXPECT_TRUE(failed_.empty());
}

TEST_F(RailConnectorTest, AnAcceptedConnectionLeavesTheRailsThisSideKeeps) {
  make({two_rails()[0]});
  rails_->connect(kInstance, {"198.18.0.2:7355"});
  rails_->dial_established(kInstance, "nic0");
  rails_->accepted(kInstance);  // a latecomer of the peer's: this side still keeps its own
  EXPECT_TRUE(rails_->keeps(kInstance));
}

TEST(DialBackoff, EachWaitIsInTheUpperHalfOfTheCappedDoubling) {
  std::mt19937_64 rng(42);
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int64_t full = std::min<int64_t>(2000, 100LL << std::min(attempt, 16));
    std::set<int64_t> seen;
    for (int draw = 0; draw < 200; ++draw) {
      const int64_t wait = dial_backoff(attempt, 2000ms, rng).count();
      EXPECT_GE(wait, full / 2) << "attempt " << attempt;
      EXPECT_LE(wait, full) << "attempt " << attempt;
      seen.insert(wait);
    }
    EXPECT_GT(seen.size(), 10u) << "attempt " << attempt << ": not spread";
  }
  EXPECT_EQ(dial_backoff(3, 0ms, rng), 0ms);  // no cap, no wait
}

TEST(DialBackoff, TheSameSeedDrawsTheSameWaits) {
  std::mt19937_64 a(7);
  std::mt19937_64 b(7);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(dial_backoff(i % 6, 2000ms, a), dial_backoff(i % 6, 2000ms, b));
  }
}

}  // namespace
}  // namespace plexus::daemon
