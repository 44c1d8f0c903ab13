// Tests for daemon/engine/p2p_mailboxes: sends and recvs meet by source and tag as MPI and
// gloo match them (the oldest waiting match wins, any source, the pair's order kept), and
// the removals a departure or a failure makes.
#include "daemon/engine/p2p_mailboxes.h"

#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <vector>

namespace plexus::daemon {
namespace {

Contribution recv_of(int rank, int source, int32_t tag, uint64_t id) {
  Contribution c;
  c.rank = rank;
  c.entry.opcode = shm::Opcode::kRecv;
  c.entry.user_data = id;
  c.entry.tag = tag;
  c.entry.any_source = source == shm::kAnySource;
  c.entry.peer = source;
  return c;
}

// A send of this node, or (bytes > 0) a message from another node of that many bytes.
P2pMessage message_of(int source, int32_t tag, uint64_t id, size_t bytes = 0) {
  P2pMessage m{source, tag, std::nullopt, {}};
  if (bytes > 0) {
    m.data.resize(bytes);
    m.data[0] = std::byte(id);
  } else {
    Contribution send;
    send.rank = source;
    send.entry.opcode = shm::Opcode::kSend;
    send.entry.user_data = id;
    send.entry.tag = tag;
    m.send = send;
  }
  return m;
}

uint64_t message_id(const P2pMessage& m) {
  return m.send ? m.send->entry.user_data : std::to_integer<uint64_t>(m.data[0]);
}

TEST(P2pMailboxesTest, ARecvTakesTheOldestMessageWithItsSourceAndTagSkippingOthers) {
  P2pMailboxes boxes;
  EXPECT_FALSE(boxes.deliver(0, message_of(1, 7, 10)));
  EXPECT_FALSE(boxes.deliver(0, message_of(1, 5, 11)));
  EXPECT_FALSE(boxes.deliver(0, message_of(2, 5, 12, 64)));
  EXPECT_FALSE(boxes.deliver(0, message_of(1, 5, 13)));
  EXPECT_EQ(boxes.held_bytes(), 64u);
  auto m = boxes.post(recv_of(0, 1, 5, 1));
  ASSERT_TRUE(m);
  EXPECT_EQ(message_id(m->message), 11u);  // not 10 (tag 7), not 12 (rank 2)
  m = boxes.post(recv_of(0, 1, 5, 2));
  ASSERT_TRUE(m);
  EXPECT_EQ(message_id(m->message), 13u);  // the pair's order within a tag
  m = boxes.post(recv_of(0, 2, 5, 3));
  ASSERT_TRUE(m);
  EXPECT_EQ(message_id(m->message), 12u);
  EXPECT_EQ(boxes.held_bytes(), 0u);
  EXPECT_FALSE(boxes.post(recv_of(0, 1, 5, 4)));  // nothing left with tag 5: it waits
  EXPECT_FALSE(boxes.post(recv_of(1, 1, 7, 5)));  // message 10 waits at rank 0, not rank 1
}

TEST(P2pMailboxesTest, AnAnySourceRecvTakesTheOldestMessageWithItsTagFromAnyRank) {
  P2pMailboxes boxes;
  EXPECT_FALSE(boxes.deliver(3, message_of(2, 1, 20, 8)));
  EXPECT_FALSE(boxes.deliver(3, message_of(0, 4, 21)));
  EXPECT_FALSE(boxes.deliver(3, message_of(1, 4, 22)));
  auto m = boxes.post(recv_of(3, shm::kAnySource, 4, 1));
  ASSERT_TRUE(m);
  EXPECT_EQ(message_id(m->message), 21u);
  EXPECT_EQ(m->message.source, 0);
  m = boxes.post(recv_of(3, shm::kAnySource, 4, 2));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->message.source, 1);
  EXPECT_FALSE(boxes.post(recv_of(3, shm::kAnySource, 4, 3)));
}

TEST(P2pMailboxesTest, AMessageCompletesTheOldestWaitingRecvThatAcceptsIt) {
  P2pMailboxes boxes;
  EXPECT_FALSE(boxes.post(recv_of(0, 2, 1, 1)));                // rank 2 only
  EXPECT_FALSE(boxes.post(recv_of(0, shm::kAnySource, 1, 2)));  // anyone, tag 1
  EXPECT_FALSE(boxes.post(recv_of(0, 1, 1, 3)));                // rank 1, after the any
  EXPECT_TRUE(boxes.recv_waits(0, 1, 1));
  EXPECT_FALSE(boxes.recv_waits(0, 1, 2));
  auto m = boxes.deliver(0, message_of(1, 1, 30));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->recv.entry.user_data, 2u);  // the any-source recv is older than rank 1's
  m = boxes.deliver(0, message_of(1, 1, 31));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->recv.entry.user_data, 3u);
  EXPECT_FALSE(boxes.deliver(0, message_of(1, 2, 32)));  // tag 2: nobody waits for it
  EXPECT_TRUE(boxes.message_waits(recv_of(0, 1, 2, 9)));
  EXPECT_FALSE(boxes.message_waits(recv_of(0, 2, 2, 9)));
}

TEST(P2pMailboxesTest, OrphansComeBackInTheOrderChosenAndOnlyNamedRecvsWaitOnASource) {
  P2pMailboxes boxes;
  boxes.post(recv_of(0, 1, 0, 1));
  boxes.post(recv_of(0, 2, 0, 2));
  boxes.post(recv_of(0, shm::kAnySource, 0, 3));
  boxes.post(recv_of(1, 1, 0, 4));
  EXPECT_TRUE(boxes.recv_waits_on([](int source) { return source == 2; }));
  EXPECT_FALSE(boxes.recv_waits_on([](int source) { return source == 3; }));  // not the any
  std::vector<uint64_t> chosen;
  auto orphans = boxes.take_orphans([&](const Contribution& r) {
    if (r.entry.any_source || r.entry.peer != 1) return false;
    chosen.push_back(r.entry.user_data);
    return true;
  });
  ASSERT_EQ(orphans.size(), 2u);
  for (size_t i = 0; i < orphans.size(); ++i) EXPECT_EQ(orphans[i].entry.user_data, chosen[i]);
  // What stays still matches: rank 2's named recv is older than the any-source one.
  auto m = boxes.deliver(0, message_of(2, 0, 50));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->recv.entry.user_data, 2u);
  m = boxes.deliver(0, message_of(2, 0, 51));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->recv.entry.user_data, 3u);
  EXPECT_TRUE(boxes.empty());
}

TEST(P2pMailboxesTest, TakeRemovesWhatThePredicatesChooseAndReturnsOnlyLocalSends) {
  P2pMailboxes boxes;
  boxes.deliver(0, message_of(1, 0, 40));
  boxes.deliver(0, message_of(2, 0, 41, 100));
  boxes.deliver(1, message_of(2, 0, 42));
  boxes.post(recv_of(1, 0, 9, 43));
  P2pTaken taken = boxes.take(
      [](const Contribution& r) { return r.rank == 1; },
      [](const P2pMessage& m, int destination) { return destination == 1 || m.source == 2; });
  ASSERT_EQ(taken.recvs.size(), 1u);
  EXPECT_EQ(taken.recvs[0].entry.user_data, 43u);
  ASSERT_EQ(taken.sends.size(), 1u);  // 42; 41 came from another node: no send to fail
  EXPECT_EQ(taken.sends[0].entry.user_data, 42u);
  EXPECT_EQ(boxes.held_bytes(), 0u);
  // From any source: 41 (older than 40? no: 40 came first) went with take; 40 is the one left.
  auto m = boxes.post(recv_of(0, shm::kAnySource, 0, 44));
  ASSERT_TRUE(m);
  EXPECT_EQ(message_id(m->message), 40u);
  EXPECT_EQ(m->message.source, 1);
  EXPECT_TRUE(boxes.empty());
}

}  // namespace
}  // namespace plexus::daemon
