// Revokes between daemons (daemon/control/comm_revokes.h): the revoker sends down a tree
// rooted at itself, a node passes it on before failing its own ops, once; a node known lost
// is stepped over, one lost later has its children sent it; a revoke from a stranger, or for
// a communicator not here goes no further until it forms here (then it takes effect); only the
// codes a revoke can mean are taken.
#include "daemon/control/comm_revokes.h"

#include <capnp/serialize.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace plexus::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

namespace nc = node_control;

// 20 nodes 0xA0.. (index i = 0xA0 + i), one rank each, this node `me`.
std::shared_ptr<const Comm> twenty_nodes(size_t me) {
  NodeSpan span;
  for (size_t n = 0; n < 20; ++n) {
    span.topology.node_names.push_back("n" + std::to_string(n));
    span.topology.rank_node.push_back(static_cast<int>(n));
    span.node_ids.push_back(0xA0 + n);
    span.node_addresses.push_back({"n" + std::to_string(n) + ":1"});
  }
  span.topology.my_node = static_cast<int>(me);
  span.topology.finish();
  span.comm_id = 77;
  return std::make_shared<Comm>(CommToken{4, 4}, std::vector<Comm::Member>(20), span);
}

struct Sent {
  uint64_t to;
  std::string text;
  uint64_t origin;
  uint32_t code;
};

struct Harness {
  explicit Harness(size_t me)
      : comm(twenty_nodes(me)),
        revokes(0xA0 + me,
                CommRevokes::Hooks{
                    .send =
                        [this](uint64_t instance, const std::vector<std::string>&,
                               capnp::MessageBuilder& message) {
                          auto r = message.getRoot<nc::NodeMessage>().asReader().getRevoke();
                          sent.push_back({instance, r.getText(), r.getOrigin(), r.getCode()});
                        },
                    .revoked =
                        [this](uint64_t comm_id, const std::string& text, plexus_result_t code) {
                          failed.push_back(std::to_string(comm_id) + " " + text + " " +
                                           std::to_string(code));
                        }},
                std::chrono::seconds(10)) {}
  std::vector<uint64_t> sent_to() const {
    std::vector<uint64_t> out;
    for (const Sent& s : sent) out.push_back(s.to);
    return out;
  }
  // A Revoke as node `from` passes on one from `origin`.
  void receive(uint64_t from, uint64_t origin, uint32_t code, std::shared_ptr<const Comm> of) {
    capnp::MallocMessageBuilder message;
    auto r = message.initRoot<nc::NodeMessage>().initRevoke();
    r.setToken(kj::arrayPtr(comm->token().data(), comm->token().size()));
    r.setText("why");
    r.setOrigin(origin);
    r.setFanout(8);
    r.setCode(code);
    transports::PeerIdentity peer;
    peer.instance_id = from;
    peer.node_name = "x";
    revokes.on_revoke(peer, message.getRoot<nc::NodeMessage>().asReader().getRevoke(),
                      std::move(of));
  }
  std::shared_ptr<const Comm> comm;
  std::vector<Sent> sent;
  std::vector<std::string> failed;
  CommRevokes revokes;
};

TEST(CommRevokesTest, TheRevokerSendsToItsChildrenInATreeRootedAtItselfOnce) {
  Harness h(5);  // the revoker is node 5: place 0; places 1..8 are indexes 0..4, 6..8
  h.revokes.revoke(h.comm, "rank 5 revoked it", PLEXUS_ERR_REVOKED);
  EXPECT_THAT(h.sent_to(), ElementsAre(0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA6, 0xA7, 0xA8));
  EXPECT_EQ(h.sent[0].origin, 0xA5u);
  EXPECT_EQ(h.sent[0].code, static_cast<uint32_t>(PLEXUS_ERR_REVOKED));
  EXPECT_THAT(h.failed, IsEmpty()) << "the caller failed its own ops";
  h.sent.clear();
  h.revokes.revoke(h.comm, "again", PLEXUS_ERR_REVOKED);
  EXPECT_THAT(h.sent, IsEmpty()) << "once per communicator";
}

TEST(CommRevokesTest, ANodePassesItOnThenFailsItsOwnOpsAndDropsItTheSecondTime) {
  Harness h(1);  // from origin 0 (place 0), index 1 is place 1: children places 9..16
  h.receive(0xA0, 0xA0, PLEXUS_ERR_REVOKED, h.comm);
  EXPECT_THAT(h.sent_to(), ElementsAre(0xA9, 0xAA, 0xAB, 0xAC, 0xAD, 0xAE, 0xAF, 0xB0));
  EXPECT_EQ(h.sent[0].origin, 0xA0u) << "the tree stays rooted at the revoker";
  EXPECT_THAT(h.failed, ElementsAre("77 why 13"));
  h.receive(0xA3, 0xA3, PLEXUS_ERR_REVOKED, h.comm);  // another node revoked it too
  EXPECT_EQ(h.sent.size(), 8u);
  EXPECT_EQ(h.failed.size(), 1u);
}

TEST(CommRevokesTest, ALostNodeIsSteppedOverOrHasItsChildrenToldFromHere) {
  Harness h(0);
  // Lost node 2 (0xA2): its children in the tree rooted at 0 (places 17..19) are told now.
  h.revokes.revoke(h.comm, "lost n2", PLEXUS_ERR_PEER_LOST, 0xA2);
  EXPECT_THAT(h.sent_to(), ElementsAre(0xA1, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8, 0xB1, 0xB2, 0xB3));
  EXPECT_EQ(h.sent[0].code, static_cast<uint32_t>(PLEXUS_ERR_PEER_LOST));
  h.sent.clear();
  h.revokes.lost(0xA2);
  EXPECT_THAT(h.sent, IsEmpty()) << "its children were told already";
  h.revokes.lost(0xA1);  // lost after it was sent it: its children 9..16 from here
  EXPECT_THAT(h.sent_to(), ElementsAre(0xA9, 0xAA, 0xAB, 0xAC, 0xAD, 0xAE, 0xAF, 0xB0));
  h.sent.clear();
  h.revokes.lost(0xA1);
  EXPECT_THAT(h.sent, IsEmpty()) << "once";
}

TEST(CommRevokesTest, AStrangersRevokeOrOneForACommunicatorNotHereGoesNoFurther) {
  Harness h(1);
  h.receive(0xEE, 0xA0, PLEXUS_ERR_REVOKED, h.comm);   // the sender is no member
  h.receive(0xA0, 0xEE, PLEXUS_ERR_REVOKED, h.comm);   // the origin is no member
  h.receive(0xA0, 0xA0, PLEXUS_ERR_REVOKED, nullptr);  // not formed here, or left
  EXPECT_THAT(h.sent, IsEmpty());
  EXPECT_THAT(h.failed, IsEmpty());
  // A code a revoke cannot mean is taken as a revoke.
  h.receive(0xA0, 0xA0, PLEXUS_ERR_NO_MEMORY, h.comm);
  EXPECT_THAT(h.failed, ElementsAre("77 why 13"));
}

TEST(CommRevokesTest, ARevokeThatOvertookTheFormedTakesEffectWhenTheCommunicatorForms) {
  Harness h(1);
  h.receive(0xEE, 0xA0, PLEXUS_ERR_REVOKED, nullptr);  // a stranger's first: kept, refused
  h.receive(0xA0, 0xA0, PLEXUS_ERR_REVOKED, nullptr);  // a member's, not formed here yet
  EXPECT_THAT(h.sent, IsEmpty());
  EXPECT_THAT(h.failed, IsEmpty());
  h.revokes.formed(h.comm);
  EXPECT_THAT(h.sent_to(), ElementsAre(0xA9, 0xAA, 0xAB, 0xAC, 0xAD, 0xAE, 0xAF, 0xB0));
  EXPECT_THAT(h.failed, ElementsAre("77 why 13"));
  h.revokes.formed(h.comm);  // once
  EXPECT_EQ(h.sent.size(), 8u);
  EXPECT_EQ(h.failed.size(), 1u);
}

}  // namespace
}  // namespace plexus::daemon
