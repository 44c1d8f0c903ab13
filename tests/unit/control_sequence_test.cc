// Numbered control messages between two daemons (daemon/peers/control_sequence.h): delivered
// once and in order across a failover that sends the unacknowledged ones again, and
// malformed or impossible frames named; and how long a peer with no control connection is
// still tried (control_reach.h).
#include "daemon/peers/control_sequence.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/frame_codec.h"
#include "daemon/peers/control_reach.h"

namespace plexus::daemon {
namespace {

using Clock = ControlSequence::Clock;
using namespace std::chrono_literals;

std::vector<std::byte> push_text(ControlSequence& s, const std::string& text,
                                 Clock::time_point now = Clock::now()) {
  capnp::MallocMessageBuilder message;
  message.getRoot<capnp::AnyPointer>().setAs<capnp::Text>(text);
  return s.push(message, now);
}

// The frames' bodies, as the peer's FrameDecoder splits them.
std::vector<kj::Array<capnp::word>> split(const std::vector<std::byte>& bytes) {
  common::FrameDecoder decoder(1 << 20);
  decoder.append(bytes.data(), bytes.size());
  std::vector<kj::Array<capnp::word>> frames;
  auto words = decoder.next();
  for (; words.ok() && *words; words = decoder.next()) frames.push_back(std::move(**words));
  EXPECT_EQ(words.error(), "");
  EXPECT_EQ(decoder.buffered(), 0u);
  return frames;
}

// Feeds `bytes` to `to`; returns the texts delivered.
std::vector<std::string> deliver(ControlSequence& to, const std::vector<std::byte>& bytes,
                                 std::string* error = nullptr) {
  std::vector<std::string> texts;
  for (auto& words : split(bytes)) {
    auto message = to.receive(words, Clock::now());
    const std::string& why = message.error();
    if (error != nullptr && !why.empty()) *error = why;
    EXPECT_TRUE(error != nullptr || why.empty()) << why;
    if (message.ok() && *message) {
      capnp::FlatArrayMessageReader reader(**message);
      texts.emplace_back(reader.getRoot<capnp::AnyPointer>().getAs<capnp::Text>().cStr());
    }
  }
  return texts;
}

TEST(ControlSequenceTest, DeliversInOrderAndAcknowledges) {
  ControlSequence a(0xa), b(0xb);
  std::vector<std::byte> wire = push_text(a, "join");
  const std::vector<std::byte> second = push_text(a, "formed");
  wire.insert(wire.end(), second.begin(), second.end());
  EXPECT_EQ(a.unacknowledged(), 2u);
  EXPECT_EQ(deliver(b, wire), (std::vector<std::string>{"join", "formed"}));
  ASSERT_TRUE(b.ack_due());
  const std::vector<std::byte> ack = b.ack_frame();
  EXPECT_FALSE(b.ack_due());
  EXPECT_TRUE(deliver(a, ack).empty());
  EXPECT_EQ(a.unacknowledged(), 0u);
  EXPECT_FALSE(a.waiting_since().has_value());
}

TEST(ControlSequenceTest, AMessageCarriesTheAcknowledgement) {
  ControlSequence a(0xa), b(0xb);
  EXPECT_EQ(deliver(b, push_text(a, "join")), (std::vector<std::string>{"join"}));
  // b answers with a message of its own: it acknowledges a's too.
  EXPECT_EQ(deliver(a, push_text(b, "formed")), (std::vector<std::string>{"formed"}));
  EXPECT_FALSE(b.ack_due());
  EXPECT_EQ(a.unacknowledged(), 0u);
  EXPECT_EQ(b.unacknowledged(), 1u);
}

TEST(ControlSequenceTest, AByeIsReportedAndCarriesTheAcknowledgement) {
  ControlSequence a(0xa), b(0xb);
  EXPECT_EQ(deliver(b, push_text(a, "join")), (std::vector<std::string>{"join"}));
  EXPECT_TRUE(deliver(a, b.bye_frame()).empty()) << "a bye delivers nothing";
  EXPECT_TRUE(a.bye());
  EXPECT_EQ(a.unacknowledged(), 0u) << "the bye acknowledged the join";
  EXPECT_FALSE(b.ack_due());
  EXPECT_TRUE(deliver(a, push_text(b, "formed")) == std::vector<std::string>{"formed"});
  EXPECT_FALSE(a.bye()) << "only the last frame's";
  uint64_t bye_with_body[5] = {0xb, ControlSequence::kByeSeq, 0, 0, 7};
  auto carrying =
      a.receive(kj::arrayPtr(reinterpret_cast<const capnp::word*>(bye_with_body), 5), Clock::now());
  EXPECT_FALSE(carrying);
  EXPECT_FALSE(a.bye());
}

TEST(ControlSequenceTest, FailoverSendsAgainAndTheReceiverDropsWhatItHad) {
  ControlSequence a(0xa), b(0xb);
  const std::vector<std::byte> m1 = push_text(a, "m1");
  push_text(a, "m2");  // lost with the connection that failed
  push_text(a, "m3");
  EXPECT_EQ(deliver(b, m1), (std::vector<std::string>{"m1"}));
  // No acknowledgement came back before the connection failed: all three go again, and b
  // delivers only those it lacked, each once, in order.
  const std::vector<std::byte> again = a.resend(Clock::now());
  EXPECT_EQ(split(again).size(), 3u);
  EXPECT_EQ(deliver(b, again), (std::vector<std::string>{"m2", "m3"}));
  EXPECT_TRUE(deliver(b, a.resend(Clock::now())).empty());  // a third time: nothing new
  EXPECT_TRUE(deliver(a, b.ack_frame()).empty());
  EXPECT_EQ(a.unacknowledged(), 0u);
  EXPECT_EQ(b.delivered(), 3u);
}

TEST(ControlSequenceTest, AMessageReceivedAgainIsAcknowledgedAgain) {
  ControlSequence a(0xa), b(0xb);
  EXPECT_EQ(deliver(b, push_text(a, "m1")), (std::vector<std::string>{"m1"}));
  b.ack_frame();  // written to the connection that failed: a never sees it
  EXPECT_FALSE(b.ack_due());
  EXPECT_TRUE(deliver(b, a.resend(Clock::now())).empty());
  // Without a second acknowledgement a would wait, and fail connection after connection.
  ASSERT_TRUE(b.ack_due());
  EXPECT_TRUE(deliver(a, b.ack_frame()).empty());
  EXPECT_EQ(a.unacknowledged(), 0u);
}

TEST(ControlSequenceTest, AResumedReceiverDoesNotDeliverAgain) {
  ControlSequence a(0xa), b(0xb);
  EXPECT_EQ(deliver(b, push_text(a, "m1")), (std::vector<std::string>{"m1"}));
  // b gives a up before acknowledging m1, and starts again with a's stream where it stood.
  ControlSequence b2(0xc);
  b2.resume(b.received());
  EXPECT_TRUE(deliver(b2, a.resend(Clock::now())).empty());
  ASSERT_TRUE(b2.ack_due());
  EXPECT_TRUE(deliver(a, b2.ack_frame()).empty());
  EXPECT_EQ(a.unacknowledged(), 0u);
  EXPECT_EQ(deliver(b2, push_text(a, "m2")), (std::vector<std::string>{"m2"}));
}

TEST(ControlSequenceTest, AGapIsAnError) {
  ControlSequence a(0xa), b(0xb);
  deliver(b, push_text(a, "m1"));
  push_text(a, "m2");  // never arrives, and no new connection starts over from it
  std::string error;
  EXPECT_TRUE(deliver(b, push_text(a, "m3"), &error).empty());
  EXPECT_NE(error.find("control message 3 arrived after 1 (a gap)"), std::string::npos) << error;
  EXPECT_EQ(b.delivered(), 1u);
}

TEST(ControlSequenceTest, AnAcknowledgementOfAMessageNeverSentIsAnError) {
  ControlSequence a(0xa), b(0xb);
  deliver(b, push_text(a, "m1"));
  ControlSequence c(0xc);  // never sent anything
  std::string error;
  deliver(c, b.ack_frame(), &error);
  EXPECT_EQ(error, "") << "an acknowledgement of another stream is not c's concern";
  // Of c's own stream, though, it is an error.
  uint64_t forged[4] = {0xb, 0, 0xc, 1};
  auto forged_ack =
      c.receive(kj::arrayPtr(reinterpret_cast<const capnp::word*>(forged), 4), Clock::now());
  EXPECT_FALSE(forged_ack);
  EXPECT_NE(forged_ack.error().find("acknowledged control message 1, but only 0 were sent"),
            std::string::npos)
      << forged_ack.error();
}

TEST(ControlSequenceTest, ASideThatStartsOverIsTakenUpWhereItStands) {
  ControlSequence a(0xa), b(0xb);
  for (int i = 0; i < 3; ++i) deliver(b, push_text(a, "old" + std::to_string(i)));
  EXPECT_TRUE(deliver(a, b.ack_frame()).empty());
  deliver(a, push_text(b, "b1"));
  // a gives b up (its state dropped) and meets it again with a new stream: b delivers a's
  // first message of it, though its numbers start over.
  ControlSequence a2(0xa2);
  EXPECT_EQ(deliver(b, push_text(a2, "new1")), (std::vector<std::string>{"new1"}));
  ASSERT_TRUE(b.ack_due());
  EXPECT_TRUE(deliver(a2, b.ack_frame()).empty());
  EXPECT_EQ(a2.unacknowledged(), 0u);
  // b's own stream goes on: a2 takes it up at b's oldest unacknowledged message, b1.
  EXPECT_EQ(deliver(a2, b.resend(Clock::now())), (std::vector<std::string>{"b1"}));
  // A late frame of a's old stream is dropped, not taken for a third stream.
  ControlSequence a_late(0xa);
  EXPECT_TRUE(deliver(b, push_text(a_late, "late")).empty());
}

TEST(ControlSequenceTest, MalformedFramesAreNamed) {
  ControlSequence s(0x5);
  const capnp::word one[1] = {};
  auto short_frame = s.receive(kj::arrayPtr(one, 1), Clock::now());
  EXPECT_FALSE(short_frame);
  EXPECT_NE(short_frame.error().find("shorter than its 32-byte header"), std::string::npos)
      << short_frame.error();
  uint64_t empty_message[4] = {0xa, 1, 0, 0};  // message 1, and no words
  auto empty =
      s.receive(kj::arrayPtr(reinterpret_cast<const capnp::word*>(empty_message), 4), Clock::now());
  EXPECT_FALSE(empty);
  EXPECT_NE(empty.error().find("control message 1 is empty"), std::string::npos) << empty.error();
  uint64_t ack_with_body[5] = {0xa, 0, 0, 0, 7};
  auto carrying =
      s.receive(kj::arrayPtr(reinterpret_cast<const capnp::word*>(ack_with_body), 5), Clock::now());
  EXPECT_FALSE(carrying);
  EXPECT_NE(carrying.error().find("an acknowledgement that carries a message"), std::string::npos)
      << carrying.error();
}

TEST(ControlSequenceTest, TheWaitRestartsOnAResendAndOnProgress) {
  ControlSequence a(0xa), b(0xb);
  const auto t0 = Clock::now();
  const std::vector<std::byte> m1 = push_text(a, "m1", t0);
  push_text(a, "m2", t0 + std::chrono::seconds(1));
  ASSERT_TRUE(a.waiting_since().has_value());
  EXPECT_EQ(*a.waiting_since(), t0);  // since the oldest was sent
  const auto t2 = t0 + std::chrono::seconds(2);
  a.resend(t2);
  EXPECT_EQ(*a.waiting_since(), t2);
  deliver(b, m1);
  const std::vector<std::byte> ack = b.ack_frame();
  auto frames = split(ack);
  const auto t3 = t0 + std::chrono::seconds(3);
  EXPECT_EQ(a.receive(frames.front(), t3).error(), "");
  EXPECT_EQ(a.unacknowledged(), 1u);
  EXPECT_EQ(*a.waiting_since(), t3);  // the peer answers: m2 waits from here
}

TEST(ControlReachTest, UnreachableForTheGraceFromTheLossNotFromEachAttempt) {
  const Clock::time_point t0 = Clock::time_point(1000s);
  ControlReach reach;
  reach.lost(t0);
  reach.opening(t0 + 10ms);  // attempts after the loss do not restart the clock
  EXPECT_TRUE(reach.keep_trying(t0 + 1s, 2s, 200ms));
  EXPECT_FALSE(reach.due(t0 + 1s + 100ms, true));  // the retry waits its 200 ms
  EXPECT_TRUE(reach.due(t0 + 1s + 200ms, false));
  EXPECT_FALSE(reach.due(t0 + 1s + 300ms, false));  // started once
  reach.opening(t0 + 1s + 200ms);
  EXPECT_FALSE(reach.keep_trying(t0 + 2s, 2s, 200ms));  // 2 s since the loss: lost
  // Established again, then an attempt of its own: the clock starts there.
  reach.connected();
  reach.opening(t0 + 10s);
  EXPECT_TRUE(reach.keep_trying(t0 + 11s + 900ms, 2s, 200ms));
  EXPECT_FALSE(reach.keep_trying(t0 + 12s, 2s, 200ms));
  // With no retry scheduled, an attempt is due only when messages wait.
  ControlReach idle;
  EXPECT_FALSE(idle.due(t0, false));
  EXPECT_TRUE(idle.due(t0, true));
}

TEST(ControlReachTest, AMessageQueuedLongAfterTheLossGetsAGraceOfItsOwn) {
  const Clock::time_point t0 = Clock::time_point(1000s);
  ControlReach reach;
  // The connection went with a NIC 5 s ago and the attempt since has not ended (a connect
  // to a dead address takes seconds to give up). A join is queued now, the first message
  // waiting; the attempt then fails 0.5 s later: the join is kept and tried again.
  reach.lost(t0);
  reach.opening(t0);
  reach.message_waiting(t0 + 5s, true);
  EXPECT_TRUE(reach.keep_trying(t0 + 5s + 500ms, 2s, 200ms));
  reach.opening(t0 + 5s + 700ms);
  EXPECT_TRUE(reach.keep_trying(t0 + 6s + 900ms, 2s, 200ms));
  reach.opening(t0 + 7s + 100ms);
  EXPECT_FALSE(reach.keep_trying(t0 + 7s + 100ms, 2s, 200ms));
  // A peer never reached: its grace counts from the first attempt.
  ControlReach fresh;
  fresh.message_waiting(t0, true);  // nothing to restart yet
  fresh.opening(t0 + 1s);
  EXPECT_TRUE(fresh.keep_trying(t0 + 2s + 900ms, 2s, 200ms));
  EXPECT_FALSE(fresh.keep_trying(t0 + 3s, 2s, 200ms));
}

TEST(ControlReachTest, AMessageIsNotDroppedBeforeAnAttemptStartedAfterItHasFailed) {
  const Clock::time_point t0 = Clock::time_point(1000s);
  ControlReach reach;
  reach.lost(t0);
  reach.opening(t0);
  reach.message_waiting(t0 + 1s, true);  // its grace from here
  // A second queued behind it restarts nothing, but the attempt that fails past the grace
  // started before it: one more attempt, then lost.
  reach.message_waiting(t0 + 2s + 500ms, false);
  EXPECT_TRUE(reach.keep_trying(t0 + 3s + 500ms, 2s, 200ms));
  EXPECT_TRUE(reach.due(t0 + 3s + 700ms, true));
  reach.opening(t0 + 3s + 700ms);
  EXPECT_FALSE(reach.keep_trying(t0 + 4s, 2s, 200ms));
}

TEST(ControlReachTest, MessagesThatKeepComingDoNotKeepAPeerThatNeverAnswers) {
  const Clock::time_point t0 = Clock::time_point(1000s);
  ControlReach reach;
  reach.lost(t0);
  reach.opening(t0);
  reach.message_waiting(t0 + 100ms, true);
  // Each attempt takes 1.5 s to fail, and a new message comes during each: untried every
  // time, kept until twice the grace from the loss, then given up.
  Clock::time_point at = t0;
  int attempts = 0;
  for (; attempts < 10; ++attempts) {
    reach.message_waiting(at + 1s, false);
    at += 1500ms;
    if (!reach.keep_trying(at, 2s, 200ms)) break;
    at += 200ms;
    ASSERT_TRUE(reach.due(at, true));
    reach.opening(at);
  }
  EXPECT_GE(at - t0, 4s);
  EXPECT_LT(at - t0, 6s);
  EXPECT_LT(attempts, 10);
}

}  // namespace
}  // namespace plexus::daemon
