// A latency-class connection's marks, read back from the socket: the DSCP in the TOS byte
// (ECN bits clear) and socket priority 6, on IPv4 and IPv6 sockets; a DSCP past 6 bits is
// refused.
#include "transports/tcp/tcp_traffic_class.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace plexus::transports {
namespace {

int read_option(int fd, int level, int name) {
  int value = -1;
  socklen_t len = sizeof(value);
  if (::getsockopt(fd, level, name, &value, &len) != 0) return -1;
  return value;
}

TEST(TcpTrafficClassTest, MarksTheDscpThenThePriorityAndRefusesADscpPastSixBits) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(read_option(fd, SOL_SOCKET, SO_PRIORITY), 0);
  EXPECT_EQ(mark_latency_class(fd, 34), "");
  EXPECT_EQ(read_option(fd, IPPROTO_IP, IP_TOS), 34 << 2);
  // Set after the TOS, which would otherwise have reset it.
  EXPECT_EQ(read_option(fd, SOL_SOCKET, SO_PRIORITY), kLatencySocketPriority);
  const std::string error = mark_latency_class(fd, 64);
  EXPECT_NE(error.find("DSCP 64"), std::string::npos) << error;
  EXPECT_EQ(read_option(fd, IPPROTO_IP, IP_TOS), 34 << 2) << "a refusal changes nothing";
  ::close(fd);

  const int fd6 = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd6 < 0) GTEST_SKIP() << "no IPv6 sockets here: the IPv4 case above ran";
  EXPECT_EQ(mark_latency_class(fd6, 46), "");
  EXPECT_EQ(read_option(fd6, IPPROTO_IPV6, IPV6_TCLASS), 46 << 2);
  EXPECT_EQ(read_option(fd6, SOL_SOCKET, SO_PRIORITY), kLatencySocketPriority);
  ::close(fd6);
}

}  // namespace
}  // namespace plexus::transports
