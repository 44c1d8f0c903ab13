// The kernel's smallest round trip of a real loopback TCP connection: present and
// plausible once bytes have gone both ways; 0 for what is not TCP. And whether the peer's
// kernel acknowledged what was sent (tcp_peer_silence.h), though its reader never reads.
#include "transports/tcp/tcp_path_latency.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/unit/tcp_pair.h"
#include "transports/tcp/tcp_peer_silence.h"

namespace plexus::transports {
namespace {

TEST(TcpPathLatencyTest, LoopbackConnectionReportsASmallPositiveRoundTrip) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const int server = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);
  // Ping-pong: every byte is acknowledged, so the kernel takes round-trip samples.
  char byte = 'x';
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(::write(client, &byte, 1), 1);
    ASSERT_EQ(::read(server, &byte, 1), 1);
    ASSERT_EQ(::write(server, &byte, 1), 1);
    ASSERT_EQ(::read(client, &byte, 1), 1);
  }
  const double rtt = kernel_min_round_trip_s(client);
  EXPECT_GT(rtt, 0.0);
  EXPECT_LT(rtt, 0.5) << "a loopback round trip of half a second is not a measurement";
  ::close(client);
  ::close(server);
  ::close(listener);
}

TEST(TcpPathLatencyTest, NotATcpSocketGivesZero) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  EXPECT_EQ(kernel_min_round_trip_s(fds[0]), 0.0);
  EXPECT_EQ(kernel_min_round_trip_s(-1), 0.0);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(TcpPeerAcknowledgedTest, APeerWhoseReaderNeverReadsStillAcknowledgesAHello) {
  // What a handshake timeout's log tells: a daemon stopped (SIGSTOP) still has its kernel
  // take the hello.
  auto [client, server] = test::tcp_pair();
  const char hello[64] = {};
  ASSERT_EQ(::send(client, hello, sizeof(hello), 0), static_cast<ssize_t>(sizeof(hello)));
  bool acknowledged = false;
  for (int i = 0; i < 200 && !acknowledged; ++i) {
    acknowledged = tcp_peer_acknowledged_all(client);
    if (!acknowledged) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(acknowledged);
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  EXPECT_FALSE(tcp_peer_acknowledged_all(fds[0]));  // not TCP: the kernel cannot say
  ::close(fds[0]);
  ::close(fds[1]);
  ::close(client);
  ::close(server);
}

}  // namespace
}  // namespace plexus::transports
