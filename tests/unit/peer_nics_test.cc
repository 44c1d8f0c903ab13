// Which NICs serve peer daemons, and the sentences that refuse a bad --peer-listen or --nics.
#include "daemon/peers/peer_nics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "common/socket_address.h"

namespace plexus::daemon {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& listen, const std::vector<std::string>& filter) {
  try {
    find_peer_nics(listen, filter);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(PeerNicsTest, AListenAddressThatIsNotIpPortIsRefusedSayingSo) {
  EXPECT_THAT(error_of("localhost", {}),
              HasSubstr("peer listen address 'localhost' is not IP:PORT"));
  EXPECT_THAT(error_of("198.18.0.1:99999", {}), HasSubstr("is not IP:PORT"));
}

TEST(PeerNicsTest, LoopbackIsNeverAPeerNic) {
  for (const PeerNic& nic : find_peer_nics("0.0.0.0:0", {})) {
    EXPECT_NE(nic.rail.name, "lo");
    EXPECT_NE(nic.address_text, "127.0.0.1");
  }
  EXPECT_TRUE(find_peer_nics("127.0.0.1:0", {}).empty());
}

TEST(PeerNicsTest, ANicThatIsNotThereIsNamedWithTheOnesThatAre) {
  const std::string error = error_of("0.0.0.0:0", {"no-such-nic9"});
  EXPECT_THAT(error, HasSubstr("--nics names no-such-nic9, which is not an up interface"));
  EXPECT_THAT(error, HasSubstr("(up: "));
  // A listen address on one interface covers only that one.
  EXPECT_THAT(error_of("127.0.0.1:0", {"no-such-nic9"}),
              HasSubstr("that --peer-listen 127.0.0.1:0 covers"));
}

TEST(SocketAddressTest, ParsesIpv4AndIpv6AndWritesThemBackTheSame) {
  for (const std::string text : {"198.18.0.1:7355", "[::1]:80", "[fe80::1]:65535", "0.0.0.0:0"}) {
    sockaddr_storage address{};
    socklen_t len = 0;
    ASSERT_TRUE(common::parse_address(text, &address, &len)) << text;
    EXPECT_EQ(common::address_text(reinterpret_cast<const sockaddr*>(&address)), text);
  }
}

TEST(SocketAddressTest, RefusesWhatIsNotIpPort) {
  for (const std::string text : {"", "198.18.0.1", "198.18.0.1:", "198.18.0.1:65536",
                                 "198.18.0.1:7x", "host:80", "[::1]80", "::1:80x"}) {
    sockaddr_storage address{};
    socklen_t len = 0;
    EXPECT_FALSE(common::parse_address(text, &address, &len)) << text;
  }
}

}  // namespace
}  // namespace plexus::daemon
