// Which data connections a daemon opens to a peer (rails, the fallback, backups across
// rails), which rail a path belongs to, how the accepting side knows a backup, and the
// routing-table check a backup waits for.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "daemon/peers/rail_plan.h"
#include "daemon/peers/route_table.h"

namespace plexus::daemon {
namespace {

uint32_t ip(const char* text) {
  in_addr a{};
  EXPECT_EQ(::inet_pton(AF_INET, text, &a), 1) << text;
  return ntohl(a.s_addr);
}

// Node 0 of a 2-rail cluster: nic0 198.18.0.1/24, nic1 198.18.1.1/24.
std::vector<LocalNic> two_rails() {
  return {{"nic0", ip("198.18.0.1"), 0xFFFFFF00u}, {"nic1", ip("198.18.1.1"), 0xFFFFFF00u}};
}

TEST(RailPlanTest, EachNicTakesThePeersAddressInItsSubnetAndABackupToTheNextRail) {
  const auto rails = plan_rails(two_rails(), {"198.18.0.2:7355", "198.18.1.2:7355"});
  ASSERT_EQ(rails.size(), 4u);
  EXPECT_EQ(rails[0].key, "nic0");
  EXPECT_EQ(rails[0].peer_addresses, std::vector<std::string>{"198.18.0.2:7355"});
  EXPECT_FALSE(rails[0].backup);
  EXPECT_EQ(rails[1].key, "nic1");
  EXPECT_EQ(rails[1].peer_addresses, std::vector<std::string>{"198.18.1.2:7355"});
  EXPECT_EQ(rails[1].local_address, ip("198.18.1.1"));
  // Backups: NIC i to the peer's rail i+1, the last to the first.
  EXPECT_TRUE(rails[2].backup);
  EXPECT_EQ(rails[2].nic, "nic0");
  EXPECT_EQ(rails[2].key, "nic0>198.18.1.2:7355");
  EXPECT_EQ(rails[2].local_address, ip("198.18.0.1"));
  EXPECT_EQ(rails[2].peer_addresses, std::vector<std::string>{"198.18.1.2:7355"});
  EXPECT_TRUE(rails[3].backup);
  EXPECT_EQ(rails[3].key, "nic1>198.18.0.2:7355");
}

TEST(RailPlanTest, ThreeRailsGiveThreeBackupsInARing) {
  auto nics = two_rails();
  nics.push_back({"nic2", ip("198.18.2.1"), 0xFFFFFF00u});
  const auto rails = plan_rails(nics, {"198.18.2.2:7355", "198.18.0.2:7355", "198.18.1.2:7355"});
  ASSERT_EQ(rails.size(), 6u);
  EXPECT_EQ(rails[3].key, "nic0>198.18.1.2:7355");
  EXPECT_EQ(rails[4].key, "nic1>198.18.2.2:7355");
  EXPECT_EQ(rails[5].key, "nic2>198.18.0.2:7355");
}

TEST(RailPlanTest, OneRailHasNoBackupAndNoMatchFallsBackToAnyAddress) {
  const auto one = plan_rails({two_rails()[0]}, {"198.18.0.2:7355", "198.18.1.2:7355"});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].key, "nic0");

  const std::vector<std::string> elsewhere{"10.1.0.2:7355", "10.2.0.2:7355"};
  const auto fallback = plan_rails(two_rails(), elsewhere);
  ASSERT_EQ(fallback.size(), 1u);
  EXPECT_EQ(fallback[0].key, "");
  EXPECT_EQ(fallback[0].nic, "");
  EXPECT_EQ(fallback[0].peer_addresses, elsewhere);
  EXPECT_FALSE(fallback[0].backup);
}

TEST(RailPlanTest, NicsSharingASubnetGetNoBackupThatWouldCopyARail) {
  const std::vector<LocalNic> flat{{"eth0", ip("198.18.0.1"), 0xFFFF0000u},
                                   {"eth1", ip("198.18.1.1"), 0xFFFF0000u}};
  const auto rails = plan_rails(flat, {"198.18.0.2:7355", "198.18.1.2:7355"});
  ASSERT_EQ(rails.size(), 2u);  // both NICs to the peer's first address; nothing across
  for (const Rail& rail : rails) EXPECT_FALSE(rail.backup) << rail.key;
}

TEST(RailPlanTest, TheAcceptingSideKnowsABackupByItsRemoteEndsSubnet) {
  const auto nics = two_rails();
  EXPECT_TRUE(crosses_rails(nics, ip("198.18.1.1"), ip("198.18.0.2")));   // accepted on nic1
  EXPECT_TRUE(crosses_rails(nics, ip("198.18.0.1"), ip("198.18.1.3")));   // accepted on nic0
  EXPECT_FALSE(crosses_rails(nics, ip("198.18.0.1"), ip("198.18.0.2")));  // its own rail
  EXPECT_FALSE(crosses_rails(nics, ip("198.18.0.1"), ip("10.9.9.9")));    // routed, no rail
  EXPECT_FALSE(crosses_rails(nics, ip("127.0.0.1"), ip("198.18.0.2")));   // not a rail NIC
}

// A /proc/net/route line: addresses as the kernel prints them (its network-order word in
// hex), made here the same way so the test holds on any byte order.
std::string route_line(const char* nic, const char* destination, const char* mask, unsigned flags) {
  in_addr d{};
  in_addr m{};
  ::inet_pton(AF_INET, destination, &d);
  ::inet_pton(AF_INET, mask, &m);
  char line[160];
  std::snprintf(line, sizeof(line), "%s\t%08X\t00000000\t%04X\t0\t0\t100\t%08X\t0\t0\t0\n", nic,
                d.s_addr, flags, m.s_addr);
  return line;
}

TEST(RouteTableTest, ARouteOverTheNicThatCoversTheAddressIsFound) {
  std::istringstream text(
      "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
      route_line("nic0", "198.18.0.0", "255.255.255.0", 0x1) +
      route_line("nic0", "198.18.1.0", "255.255.255.0", 0x3) +  // the spine, via a gateway
      route_line("nic1", "198.18.1.0", "255.255.255.0", 0x1) +
      route_line("nic1", "198.18.9.0", "255.255.255.0", 0x0) +  // not up
      "garbage\n");
  const RouteTable table = RouteTable::parse(text);
  EXPECT_EQ(table.size(), 3u);
  EXPECT_TRUE(table.covers("nic0", "198.18.1.2:7355"));
  EXPECT_TRUE(table.covers("nic0", "198.18.0.7"));
  EXPECT_FALSE(table.covers("nic1", "198.18.0.2:7355"));  // no route over nic1 to rail 0
  EXPECT_FALSE(table.covers("nic1", "198.18.9.1:7355"));  // a route that is down
  EXPECT_FALSE(table.covers("nic0", "not an address"));

  std::istringstream with_default(
      "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
      route_line("nic1", "0.0.0.0", "0.0.0.0", 0x3));
  EXPECT_TRUE(RouteTable::parse(with_default).covers("nic1", "198.18.0.2:7355"));
}

}  // namespace
}  // namespace plexus::daemon
