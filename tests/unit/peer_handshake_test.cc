// The peer handshake between two daemons: with and without a cluster secret, refusals
// that name the cause, proofs that do not transfer to another connection, and garbage.
#include "transports/peer/peer_handshake.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "common/frame_codec.h"
#include "transports/wire/peer.capnp.h"

namespace plexus::transports {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

PeerIdentity identity(uint64_t id, const std::string& name) {
  PeerIdentity me;
  me.instance_id = id;
  me.node_name = name;
  me.addresses = {"198.18.0." + std::to_string(id) + ":7355"};
  me.nics = {{"nic0", "198.18.0." + std::to_string(id), 10000}};
  return me;
}

// Moves every complete frame from `bytes` into `to`; returns the first error.
std::string deliver(std::vector<std::byte> bytes, PeerHandshake& to) {
  common::FrameDecoder decoder(kMaxHandshakeFrameBytes);
  decoder.append(bytes.data(), bytes.size());
  auto words = decoder.next();
  for (; words.ok() && *words; words = decoder.next()) {
    std::string e = to.on_frame(**words);
    if (!e.empty()) return e;
  }
  return words.error();
}

// Runs the exchange to the end; returns {connector error, acceptor error}.
std::pair<std::string, std::string> run(PeerHandshake& c, PeerHandshake& a) {
  for (int i = 0; i < 8 && !(c.done() && a.done()); ++i) {
    std::string e = deliver(c.take_output(), a);
    if (!e.empty()) return {deliver(a.take_output(), c), e};
    e = deliver(a.take_output(), c);
    if (!e.empty()) return {e, deliver(c.take_output(), a)};
  }
  return {};
}

// The connector's hello (its first output) with `change` applied on the way, framed again.
template <typename Change>
std::vector<std::byte> changed_hello(PeerHandshake& connector, Change change) {
  std::vector<std::byte> hello = connector.take_output();
  common::FrameDecoder decoder(kMaxHandshakeFrameBytes);
  decoder.append(hello.data(), hello.size());
  auto words = decoder.next();
  EXPECT_TRUE(words.ok() && *words) << words.error();
  if (!words.ok() || !*words) return {};
  capnp::FlatArrayMessageReader reader(**words);
  capnp::MallocMessageBuilder changed;
  changed.setRoot(reader.getRoot<wire::peer::HandshakeMessage>());
  change(changed.getRoot<wire::peer::HandshakeMessage>().getHello());
  return common::encode_frame(changed);
}

ClusterSecret secret(const char* text) {
  return ClusterSecret::from_bytes(std::vector<uint8_t>(text, text + std::strlen(text)));
}

TEST(PeerHandshakeTest, WithoutSecretBothEndsLearnEachOther) {
  auto c = PeerHandshake::connector(identity(1, "a"), PeerRole::kData, nullptr, 2);
  auto a = PeerHandshake::acceptor(identity(2, "b"), nullptr);
  auto [ce, ae] = run(c, a);
  EXPECT_EQ(ce, "");
  EXPECT_EQ(ae, "");
  ASSERT_TRUE(c.done());
  ASSERT_TRUE(a.done());
  EXPECT_EQ(c.peer().node_name, "b");
  EXPECT_EQ(a.peer().node_name, "a");
  EXPECT_EQ(a.peer().instance_id, 1u);
  EXPECT_EQ(a.role(), PeerRole::kData);
  ASSERT_EQ(a.peer().nics.size(), 1u);
  EXPECT_EQ(a.peer().nics[0].speed_mbps, 10000u);
  EXPECT_EQ(a.peer().addresses[0], "198.18.0.1:7355");
}

TEST(PeerHandshakeTest, SameSecretIsAccepted) {
  const ClusterSecret s = secret("correct horse battery staple");
  auto c = PeerHandshake::connector(identity(1, "a"), PeerRole::kControl, &s);
  auto a = PeerHandshake::acceptor(identity(2, "b"), &s);
  auto [ce, ae] = run(c, a);
  EXPECT_EQ(ce + ae, "");
  EXPECT_TRUE(c.done() && a.done());
}

TEST(PeerHandshakeTest, ADataConnectionGoesOverRdmaOnlyWhenBothSidesOfferIt) {
  for (bool connector_offers : {false, true}) {
    for (bool acceptor_offers : {false, true}) {
      for (PeerRole role : {PeerRole::kData, PeerRole::kControl}) {
        auto c = PeerHandshake::connector(identity(1, "a"), role, nullptr, 2, connector_offers);
        auto a = PeerHandshake::acceptor(identity(2, "b"), nullptr, acceptor_offers);
        auto [ce, ae] = run(c, a);
        ASSERT_EQ(ce + ae, "");
        const bool want = role == PeerRole::kData && connector_offers && acceptor_offers;
        EXPECT_EQ(c.rdma_agreed(), want) << connector_offers << acceptor_offers;
        EXPECT_EQ(a.rdma_agreed(), want) << connector_offers << acceptor_offers;
      }
    }
  }
}

TEST(PeerHandshakeTest, TheLatencyClassIsLearnedByTheAcceptorAndProvedAgainstChangesOnTheWay) {
  const ClusterSecret s = secret("correct horse battery staple");
  for (bool latency : {false, true}) {
    auto c =
        PeerHandshake::connector(identity(1, "a"), PeerRole::kData, &s, 2, false, false, latency);
    auto a = PeerHandshake::acceptor(identity(2, "b"), &s);
    auto [ce, ae] = run(c, a);
    ASSERT_EQ(ce + ae, "");
    EXPECT_EQ(c.latency_class(), latency);
    EXPECT_EQ(a.latency_class(), latency);
  }
  // The connector's hello, its class turned off in transit: the proofs no longer agree.
  auto c = PeerHandshake::connector(identity(1, "a"), PeerRole::kData, &s, 2, false, false, true);
  auto a = PeerHandshake::acceptor(identity(2, "b"), &s);
  EXPECT_EQ(deliver(changed_hello(c, [](auto hello) { hello.setLatency(false); }), a), "");
  auto [ce, ae] = run(c, a);
  EXPECT_FALSE(c.done() && a.done()) << "a handshake whose class was changed completed";
  EXPECT_THAT(ce + ae, AnyOf(HasSubstr("prove"), HasSubstr("changed the connection's class")));
}

TEST(PeerHandshakeTest, TransportRdmaRefusesADataConnectionThatCannotBeRdmaSayingWhy) {
  // The acceptor requires RDMA and the connector does not offer it: refused on its hello.
  {
    auto c = PeerHandshake::connector(identity(1, "a"), PeerRole::kData, nullptr, 2, false);
    auto a = PeerHandshake::acceptor(identity(2, "b"), nullptr, true, /*require_rdma=*/true);
    auto [ce, ae] = run(c, a);
    EXPECT_THAT(ae, HasSubstr("--transport rdma on node b"));
    EXPECT_THAT(ae, HasSubstr("node a does not offer it"));
    EXPECT_THAT(ce, HasSubstr("--transport rdma on node b")) << "the connector is told why";
    EXPECT_FALSE(c.done());
  }
  // The connector requires it and has no verbs port itself.
  {
    auto c = PeerHandshake::connector(identity(1, "a"), PeerRole::kData, nullptr, 2, false, true);
    auto a = PeerHandshake::acceptor(identity(2, "b"), nullptr, true);
    auto [ce, ae] = run(c, a);
    EXPECT_THAT(ce + ae, HasSubstr("no verbs port holds this node's address"));
    EXPECT_FALSE(c.done() && a.done());
  }
  // Both offer: done; a control connection is never held to it.
  for (PeerRole role : {PeerRole::kData, PeerRole::kControl}) {
    auto c =
        PeerHandshake::connector(identity(1, "a"), role, nullptr, 2, role == PeerRole::kData, true);
    auto a = PeerHandshake::acceptor(identity(2, "b"), nullptr, role == PeerRole::kData, true);
    auto [ce, ae] = run(c, a);
    EXPECT_EQ(ce + ae, "");
    EXPECT_TRUE(c.done() && a.done());
  }
}

TEST(PeerHandshakeTest, AnRdmaOfferChangedOnTheWayFailsTheProof) {
  const ClusterSecret s = secret("correct horse battery staple");
  auto c = PeerHandshake::connector(identity(1, "a"), PeerRole::kData, &s, 2, true);
  auto a = PeerHandshake::acceptor(identity(2, "b"), &s, true);
  // The connector's hello, its offer turned off in transit.
  EXPECT_EQ(deliver(changed_hello(c, [](auto hello) { hello.setRdma(false); }), a), "");
  auto [ce, ae] = run(c, a);
  EXPECT_FALSE(c.done() && a.done()) << "a handshake whose offer was changed completed";
  EXPECT_THAT(ce + ae, HasSubstr("prove"));

  // The acceptor's offer turned off on its way back: the connector's proof check fails.
  auto c2 = PeerHandshake::connector(identity(1, "a"), PeerRole::kData, &s, 2, true);
  auto a2 = PeerHandshake::acceptor(identity(2, "b"), &s, true);
  EXPECT_EQ(deliver(c2.take_output(), a2), "");
  std::vector<std::byte> reply = a2.take_output();
  common::FrameDecoder replies(kMaxHandshakeFrameBytes);
  replies.append(reply.data(), reply.size());
  std::string verdict;
  for (auto frame = replies.next(); frame.ok() && *frame; frame = replies.next()) {
    capnp::FlatArrayMessageReader r(**frame);
    capnp::MallocMessageBuilder out;
    out.setRoot(r.getRoot<wire::peer::HandshakeMessage>());
    auto root = out.getRoot<wire::peer::HandshakeMessage>();
    if (root.isHello()) root.getHello().setRdma(false);
    std::string e = deliver(common::encode_frame(out), c2);
    if (!e.empty() && verdict.empty()) verdict = e;
  }
  auto [ce2, ae2] = run(c2, a2);
  EXPECT_FALSE(c2.done() && a2.done()) << "a handshake whose reply was changed completed";
  EXPECT_THAT(verdict + ce2 + ae2, HasSubstr("prove"));
}

TEST(PeerHandshakeTest, WrongSecretIsRefusedByTheAcceptorsProofCheck) {
  const ClusterSecret mine = secret("correct horse battery staple");
  const ClusterSecret theirs = secret("incorrect horse battery staple");
  auto c = PeerHandshake::connector(identity(1, "a"), PeerRole::kData, &theirs);
  auto a = PeerHandshake::acceptor(identity(2, "b"), &mine);
  auto [ce, ae] = run(c, a);
  // The connector checks the acceptor's proof first.
  EXPECT_THAT(ce, HasSubstr("node b failed to prove it holds the cluster secret"));
  EXPECT_FALSE(a.done());
  EXPECT_FALSE(c.done());
}

TEST(PeerHandshakeTest, SecretlessPeerIsRefusedAndToldWhy) {
  const ClusterSecret s = secret("correct horse battery staple");
  auto c = PeerHandshake::connector(identity(1, "stranger"), PeerRole::kData, nullptr);
  auto a = PeerHandshake::acceptor(identity(2, "b"), &s);
  auto [ce, ae] = run(c, a);
  EXPECT_THAT(ae, HasSubstr("node stranger has no cluster secret"));
  EXPECT_THAT(ce, HasSubstr("the peer refused the connection"));
  EXPECT_FALSE(a.done());
}

TEST(PeerHandshakeTest, RecordedProofDoesNotOpenAnotherConnection) {
  const ClusterSecret s = secret("correct horse battery staple");
  auto c = PeerHandshake::connector(identity(1, "a"), PeerRole::kData, &s);
  auto a = PeerHandshake::acceptor(identity(2, "b"), &s);
  const auto hello = c.take_output();
  ASSERT_EQ(deliver(hello, a), "");
  ASSERT_EQ(deliver(a.take_output(), c), "");
  const auto proof = c.take_output();  // the connector's valid proof for this connection
  // An eavesdropper replays the hello and the proof on a new connection: the acceptor's
  // fresh nonce makes the recorded proof wrong.
  auto replayed = PeerHandshake::acceptor(identity(2, "b"), &s);
  ASSERT_EQ(deliver(hello, replayed), "");
  EXPECT_THAT(deliver(proof, replayed), HasSubstr("failed to prove"));
  // Reflected back at the connector, the acceptor's own proof is not the connector's.
  auto c3 = PeerHandshake::connector(identity(1, "a"), PeerRole::kData, &s);
  auto a3 = PeerHandshake::acceptor(identity(2, "b"), &s);
  ASSERT_EQ(deliver(c3.take_output(), a3), "");
  EXPECT_EQ(deliver(a3.take_output(), c3), "");
}

TEST(PeerHandshakeTest, WrongInstanceVersionAndGarbageAreRefused) {
  auto c = PeerHandshake::connector(identity(1, "a"), PeerRole::kData, nullptr, 7);
  auto a = PeerHandshake::acceptor(identity(2, "b"), nullptr);
  auto [ce, ae] = run(c, a);
  EXPECT_THAT(ce, HasSubstr("not the daemon this connection was meant for"));

  auto self = PeerHandshake::acceptor(identity(1, "a"), nullptr);
  auto c2 = PeerHandshake::connector(identity(1, "a"), PeerRole::kData, nullptr);
  EXPECT_THAT(deliver(c2.take_output(), self), HasSubstr("own instance id"));

  // A hello from a newer protocol.
  capnp::MallocMessageBuilder future;
  auto hello = future.initRoot<wire::peer::HandshakeMessage>().initHello();
  hello.setProtocolVersion(99);
  hello.setInstanceId(5);
  hello.setNodeName("z");
  auto a3 = PeerHandshake::acceptor(identity(2, "b"), nullptr);
  EXPECT_THAT(deliver(common::encode_frame(future), a3), HasSubstr("protocol version 99"));
  // A short nonce.
  hello.setProtocolVersion(kPeerProtocolVersion);
  hello.setNonce(kj::heapArray<kj::byte>(5));
  auto a4 = PeerHandshake::acceptor(identity(2, "b"), nullptr);
  EXPECT_THAT(deliver(common::encode_frame(future), a4), HasSubstr("nonce has 5 bytes"));
  // Words that are no message at all.
  auto a5 = PeerHandshake::acceptor(identity(2, "b"), nullptr);
  std::vector<capnp::word> junk(6);
  std::memset(static_cast<void*>(junk.data()), 0xa5, junk.size() * sizeof(capnp::word));
  EXPECT_THAT(a5.on_frame(kj::arrayPtr(junk.data(), junk.size())), HasSubstr("malformed"));
  EXPECT_TRUE(a5.failed());
}

TEST(PeerHandshakeTest, ACrossedDataConnectionIsRefusedSoTheConnectorWaitsForTheOtherOne) {
  auto c = PeerHandshake::connector(identity(2, "b"), PeerRole::kData, nullptr, 1);
  auto a = PeerHandshake::acceptor(identity(1, "a"), nullptr);
  uint64_t asked = 0;
  a.refuse_crossing([&asked](uint64_t peer) {
    asked = peer;
    return true;  // the acceptor (lower id) dials the connector itself
  });
  auto [ce, ae] = run(c, a);
  EXPECT_EQ(asked, 2u);
  EXPECT_FALSE(c.done());
  EXPECT_TRUE(c.crossed());
  EXPECT_TRUE(a.crossed());
  EXPECT_NE(ce.find("opening the data connection between the two itself"), std::string::npos) << ce;
  EXPECT_NE(ae.find("node b dialled while this node dialled it"), std::string::npos) << ae;
}

TEST(PeerHandshakeTest, ANotCrossedOrControlConnectionIsAcceptedAndNeverCrossed) {
  for (bool crosses : {false, true}) {
    const PeerRole role = crosses ? PeerRole::kControl : PeerRole::kData;
    auto c = PeerHandshake::connector(identity(2, "b"), role, nullptr, 1);
    auto a = PeerHandshake::acceptor(identity(1, "a"), nullptr);
    a.refuse_crossing([crosses](uint64_t) { return crosses; });
    auto [ce, ae] = run(c, a);
    EXPECT_EQ(ce, "");
    EXPECT_EQ(ae, "");
    EXPECT_TRUE(c.done());
    EXPECT_FALSE(c.crossed());
    EXPECT_FALSE(a.crossed());
  }
}

}  // namespace
}  // namespace plexus::transports
