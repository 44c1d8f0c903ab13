// A socket's congestion control, set by name: an available one takes, an unknown one is
// refused with the kernel's list.
#include "transports/tcp/tcp_congestion.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace plexus::transports {
namespace {

TEST(TcpCongestionTest, SetsAnAvailableAlgorithmAndNamesTheChoicesOtherwise) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(set_congestion_control(fd, "reno"), "");  // built into every Linux kernel
  EXPECT_EQ(congestion_control(fd), "reno");
  const std::string error = set_congestion_control(fd, "no-such-cc");
  EXPECT_NE(error.find("'no-such-cc'"), std::string::npos) << error;
  EXPECT_NE(error.find("reno"), std::string::npos) << "the available ones are named: " << error;
  EXPECT_EQ(congestion_control(fd), "reno");
  ::close(fd);
}

}  // namespace
}  // namespace plexus::transports
