// A join between daemons (daemon/control/join_message.h): written and read back whole, a
// shrink's parent and list with it; what a peer sends out of bounds is refused, an exclude
// list longer than the successor (a shrink that leaves out more than it keeps) is not.
#include "daemon/control/join_message.h"

#include <capnp/message.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace plexus::daemon {
namespace {

using ::testing::ElementsAre;

common::Result<JoinMessage> round_trip(const JoinMessage& join) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<node_control::Join>();
  write_join(out, join);
  return read_join(out.asReader());
}

TEST(JoinMessageTest, AShrinksJoinComesBackWholeEvenWhenItLeavesOutMoreThanItKeeps) {
  JoinMessage join{CommToken{1, 2}, 2, {1}, 5000, "ring", ShrinkOf{CommToken{9}, {0, 2, 3, 4}}};
  auto back = round_trip(join);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->token, join.token);
  EXPECT_EQ(back->nranks, 2);
  EXPECT_THAT(back->ranks, ElementsAre(1));
  EXPECT_EQ(back->timeout_ms, 5000u);
  EXPECT_EQ(back->algorithm, "ring");
  ASSERT_TRUE(back->shrink.has_value());
  EXPECT_EQ(back->shrink->parent, CommToken{9});
  EXPECT_THAT(back->shrink->excluded, ElementsAre(0, 2, 3, 4));
  EXPECT_FALSE(round_trip(JoinMessage{CommToken{1}, 4, {0}, 1, "", std::nullopt})->shrink);
}

TEST(JoinMessageTest, WhatAPeerSendsOutOfBoundsIsRefused) {
  EXPECT_FALSE(round_trip(JoinMessage{CommToken{1}, 0, {0}, 1, "", std::nullopt}).ok());
  EXPECT_FALSE(round_trip(JoinMessage{CommToken{1}, 2, {}, 1, "", std::nullopt}).ok());
  EXPECT_FALSE(round_trip(JoinMessage{CommToken{1}, 1, {0, 1}, 1, "", std::nullopt}).ok());
  EXPECT_FALSE(
      round_trip(JoinMessage{CommToken{1}, 2, {0}, 1, std::string(33, 'x'), std::nullopt}).ok());
  EXPECT_FALSE(
      round_trip(JoinMessage{CommToken{1}, int{kMaxRanks} + 1, {0}, 1, "", std::nullopt}).ok());
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<node_control::Join>();
  write_join(out, JoinMessage{CommToken{1}, 2, {0}, 1, "", ShrinkOf{CommToken{9}, {}}});
  out.setParent(kj::arrayPtr(CommToken{9}.data(), 8));  // a parent token cut short
  EXPECT_FALSE(read_join(out.asReader()).ok());
  EXPECT_EQ(round_trip(JoinMessage{CommToken{1}, 2, {0}, 1u << 31, "", std::nullopt})->timeout_ms,
            kMaxJoinTimeoutMs)
      << "a day at most";
}

}  // namespace
}  // namespace plexus::daemon
