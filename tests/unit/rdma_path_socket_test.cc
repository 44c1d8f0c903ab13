// The RDMA path's set-up exchange on its socket (transports/rdma/path_socket.h), over a
// socketpair: the peer's setup message however it is split, then its ready byte, then only
// the peer going; closes and stray bytes fail with the path's messages; and check_peer_hello
// (rdma_hello.h), which ties the peer's queue pair to the socket's peer and its ring to the
// largest frame.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <optional>
#include <string>

#include "transports/rdma/path_socket.h"
#include "transports/rdma/rdma_hello.h"

namespace plexus::transports::rdma {
namespace {

struct RdmaPathSocketTest : ::testing::Test {
  int peer = -1;
  std::optional<PathSocket> socket;
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    socket.emplace(fds[0]);
    peer = fds[1];
  }
  void TearDown() override {
    if (peer >= 0) ::close(peer);
  }
  void peer_sends(const std::byte* bytes, size_t n) {
    ASSERT_EQ(::send(peer, bytes, n, 0), static_cast<ssize_t>(n));
  }
  void peer_sends_ready() {
    const std::byte ready{'R'};
    peer_sends(&ready, 1);
  }
  // The step, or nothing with `error` saying why the path fails.
  std::optional<PathSocket::Step> read() {
    auto step = socket->read();
    error = step.error();
    if (!step.ok()) return std::nullopt;
    return *step;
  }
  std::string error;
};

Hello peer_hello() {
  Hello h;
  h.qpn = 0x1234;
  h.ring_bytes = 1 << 20;
  h.receive_depth = 64;
  h.mtu = IBV_MTU_1024;
  return h;
}

TEST_F(RdmaPathSocketTest, TheHelloInPiecesThenTheReadyByteThenOnlyThePeerGoing) {
  std::array<std::byte, kHelloBytes> mine{};
  mine[0] = std::byte{7};
  ASSERT_EQ(socket->send_hello(mine), "");
  std::array<std::byte, kHelloBytes> got{};
  ASSERT_EQ(::recv(peer, got.data(), got.size(), 0), static_cast<ssize_t>(kHelloBytes));
  EXPECT_EQ(got, mine);

  EXPECT_EQ(read(), PathSocket::Step::kDrained);
  const auto hello = encode_hello(peer_hello());
  peer_sends(hello.data(), 10);
  EXPECT_EQ(read(), PathSocket::Step::kHeard);
  EXPECT_EQ(read(), PathSocket::Step::kDrained);
  peer_sends(hello.data() + 10, kHelloBytes - 10);
  peer_sends_ready();  // in the same read as the hello's end: still taken apart
  EXPECT_EQ(read(), PathSocket::Step::kHello);
  const auto decoded = decode_hello(socket->peer_hello());
  ASSERT_EQ(decoded.error(), "");
  EXPECT_EQ(decoded->qpn, 0x1234u);
  EXPECT_FALSE(socket->ready());
  EXPECT_EQ(read(), PathSocket::Step::kPeerReady);
  EXPECT_TRUE(socket->ready());
  EXPECT_EQ(read(), PathSocket::Step::kDrained);

  ::close(peer);
  peer = -1;
  EXPECT_EQ(read(), std::nullopt);
  EXPECT_TRUE(socket->peer_closed());
  EXPECT_EQ(error,
            "the peer closed the path's connection (its daemon stopped or gave this node up)");
}

TEST_F(RdmaPathSocketTest, AClosedConnectionDuringTheSetupSaysSo) {
  const auto hello = encode_hello(peer_hello());
  peer_sends(hello.data(), 20);
  ::close(peer);
  peer = -1;
  EXPECT_EQ(read(), PathSocket::Step::kHeard);
  EXPECT_EQ(read(), std::nullopt);
  EXPECT_TRUE(socket->peer_closed());
  EXPECT_EQ(error, "the peer closed the connection during the RDMA setup");
}

TEST_F(RdmaPathSocketTest, AnyByteButReadyAfterTheHelloOrAnyAfterReadyFailsThePath) {
  const auto hello = encode_hello(peer_hello());
  peer_sends(hello.data(), hello.size());
  EXPECT_EQ(read(), PathSocket::Step::kHello);
  const std::byte stray{'X'};
  peer_sends(&stray, 1);
  EXPECT_EQ(read(), std::nullopt);
  EXPECT_FALSE(socket->peer_closed());
  EXPECT_EQ(error, "unexpected bytes from the peer on the path's socket after the RDMA setup");

  ::close(peer);
  SetUp();  // a fresh pair: now a byte after the ready byte
  peer_sends(hello.data(), hello.size());
  peer_sends_ready();
  peer_sends_ready();
  EXPECT_EQ(read(), PathSocket::Step::kHello);
  EXPECT_EQ(read(), PathSocket::Step::kPeerReady);
  EXPECT_EQ(read(), std::nullopt);
  EXPECT_EQ(error, "unexpected bytes from the peer on the path's socket after the RDMA setup");
}

TEST_F(RdmaPathSocketTest, AUnixSocketHasNoIpv4Addresses) {
  EXPECT_FALSE(socket->local_ipv4());
  EXPECT_FALSE(socket->peer_ipv4());
}

TEST(RdmaPeerHelloTest, TheQueuePairGoesWhereTheSocketGoesAndItsRingHoldsTheLargestFrame) {
  Hello h = peer_hello();
  const uint32_t address = ::htonl(0xc6120001);  // 198.18.0.1
  h.gid.raw[10] = 0xff;
  h.gid.raw[11] = 0xff;
  h.gid.raw[12] = 198;
  h.gid.raw[13] = 18;
  h.gid.raw[14] = 0;
  h.gid.raw[15] = 1;
  EXPECT_EQ(check_peer_hello(h, address, 1 << 20), "");
  EXPECT_EQ(check_peer_hello(h, std::nullopt, 1 << 20), "the path's socket has no IPv4 peer");
  EXPECT_EQ(check_peer_hello(h, ::htonl(0xc6120002), 1 << 20),
            "the peer's RDMA GID ::ffff:198.18.0.1 is not its address ::ffff:198.18.0.2");
  EXPECT_EQ(check_peer_hello(h, address, (1 << 20) + 1),
            "the peer's receive ring (1048576 bytes) cannot hold the largest frame");
}

}  // namespace
}  // namespace plexus::transports::rdma
