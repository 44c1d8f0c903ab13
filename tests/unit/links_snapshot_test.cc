// What the links publish for other threads (daemon/links/links_snapshot.h): the last publish
// is what readers get, and a path's telemetry windows share their NIC's, off when the width
// is zero.
#include "daemon/links/links_snapshot.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace plexus::daemon {
namespace {

TEST(LinksSnapshotTest, ReadersGetTheLastPublishFromAnyThread) {
  LinksSnapshot published(LinksSnapshot::Telemetry{});
  EXPECT_TRUE(published.peers().empty());
  LinksSnapshot::PeerInfo peer;
  peer.instance = 2;
  peer.name = "b";
  published.publish({peer}, {"rail1"});
  std::vector<LinksSnapshot::PeerInfo> peers;
  std::vector<std::string> drained;
  std::thread reader([&] {
    peers = published.peers();
    drained = published.drained();
  });
  reader.join();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].name, "b");
  EXPECT_EQ(drained, std::vector<std::string>{"rail1"});
}

TEST(LinksSnapshotTest, APathsWindowsShareTheirNicsAndAreOffWithAZeroWidth) {
  LinksSnapshot off(LinksSnapshot::Telemetry{});
  auto [path, nic] = off.windows_for_path("rail0");
  EXPECT_EQ(path, nullptr);
  EXPECT_EQ(nic, nullptr);
  EXPECT_TRUE(off.nic_windows().empty());

  LinksSnapshot on(LinksSnapshot::Telemetry{std::chrono::milliseconds(100), 10});
  auto [first, first_nic] = on.windows_for_path("rail0");
  auto [second, second_nic] = on.windows_for_path("rail0");
  auto [unknown, unknown_nic] = on.windows_for_path("");
  ASSERT_NE(first, nullptr);
  EXPECT_NE(first, second);
  EXPECT_EQ(first_nic, second_nic);
  EXPECT_NE(first_nic, unknown_nic);
  const auto windows = on.nic_windows();
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows.at("rail0"), first_nic);
  EXPECT_EQ(windows.at("?"), unknown_nic);
}

}  // namespace
}  // namespace plexus::daemon
