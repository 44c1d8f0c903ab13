// Idle links close their paths by agreement (PeerLinks, peer_links_retire.cc): a link quiet
// for idle_close closes on both sides with nothing lost or failed, stays dormant with its
// channel, and carries frames again once a path reopens, with acknowledgements on or off; a
// link with traffic stays, and so does a pinned one; past max_open the least recently busy closes
// first; what the agreeing side sends while the asker closes goes once a connection opens
// again (acks on or off); without acknowledgements a link of two paths never closes; a
// daemon that never closes links refuses its peers' asks.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/links/link_retire.h"
#include "daemon/links/message_sender.h"
#include "tests/unit/peer_links_pair.h"
#include "tests/unit/sender_side.h"
#include "tests/unit/tcp_pair.h"
#include "transports/tcp/tcp_path.h"

namespace plexus::daemon {
namespace {

using Clock = transports::ReliableChannel::Clock;
using Side = test::SenderSide;
using std::chrono::milliseconds;
constexpr LinkRetirement kQuickClose{.idle_close = milliseconds(50), .max_open = 0};
// Agrees when asked, never asks within a test.
constexpr LinkRetirement kAgreeOnly{.idle_close = std::chrono::hours(1), .max_open = 0};

// The text is kept alive until the message is released (it may wait for a path).
bool send_text(Side& from, uint64_t to, uint32_t step, const std::string& text) {
  auto kept = std::make_shared<std::string>(text);
  return from.sender.send_message(
      to, 7, 1, step, std::span(reinterpret_cast<const std::byte*>(kept->data()), kept->size()),
      kept, nullptr);
}

// Pumps both for 400 ms (idle_close 50 ms, eight times over): the link stays open on both
// sides, and nothing closed or was lost.
void expect_stays_open(Side& a, Side& b) {
  const auto until = Clock::now() + milliseconds(400);
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return Clock::now() > until; }));
  EXPECT_TRUE(a.links.has(2));
  EXPECT_TRUE(b.links.has(1));
  EXPECT_TRUE(a.retired.empty());
  EXPECT_TRUE(b.retired.empty());
  EXPECT_TRUE(a.lost.empty());
  EXPECT_TRUE(b.lost.empty());
}

void closes_while_idle_and_reopens_losing_nothing(bool reliable) {
  Side a(reliable, kQuickClose);
  Side b(reliable, kQuickClose);
  test::connect_pair(a, b);
  ASSERT_TRUE(send_text(a, 2, 1, "before"));
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return b.frames.size() == 1; }));
  // Quiet for 50 ms past the 20 ms that make a path idle: both sides close, nothing fails.
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return !a.links.has(2) && !b.links.has(1); }));
  ASSERT_TRUE(
      test::pump_pair(a, b, [&] { return a.retired.size() == 1 && b.retired.size() == 1; }));
  EXPECT_EQ(a.retired[0], 2u);
  EXPECT_EQ(b.retired[0], 1u);
  EXPECT_TRUE(a.lost.empty()) << a.lost[0];
  EXPECT_TRUE(b.lost.empty()) << b.lost[0];
  EXPECT_EQ(a.links.size(), 1u);  // kept, dormant, with its channel
  EXPECT_EQ(a.links.open_links(), 0u);
  EXPECT_EQ(b.links.open_links(), 0u);

  // The next use opens a path again (the caller dials), and the channel goes on from where
  // it was: what is sent meanwhile waits, then arrives once, in order.
  ASSERT_TRUE(a.links.want(2, "b", Clock::now() + std::chrono::seconds(30), {"198.18.0.2:7355"}));
  EXPECT_FALSE(a.links.want(2, "b", Clock::now() + std::chrono::seconds(30)));
  ASSERT_TRUE(send_text(a, 2, 2, "after"));
  test::connect_pair(a, b);
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return b.frames.size() == 2; }));
  EXPECT_EQ(b.frames[1].step, 2u);
  EXPECT_EQ(b.text, "after");
  ASSERT_TRUE(send_text(b, 1, 3, "back"));
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return a.frames.size() == 1; }));
  EXPECT_EQ(a.text, "back");
  EXPECT_TRUE(a.lost.empty());
  EXPECT_TRUE(b.lost.empty());
  EXPECT_TRUE(a.links.has(2));
  EXPECT_TRUE(b.links.has(1));
}

TEST(LinkRetireTest, AnIdleLinkClosesByAgreementAndReopensLosingNothing) {
  closes_while_idle_and_reopens_losing_nothing(true);
}

TEST(LinkRetireTest, AnIdleLinkClosesAndReopensWithoutAcknowledgements) {
  closes_while_idle_and_reopens_losing_nothing(false);
}

TEST(LinkRetireTest, ALinkWithTrafficStaysOpen) {
  // idle_close 2 s; b sends every few ms for 2.5 s: neither side is ever quiet that long
  // (unless this process stalls for 2 s).
  constexpr LinkRetirement kTwoSeconds{.idle_close = milliseconds(2000), .max_open = 0};
  Side a(true, kTwoSeconds);
  Side b(true, kTwoSeconds);
  test::connect_pair(a, b);
  const auto until = Clock::now() + milliseconds(2500);
  uint32_t step = 0;
  size_t sent = 0;
  while (Clock::now() < until) {
    if (step++ % 4 == 0) {
      ASSERT_TRUE(send_text(b, 1, step, "tick"));
      ++sent;
    }
    ASSERT_TRUE(test::pump_pair(a, b, [&] { return a.frames.size() == sent; }));
  }
  EXPECT_TRUE(a.links.has(2));
  EXPECT_TRUE(b.links.has(1));
  EXPECT_TRUE(a.retired.empty());
  EXPECT_TRUE(b.retired.empty());
  EXPECT_TRUE(a.lost.empty());
}

TEST(LinkRetireTest, APinnedLinkNeitherAsksNorAgreesToClose) {
  Side a(true, kQuickClose);
  Side b(true, kQuickClose);
  test::connect_pair(a, b);
  a.links.pin(2, true);  // as a speed-agreement leader pins its members' links
  ASSERT_TRUE(send_text(a, 2, 1, "hello"));
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return b.frames.size() == 1; }));
  expect_stays_open(a, b);  // b asked, and was refused
  a.links.pin(2, false);    // unpinned: it closes as any idle link
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return !a.links.has(2) && !b.links.has(1); }));
  EXPECT_TRUE(a.lost.empty());
  EXPECT_TRUE(b.lost.empty());
}

TEST(LinkRetireTest, PastTheCapTheLeastRecentlyBusyClosesFirst) {
  // a links to b (peer 2) and c (peer 3), at most one with paths; idleness alone closes none.
  Side a(true, LinkRetirement{.idle_close = milliseconds(0), .max_open = 1});
  Side b(true, kAgreeOnly);
  Side c(true, kAgreeOnly);
  test::connect_pair(a, b);
  ASSERT_TRUE(send_text(a, 2, 1, "to b"));
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return b.frames.size() == 1; }));
  // One link, under the cap: it stays, quiet (idle after 20 ms) well before c's comes.
  const auto quiet_by = Clock::now() + milliseconds(80);
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return Clock::now() > quiet_by; }));
  EXPECT_TRUE(a.links.has(2));
  auto [fa, fc] = test::tcp_pair();
  a.links.add(3, "c", transports::tcp_path_opener(fa), "rail0", false, false, "");
  c.links.add(1, "a", transports::tcp_path_opener(fc), "rail0", false, false, "");
  ASSERT_TRUE(send_text(a, 3, 1, "to c"));
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (c.frames.empty() && Clock::now() < deadline) {
    for (Side* s : {&a, &b, &c}) {
      s->links.tick(Clock::now());
      s->links.poll(1);
    }
  }
  ASSERT_EQ(c.frames.size(), 1u);
  while (a.links.open_links() > 1 && Clock::now() < deadline) {
    for (Side* s : {&a, &b, &c}) {
      s->links.tick(Clock::now());
      s->links.poll(1);
    }
  }
  EXPECT_EQ(a.links.open_links(), 1u);
  EXPECT_FALSE(a.links.has(2));  // b was quiet first
  EXPECT_TRUE(a.links.has(3));
  EXPECT_FALSE(b.links.has(1));
  EXPECT_TRUE(a.lost.empty());
  EXPECT_TRUE(b.lost.empty());
  EXPECT_TRUE(c.lost.empty());
}

void sent_while_closing_goes_once_one_reopens(bool reliable) {
  Side a(reliable, kQuickClose);
  Side b(reliable, kAgreeOnly);  // only a asks
  test::connect_pair(a, b);
  ASSERT_TRUE(send_text(a, 2, 1, "hello"));
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return b.frames.size() == 1; }));
  // b agreed (it no longer counts the link as carrying frames) before a closed, and its
  // answer is on the wire: what b sends now must not follow it onto the closing path.
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return !b.links.has(1); }));
  for (int i = 0; i < 3; ++i) b.links.poll(1);
  EXPECT_FALSE(b.links.want(1, "a", Clock::now() + std::chrono::seconds(30), {"198.18.0.1:7355"}));
  ASSERT_TRUE(send_text(b, 1, 2, "meanwhile"));
  // a closes; b's paths close after it, and b asks for a connection for what it holds.
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return !b.wanted.empty(); }));
  ASSERT_EQ(b.wanted.size(), 1u);
  EXPECT_EQ(b.wanted[0].first, 1u);
  EXPECT_EQ(b.wanted[0].second, std::vector<std::string>{"198.18.0.1:7355"});
  EXPECT_TRUE(a.frames.empty());
  test::connect_pair(a, b);
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return a.frames.size() == 1; }));
  EXPECT_EQ(a.text, "meanwhile");
  EXPECT_TRUE(a.lost.empty());
  EXPECT_TRUE(b.lost.empty());
}

TEST(LinkRetireTest, WhatTheAgreeingSideSendsWhileThePathsCloseGoesOnceOneReopens) {
  sent_while_closing_goes_once_one_reopens(true);
}

TEST(LinkRetireTest, WhatTheAgreeingSideSendsWhileClosingGoesLaterWithoutAcknowledgements) {
  sent_while_closing_goes_once_one_reopens(false);
}

TEST(LinkRetireTest, WithoutAcknowledgementsALinkOfTwoPathsStaysOpen) {
  // Frames written on one path could still be on their way while the close went over the
  // other: such a link never closes while idle.
  Side a(false, kQuickClose);
  Side b(false, kQuickClose);
  test::connect_pair(a, b);
  test::connect_pair(a, b);  // a second path of the same link
  ASSERT_TRUE(send_text(a, 2, 1, "hello"));
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return b.frames.size() == 1; }));
  expect_stays_open(a, b);
}

TEST(LinkRetireTest, ADaemonThatNeverClosesLinksRefusesToo) {
  Side a(true, kQuickClose);
  Side b(true, Side::kNoRetirement);  // --link-idle-close-ms 0 --max-open-links 0
  test::connect_pair(a, b);
  ASSERT_TRUE(send_text(a, 2, 1, "hello"));
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return b.frames.size() == 1; }));
  expect_stays_open(a, b);
}

}  // namespace
}  // namespace plexus::daemon

namespace plexus::daemon {
namespace {

// LinkRetire alone: the protocol's decisions, with no sockets.
using Step = LinkRetire::Step;
using State = LinkRetire::State;
using RClock = LinkRetire::Clock;

RetireFacts quiet_facts() {
  RetireFacts f;
  f.quiet = true;
  f.paths_idle = true;
  f.may_retire = true;
  f.own_incarnation = 5;
  f.peer_incarnation = 9;
  return f;
}

TEST(LinkRetireStateTest, AsksOnceQuietForIdleCloseAndOnlyIfItMay) {
  LinkRetire r;
  const auto t0 = RClock::now();
  RetireFacts f = quiet_facts();
  EXPECT_EQ(r.tick(f, t0, milliseconds(100)), Step::kNone);  // quiet from now
  EXPECT_EQ(r.tick(f, t0 + milliseconds(99), milliseconds(100)), Step::kNone);
  f.may_retire = false;  // pinned, or an op under way
  EXPECT_EQ(r.tick(f, t0 + milliseconds(100), milliseconds(100)), Step::kNone);
  f.may_retire = true;
  EXPECT_EQ(r.tick(f, t0 + milliseconds(100), milliseconds(100)), Step::kAsk);
  EXPECT_EQ(r.tick(f, t0 + milliseconds(100), milliseconds(0)), Step::kNone);  // 0: never
  f.quiet = false;  // traffic: quiet from scratch
  EXPECT_EQ(r.tick(f, t0 + milliseconds(150), milliseconds(100)), Step::kNone);
  f.quiet = true;
  EXPECT_EQ(r.tick(f, t0 + milliseconds(200), milliseconds(100)), Step::kNone);
  EXPECT_EQ(r.tick(f, t0 + milliseconds(300), milliseconds(100)), Step::kAsk);
}

TEST(LinkRetireStateTest, TheAskerClosesOnlyIfNothingWentAndNoPathCameSinceItAsked) {
  for (int change = 0; change < 4; ++change) {
    LinkRetire r;
    RetireFacts f = quiet_facts();
    r.ask(f.frames_sent, f.paths_added, RClock::now());
    ASSERT_EQ(r.state(), State::kAsked);
    if (change == 1) f.frames_sent += 1;
    if (change == 2) f.paths_added += 1;
    if (change == 3) f.quiet = false;
    EXPECT_EQ(r.peer_agreed(f, r.ask_id() + 1), Step::kCallOff) << "an answer to another ask";
    EXPECT_EQ(r.peer_agreed(f, r.ask_id()), change == 0 ? Step::kClose : Step::kCallOff) << change;
    EXPECT_EQ(r.state(), change == 0 ? State::kAsked : State::kOpen);
  }
}

TEST(LinkRetireStateTest, CrossedAsksTheLowerIncarnationGoesOn) {
  const auto now = RClock::now();
  LinkRetire low;  // incarnation 5 against 9: its ask goes on, it ignores the peer's
  low.ask(0, 0, now);
  EXPECT_EQ(low.peer_asked(quiet_facts(), 1, false, now), Step::kNone);
  EXPECT_EQ(low.state(), State::kAsked);
  LinkRetire high;  // incarnation 9 against 5: it drops its own ask and agrees
  RetireFacts f = quiet_facts();
  std::swap(f.own_incarnation, f.peer_incarnation);
  high.ask(f.frames_sent, f.paths_added, now);
  EXPECT_EQ(high.peer_asked(f, 1, false, now), Step::kAgree);
  EXPECT_EQ(high.state(), State::kAgreed);
  EXPECT_EQ(high.peer_asked(f, 1, false, now), Step::kNone);  // a copy of the same ask
}

TEST(LinkRetireStateTest, TheAgreeingSideRefusesWhenBusyOrNeverAndAnAgreementLapses) {
  const auto now = RClock::now();
  RetireFacts busy = quiet_facts();
  busy.quiet = false;
  LinkRetire r;
  EXPECT_EQ(r.peer_asked(busy, 1, false, now), Step::kRefuse);
  EXPECT_EQ(r.peer_asked(quiet_facts(), 2, true, now), Step::kRefuse);  // both knobs 0
  EXPECT_EQ(r.peer_asked(quiet_facts(), 3, false, now), Step::kAgree);
  EXPECT_EQ(r.peer_called_off(2), Step::kNone);  // not this agreement
  EXPECT_EQ(
      r.tick(quiet_facts(), now + LinkRetire::kAgreedLimit - milliseconds(1), milliseconds(50)),
      Step::kNone);
  EXPECT_EQ(r.tick(quiet_facts(), now + LinkRetire::kAgreedLimit, milliseconds(50)),
            Step::kUnretire);
  LinkRetire s;
  ASSERT_EQ(s.peer_asked(quiet_facts(), 7, false, now), Step::kAgree);
  EXPECT_EQ(s.peer_refused(7, now, milliseconds(50)), Step::kNone);  // about its own ask: none
  EXPECT_EQ(s.peer_called_off(7), Step::kUnretire);                  // the asker called its ask off
}

TEST(LinkRetireStateTest, ARefusedAskerWaitsBeforeAskingAgain) {
  const auto now = RClock::now();
  LinkRetire r;
  r.ask(0, 0, now);
  EXPECT_EQ(r.peer_refused(r.ask_id(), now, milliseconds(50)), Step::kNone);
  EXPECT_EQ(r.state(), State::kOpen);
  EXPECT_FALSE(r.askable(now + milliseconds(999)));  // at least a second
  EXPECT_TRUE(r.askable(now + milliseconds(1000)));
  EXPECT_EQ(r.tick(quiet_facts(), now + milliseconds(999), milliseconds(50)), Step::kNone);
  EXPECT_EQ(r.tick(quiet_facts(), now + milliseconds(1000), milliseconds(50)), Step::kAsk);
}

TEST(LinkRetireStateTest, AnUnansweredAskOrAFailedPathCallsTheAskOff) {
  const auto now = RClock::now();
  LinkRetire r;
  r.ask(0, 0, now);
  EXPECT_EQ(r.tick(quiet_facts(), now + LinkRetire::kAskLimit - milliseconds(1), milliseconds(50)),
            Step::kNone);
  EXPECT_EQ(r.tick(quiet_facts(), now + LinkRetire::kAskLimit, milliseconds(50)), Step::kCallOff);
  EXPECT_EQ(r.state(), State::kOpen);
  r.ask(0, 0, now);
  EXPECT_EQ(r.path_failed(), Step::kCallOff);
  EXPECT_EQ(r.state(), State::kOpen);
  EXPECT_EQ(r.path_failed(), Step::kNone);  // nothing asked
}

}  // namespace
}  // namespace plexus::daemon
