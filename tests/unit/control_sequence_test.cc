// Numbered control messages between two daemons (daemon/peers/control_sequence.h): delivered
// once and in order across a failover that sends the unacknowledged ones again, and
// malformed or impossible frames named.
#include "daemon/peers/control_sequence.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/frame_codec.h"

namespace plexus::daemon {
namespace {

using Clock = ControlSequence::Clock;

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
  std::string error;
  while (auto words = decoder.next(&error)) frames.push_back(std::move(*words));
  EXPECT_EQ(error, "");
  EXPECT_EQ(decoder.buffered(), 0u);
  return frames;
}

// Feeds `bytes` to `to`; returns the texts delivered.
std::vector<std::string> deliver(ControlSequence& to, const std::vector<std::byte>& bytes,
                                 std::string* error = nullptr) {
  std::vector<std::string> texts;
  for (auto& words : split(bytes)) {
    std::string why;
    auto message = to.receive(words, Clock::now(), &why);
    if (error != nullptr && !why.empty()) *error = why;
    EXPECT_TRUE(error != nullptr || why.empty()) << why;
    if (message) {
      capnp::FlatArrayMessageReader reader(*message);
      texts.emplace_back(reader.getRoot<capnp::AnyPointer>().getAs<capnp::Text>().cStr());
    }
  }
  return texts;
}

TEST(ControlSequenceTest, DeliversInOrderAndAcknowledges) {
  ControlSequence a, b;
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
  ControlSequence a, b;
  EXPECT_EQ(deliver(b, push_text(a, "join")), (std::vector<std::string>{"join"}));
  // b answers with a message of its own: it acknowledges a's too.
  EXPECT_EQ(deliver(a, push_text(b, "formed")), (std::vector<std::string>{"formed"}));
  EXPECT_FALSE(b.ack_due());
  EXPECT_EQ(a.unacknowledged(), 0u);
  EXPECT_EQ(b.unacknowledged(), 1u);
}

TEST(ControlSequenceTest, FailoverSendsAgainAndTheReceiverDropsWhatItHad) {
  ControlSequence a, b;
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

TEST(ControlSequenceTest, AGapIsAnError) {
  ControlSequence a, b;
  push_text(a, "m1");
  std::string error;
  EXPECT_TRUE(deliver(b, push_text(a, "m2"), &error).empty());
  EXPECT_NE(error.find("control message 2 arrived after 0 (a gap)"), std::string::npos) << error;
  EXPECT_EQ(b.delivered(), 0u);
}

TEST(ControlSequenceTest, AnAcknowledgementOfAMessageNeverSentIsAnError) {
  ControlSequence a, b;
  deliver(b, push_text(a, "m1"));
  ControlSequence c;  // never sent anything
  std::string error;
  deliver(c, b.ack_frame(), &error);
  EXPECT_NE(error.find("acknowledged control message 1, but only 0 were sent"), std::string::npos)
      << error;
}

TEST(ControlSequenceTest, MalformedFramesAreNamed) {
  ControlSequence s;
  std::string error;
  const capnp::word one[1] = {};
  EXPECT_FALSE(s.receive(kj::arrayPtr(one, 1), Clock::now(), &error));
  EXPECT_NE(error.find("shorter than its 16-byte header"), std::string::npos) << error;
  error.clear();
  uint64_t empty_message[2] = {1, 0};  // message 1, and no words
  EXPECT_FALSE(s.receive(kj::arrayPtr(reinterpret_cast<const capnp::word*>(empty_message), 2),
                         Clock::now(), &error));
  EXPECT_NE(error.find("control message 1 is empty"), std::string::npos) << error;
  error.clear();
  uint64_t ack_with_body[3] = {0, 0, 7};
  EXPECT_FALSE(s.receive(kj::arrayPtr(reinterpret_cast<const capnp::word*>(ack_with_body), 3),
                         Clock::now(), &error));
  EXPECT_NE(error.find("an acknowledgement that carries a message"), std::string::npos) << error;
}

TEST(ControlSequenceTest, TheWaitRestartsOnAResendAndOnProgress) {
  ControlSequence a, b;
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
  std::string error;
  const auto t3 = t0 + std::chrono::seconds(3);
  a.receive(frames.front(), t3, &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(a.unacknowledged(), 1u);
  EXPECT_EQ(*a.waiting_since(), t3);  // the peer answers: m2 waits from here
}

}  // namespace
}  // namespace plexus::daemon
