// The links themselves (daemon/links/peer_links.h), between two PeerLinks over loopback TCP:
// a frame queued on a channel arrives once and its chunk is released; the node's figure
// reaches the peer's hook; a drain tells the peer, which publishes the path drained; a lost
// peer's chunks let their memory go, and the hooks hear of it before the handler.
#include "daemon/links/peer_links.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/peer_links_pair.h"

namespace plexus::daemon {
namespace {

using Clock = transports::ReliableChannel::Clock;
namespace wire = transports::wire;

struct LinksSide {
  LinksSide()
      : nics(NicEvents::Hooks{.nic_down = [](const std::string&, const std::string&) {},
                              .nic_up = nullptr}),
        links(LinksHandler{
                  .on_frame =
                      [this](uint64_t, const wire::DataFrameHeader& h, std::span<const std::byte>) {
                        steps.push_back(h.step);
                        return std::string();
                      },
                  .on_lost =
                      [this](uint64_t, const std::string& name, const std::string& why) {
                        events.push_back("lost " + name + ": " + why);
                      },
              },
              PeerLinks::Hooks{
                  .peer_rate =
                      [this](uint64_t peer, uint64_t rate) {
                        rates.push_back({peer, rate});
                      },
                  .nic_readable = [] {},
                  .peer_lost =
                      [this](uint64_t peer) {
                        events.push_back("peer_lost " + std::to_string(peer));
                      },
              },
              PeerLinks::Parts{.nics = &nics, .flow_policies = &policies, .published = &published},
              64 * 1024, transports::ReliableChannel::Settings{}) {}
  NicEvents nics;
  transports::FlowPolicies policies;
  LinksSnapshot published{LinksSnapshot::Telemetry{}};
  PeerLinks links;
  std::vector<uint32_t> steps;
  std::vector<std::pair<uint64_t, uint64_t>> rates;
  std::vector<std::string> events;
};

TEST(PeerLinksTest, AFrameQueuedOnAChannelArrivesOnceAndItsChunkIsReleased) {
  LinksSide a;
  LinksSide b;
  test::connect_pair(a, b);
  ASSERT_TRUE(a.links.has(2));
  EXPECT_EQ(a.links.channel(9), nullptr);
  auto memory = std::make_shared<std::vector<std::byte>>(1000, std::byte{1});
  bool released = false;
  wire::DataFrameHeader h;
  h.type = wire::FrameType::kData;
  h.comm_id = 1;
  h.step = 5;
  h.length = 1000;
  a.links.channel(2)->send(h, *memory,
                           a.links.take_token(
                               2, memory, [&released] { released = true; }, Clock::now()),
                           0);
  a.links.flush(2);
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return released; }));
  EXPECT_EQ(b.steps, std::vector<uint32_t>{5});
  EXPECT_EQ(memory.use_count(), 1);
}

TEST(PeerLinksTest, TheNodesFigureReachesThePeersHook) {
  LinksSide a;
  LinksSide b;
  test::connect_pair(a, b);
  a.links.send_node_rate(123456.0, true);
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return !b.rates.empty(); }));
  EXPECT_EQ(b.rates.front(), (std::pair<uint64_t, uint64_t>{1, 123456}));
  EXPECT_TRUE(b.steps.empty());  // not a data frame
}

TEST(PeerLinksTest, ADrainIsToldToThePeerWhichPublishesThePathDrained) {
  LinksSide a;
  LinksSide b;
  test::connect_pair(a, b);
  a.nics.set_drained("rail0", true);
  EXPECT_EQ(a.links.drain_nic("rail0", true), 1u);
  EXPECT_EQ(a.published.drained(), std::vector<std::string>{"rail0"});
  auto drained_at_b = [&] {
    b.links.publish();
    const auto peers = b.published.peers();
    return peers.size() == 1 && peers[0].paths.size() == 1 && peers[0].paths[0].state == "drained";
  };
  EXPECT_TRUE(test::pump_pair(a, b, drained_at_b));
}

TEST(PeerLinksTest, ALostPeersChunksLetTheirMemoryGoAndTheHooksHearFirst) {
  LinksSide a;
  LinksSide b;
  test::connect_pair(a, b);
  auto memory = std::make_shared<int>(0);
  bool released = false;
  wire::DataFrameHeader h;
  h.type = wire::FrameType::kData;
  a.links.channel(2)->send(h, {},
                           a.links.take_token(
                               2, memory, [&released] { released = true; }, Clock::now()),
                           0);
  a.links.lose(2, "gone");
  EXPECT_FALSE(a.links.has(2));
  EXPECT_EQ(memory.use_count(), 1);
  EXPECT_FALSE(released);
  EXPECT_EQ(a.events, (std::vector<std::string>{"peer_lost 2", "lost b: gone"}));
  EXPECT_TRUE(a.published.peers().empty());
}

}  // namespace
}  // namespace plexus::daemon
