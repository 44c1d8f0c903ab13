// Tests for daemon/comm_rendezvous: ranks joining a communicator by token, rejection of
// inconsistent joins, deadlines, and sessions going away mid-rendezvous.
#include "daemon/control/comm_rendezvous.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace plexus::daemon {
namespace {

using ::testing::HasSubstr;
using Clock = CommRendezvous::Clock;
using JoinResult = CommRendezvous::JoinResult;
using std::chrono::milliseconds;

CommToken make_token(uint8_t first) {
  CommToken token{};
  token[0] = first;
  token[1] = 0xab;
  token[2] = 0xcd;
  token[3] = 0xef;
  for (size_t i = 4; i < token.size(); ++i) token[i] = static_cast<uint8_t>(i * 17 + first);
  return token;
}

// Session ids, pids and request ids derived from the rank so the members can be checked.
CommRendezvous::Joiner joiner(int rank, Clock::time_point deadline, uint64_t session_offset = 0) {
  CommRendezvous::Joiner j;
  j.session_id = 100 + static_cast<uint64_t>(rank) + session_offset;
  j.pid = 5000 + rank;
  j.request_id = 70 + static_cast<uint32_t>(rank);
  j.rank = rank;
  j.deadline = deadline;
  return j;
}

void expect_formed_in_rank_order(const JoinResult& result, int nranks) {
  ASSERT_EQ(result.outcome, JoinResult::kFormed) << result.error;
  ASSERT_EQ(result.members.size(), static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    EXPECT_EQ(result.members[static_cast<size_t>(r)].rank, r);
    EXPECT_EQ(result.members[static_cast<size_t>(r)].pid, 5000 + r);
    EXPECT_EQ(result.members[static_cast<size_t>(r)].session_id, 100u + static_cast<uint64_t>(r));
    EXPECT_EQ(result.members[static_cast<size_t>(r)].request_id, 70u + static_cast<uint32_t>(r));
  }
}

TEST(CommRendezvousTest, SingleRankFormsImmediately) {
  CommRendezvous rv;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  JoinResult result = rv.join(make_token(1), 1, joiner(0, deadline));
  expect_formed_in_rank_order(result, 1);
  EXPECT_EQ(rv.pending_comms(), 0u);
  EXPECT_FALSE(rv.next_deadline().has_value());
}

TEST(CommRendezvousTest, RanksJoiningInAnyOrderFormWithMembersInRankOrder) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  std::mt19937 rng(7);
  for (int nranks : {2, 3, 4, 8, 33}) {
    for (int trial = 0; trial < 10; ++trial) {
      std::vector<int> order(static_cast<size_t>(nranks));
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      CommRendezvous rv;
      const CommToken token = make_token(static_cast<uint8_t>(nranks));
      for (size_t i = 0; i < order.size(); ++i) {
        JoinResult result = rv.join(token, nranks, joiner(order[i], deadline));
        if (i + 1 < order.size()) {
          ASSERT_EQ(result.outcome, JoinResult::kWaiting)
              << "rank " << order[i] << " (" << i + 1 << " of " << nranks << ") " << result.error;
          EXPECT_TRUE(result.members.empty());
          EXPECT_EQ(rv.pending_comms(), 1u);
        } else {
          expect_formed_in_rank_order(result, nranks);
        }
      }
      EXPECT_EQ(rv.pending_comms(), 0u);
      EXPECT_FALSE(rv.next_deadline().has_value());
    }
  }
}

TEST(CommRendezvousTest, DifferentTokensAreSeparateCommunicators) {
  CommRendezvous rv;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  const CommToken a = make_token(1);
  const CommToken b = make_token(2);
  EXPECT_EQ(rv.join(a, 2, joiner(0, deadline)).outcome, JoinResult::kWaiting);
  // Rank 0 of a different token is not a duplicate, and b's nranks may differ.
  EXPECT_EQ(rv.join(b, 3, joiner(0, deadline)).outcome, JoinResult::kWaiting);
  EXPECT_EQ(rv.pending_comms(), 2u);
  expect_formed_in_rank_order(rv.join(a, 2, joiner(1, deadline)), 2);
  EXPECT_EQ(rv.pending_comms(), 1u);
  EXPECT_EQ(rv.join(b, 3, joiner(1, deadline)).outcome, JoinResult::kWaiting);
  expect_formed_in_rank_order(rv.join(b, 3, joiner(2, deadline)), 3);
  EXPECT_EQ(rv.pending_comms(), 0u);
}

TEST(CommRendezvousTest, DuplicateRankIsRejectedNamingThePidThatHoldsIt) {
  CommRendezvous rv;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  const CommToken token = make_token(0x12);
  ASSERT_EQ(rv.join(token, 3, joiner(1, deadline)).outcome, JoinResult::kWaiting);
  CommRendezvous::Joiner again = joiner(1, deadline, 50);
  again.pid = 9999;
  JoinResult result = rv.join(token, 3, again);
  ASSERT_EQ(result.outcome, JoinResult::kRejected);
  EXPECT_THAT(result.error, HasSubstr("rank 1 of communicator 12abcdef"));
  EXPECT_THAT(result.error, HasSubstr("already taken by pid 5001"));
  EXPECT_TRUE(result.members.empty());

  // The rejection did not disturb the original joiner: the comm still forms with it.
  EXPECT_EQ(rv.join(token, 3, joiner(0, deadline)).outcome, JoinResult::kWaiting);
  JoinResult formed = rv.join(token, 3, joiner(2, deadline));
  expect_formed_in_rank_order(formed, 3);
}

TEST(CommRendezvousTest, NranksDisagreementIsRejected) {
  CommRendezvous rv;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  const CommToken token = make_token(0x34);
  ASSERT_EQ(rv.join(token, 4, joiner(0, deadline)).outcome, JoinResult::kWaiting);
  JoinResult result = rv.join(token, 2, joiner(1, deadline));
  ASSERT_EQ(result.outcome, JoinResult::kRejected);
  EXPECT_THAT(result.error, HasSubstr("rank 1 says communicator 34abcdef has 2 ranks"));
  EXPECT_THAT(result.error, HasSubstr("joined before said 4"));

  // A larger claim is refused too, even for a rank that would be out of range of the
  // first claim (it must not be used as an index).
  result = rv.join(token, 8, joiner(6, deadline));
  ASSERT_EQ(result.outcome, JoinResult::kRejected);
  EXPECT_THAT(result.error, HasSubstr("has 8 ranks"));

  // The rejected joiners did not take their ranks: the right nranks still forms.
  EXPECT_EQ(rv.join(token, 4, joiner(1, deadline)).outcome, JoinResult::kWaiting);
  EXPECT_EQ(rv.join(token, 4, joiner(2, deadline)).outcome, JoinResult::kWaiting);
  expect_formed_in_rank_order(rv.join(token, 4, joiner(3, deadline)), 4);
}

TEST(CommRendezvousTest, EarliestDeadlineExpiresEveryJoinerNamingTheMissingRanks) {
  CommRendezvous rv;
  const auto t0 = Clock::now();
  const CommToken token = make_token(0x56);
  ASSERT_EQ(rv.join(token, 4, joiner(0, t0 + milliseconds(100))).outcome, JoinResult::kWaiting);
  ASSERT_EQ(rv.join(token, 4, joiner(1, t0 + milliseconds(500))).outcome, JoinResult::kWaiting);

  // Nothing is due before the first deadline.
  EXPECT_TRUE(rv.expire(t0 + milliseconds(99)).empty());
  EXPECT_EQ(rv.pending_comms(), 1u);

  // Rank 0's deadline ends the rendezvous for rank 1 too, with the same sentence: rank 0
  // joined, so it is never named as missing.
  auto expired = rv.expire(t0 + milliseconds(200));
  ASSERT_EQ(expired.size(), 2u);
  EXPECT_EQ(expired[0].joiner.rank, 0);
  EXPECT_EQ(expired[0].joiner.pid, 5000);
  EXPECT_EQ(expired[0].joiner.request_id, 70u);
  EXPECT_EQ(expired[0].joiner.session_id, 100u);
  EXPECT_EQ(expired[1].joiner.rank, 1);
  for (const auto& e : expired) {
    EXPECT_THAT(e.message, HasSubstr("communicator 56abcdef init timed out"));
    EXPECT_THAT(e.message, HasSubstr("rank(s) 2,3 of 4 never joined"));
  }
  EXPECT_EQ(rv.pending_comms(), 0u);
  EXPECT_FALSE(rv.next_deadline().has_value());
  // A retry starts a fresh rendezvous.
  EXPECT_EQ(rv.join(token, 4, joiner(0, t0 + milliseconds(900))).outcome, JoinResult::kWaiting);
  EXPECT_EQ(rv.join(token, 4, joiner(1, t0 + milliseconds(900))).outcome, JoinResult::kWaiting);
  EXPECT_EQ(rv.join(token, 4, joiner(2, t0 + milliseconds(900))).outcome, JoinResult::kWaiting);
  expect_formed_in_rank_order(rv.join(token, 4, joiner(3, t0 + milliseconds(900))), 4);
  EXPECT_TRUE(rv.expire(t0 + std::chrono::seconds(10)).empty());
}

TEST(CommRendezvousTest, ExpireAtExactlyTheDeadlineExpires) {
  CommRendezvous rv;
  const auto t0 = Clock::now();
  ASSERT_EQ(rv.join(make_token(1), 2, joiner(1, t0)).outcome, JoinResult::kWaiting);
  auto expired = rv.expire(t0);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_THAT(expired[0].message, HasSubstr("rank(s) 0 of 2 never joined"));
  EXPECT_EQ(rv.pending_comms(), 0u) << "a communicator with nobody left must be dropped";
  EXPECT_FALSE(rv.next_deadline().has_value());
}

TEST(CommRendezvousTest, ExpireOfEveryJoinerDropsTheCommunicator) {
  CommRendezvous rv;
  const auto t0 = Clock::now();
  const CommToken token = make_token(9);
  ASSERT_EQ(rv.join(token, 3, joiner(0, t0 + milliseconds(10))).outcome, JoinResult::kWaiting);
  ASSERT_EQ(rv.join(token, 3, joiner(2, t0 + milliseconds(20))).outcome, JoinResult::kWaiting);
  auto expired = rv.expire(t0 + milliseconds(30));
  ASSERT_EQ(expired.size(), 2u);
  for (const auto& e : expired) EXPECT_THAT(e.message, HasSubstr("rank(s) 1 of 3 never joined"));
  EXPECT_EQ(rv.pending_comms(), 0u);
  // A fresh rendezvous with the same token may now use a different nranks.
  EXPECT_EQ(rv.join(token, 2, joiner(0, t0 + milliseconds(100))).outcome, JoinResult::kWaiting);
  expect_formed_in_rank_order(rv.join(token, 2, joiner(1, t0 + milliseconds(100))), 2);
}

TEST(CommRendezvousTest, MissingRankListIsBoundedForLargeCommunicators) {
  CommRendezvous rv;
  const auto t0 = Clock::now();
  ASSERT_EQ(rv.join(make_token(3), 100, joiner(0, t0)).outcome, JoinResult::kWaiting);
  auto expired = rv.expire(t0);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_THAT(expired[0].message,
              HasSubstr("rank(s) 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,... (99 in all) of 100"));
}

TEST(CommRendezvousTest, DropSessionFreesItsRanks) {
  CommRendezvous rv;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  const CommToken token = make_token(0x77);
  ASSERT_EQ(rv.join(token, 3, joiner(0, deadline)).outcome, JoinResult::kWaiting);
  ASSERT_EQ(rv.join(token, 3, joiner(1, deadline)).outcome, JoinResult::kWaiting);

  rv.drop_session(101);  // rank 1's session
  EXPECT_EQ(rv.pending_comms(), 1u);
  // Rank 1 can be taken again, by another process.
  CommRendezvous::Joiner replacement = joiner(1, deadline, 0);
  replacement.session_id = 999;
  replacement.pid = 6001;
  ASSERT_EQ(rv.join(token, 3, replacement).outcome, JoinResult::kWaiting) << "rank 1 still taken";
  JoinResult formed = rv.join(token, 3, joiner(2, deadline));
  ASSERT_EQ(formed.outcome, JoinResult::kFormed) << formed.error;
  ASSERT_EQ(formed.members.size(), 3u);
  EXPECT_EQ(formed.members[0].session_id, 100u);
  EXPECT_EQ(formed.members[1].session_id, 999u);
  EXPECT_EQ(formed.members[1].pid, 6001);
  EXPECT_EQ(formed.members[2].session_id, 102u);
}

TEST(CommRendezvousTest, DropSessionRemovesItsJoinersFromEveryCommunicator) {
  CommRendezvous rv;
  const auto t0 = Clock::now();
  CommRendezvous::Joiner in_a = joiner(0, t0 + milliseconds(10));
  CommRendezvous::Joiner in_b = joiner(1, t0 + milliseconds(20));
  in_b.session_id = in_a.session_id;  // one process joining two communicators
  ASSERT_EQ(rv.join(make_token(1), 2, in_a).outcome, JoinResult::kWaiting);
  ASSERT_EQ(rv.join(make_token(2), 3, in_b).outcome, JoinResult::kWaiting);
  ASSERT_EQ(rv.join(make_token(2), 3, joiner(2, t0 + milliseconds(30))).outcome,
            JoinResult::kWaiting);
  EXPECT_EQ(rv.pending_comms(), 2u);

  rv.drop_session(in_a.session_id);
  EXPECT_EQ(rv.pending_comms(), 1u) << "the comm left empty must be dropped";
  ASSERT_TRUE(rv.next_deadline().has_value());
  EXPECT_EQ(*rv.next_deadline(), t0 + milliseconds(30)) << "dropped joiners have no deadline";
  // Dropped joiners never come back from expire().
  auto expired = rv.expire(t0 + std::chrono::seconds(1));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].joiner.rank, 2);
  EXPECT_THAT(expired[0].message, HasSubstr("rank(s) 0,1 of 3 never joined"));
  EXPECT_EQ(rv.pending_comms(), 0u);

  rv.drop_session(12345);  // unknown session: nothing happens
  EXPECT_EQ(rv.pending_comms(), 0u);
}

TEST(CommRendezvousTest, NextDeadlineIsTheEarliestAcrossCommunicators) {
  CommRendezvous rv;
  EXPECT_FALSE(rv.next_deadline().has_value());
  const auto t0 = Clock::now();
  ASSERT_EQ(rv.join(make_token(1), 4, joiner(0, t0 + milliseconds(300))).outcome,
            JoinResult::kWaiting);
  EXPECT_EQ(*rv.next_deadline(), t0 + milliseconds(300));
  ASSERT_EQ(rv.join(make_token(2), 4, joiner(0, t0 + milliseconds(200))).outcome,
            JoinResult::kWaiting);
  EXPECT_EQ(*rv.next_deadline(), t0 + milliseconds(200));
  ASSERT_EQ(rv.join(make_token(1), 4, joiner(3, t0 + milliseconds(100))).outcome,
            JoinResult::kWaiting);
  EXPECT_EQ(*rv.next_deadline(), t0 + milliseconds(100));
  ASSERT_EQ(rv.join(make_token(2), 4, joiner(1, t0 + milliseconds(900))).outcome,
            JoinResult::kWaiting);
  EXPECT_EQ(*rv.next_deadline(), t0 + milliseconds(100));

  // Token 1's earliest deadline (100 ms) ends it with both its joiners; token 2 then
  // leads with 200 ms and ends with both of its own.
  EXPECT_EQ(rv.expire(t0 + milliseconds(150)).size(), 2u);
  EXPECT_EQ(*rv.next_deadline(), t0 + milliseconds(200));
  EXPECT_EQ(rv.expire(t0 + milliseconds(250)).size(), 2u);
  EXPECT_FALSE(rv.next_deadline().has_value());
  EXPECT_EQ(rv.pending_comms(), 0u);
}

}  // namespace
}  // namespace plexus::daemon
