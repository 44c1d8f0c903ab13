// The weight relay between nodes without daemons: three relays, each over NodeLinks joined by
// loopback TCP, driven by hand (no ticks, so a link stays up however quiet its peer). Shows
// that a refusal that comes after every range was sent still passes the node over, that a
// node that refuses gets a window of ranges rather than the whole version, that a node lost
// after its sender's forward ended is passed over again, that a node with the version whole
// ends a forward sent it again, that a refusal for room is not remembered, and that an
// arrival nothing comes for is given up with its memory.
#include "daemon/engine/weight_relay.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/links/node_links.h"
#include "tests/unit/tcp_pair.h"
#include "transports/tcp/tcp_path.h"

namespace plexus::daemon {
namespace {

constexpr uint64_t kRelay = 0x5eed;

struct RelayNode {
  std::unique_ptr<NodeLinks> links;
  std::unique_ptr<WeightRelay> relay;
  std::shared_ptr<weights::WeightMemory> memory =
      std::make_shared<weights::WeightMemory>(uint64_t{1} << 30);
  std::vector<std::shared_ptr<const weights::Version>> arrived;
  uint64_t unplaced_bytes = 0;  // payload bytes that came through on_frame (not placed)
  uint64_t newest_seen = 0;     // the newest version a frame came through on_frame for
};

// Nodes 0, 1 and 2 ("a", "b", "c"), every pair linked; arrivals silent for `idle` are dropped.
struct Relays {
  std::vector<RelayNode> nodes = std::vector<RelayNode>(3);

  explicit Relays(std::chrono::milliseconds idle = std::chrono::minutes(10)) {
    for (size_t n = 0; n < nodes.size(); ++n) {
      RelayNode& node = nodes[n];
      NodeLinks::Handler handler;
      handler.on_frame = [&node](uint64_t peer, const transports::wire::DataFrameHeader& h,
                                 std::span<const std::byte> payload) {
        node.unplaced_bytes += payload.size();
        node.newest_seen = std::max(node.newest_seen, transports::wire::weights_version(h.op_seq));
        return node.relay->on_frame(peer, h, payload);
      };
      handler.place = [&node](uint64_t peer, const transports::wire::DataFrameHeader& h) {
        return node.relay->place(peer, h);
      };
      handler.on_placed = [&node](uint64_t peer, const transports::wire::DataFrameHeader& h) {
        return node.relay->on_placed(peer, h);
      };
      handler.on_lost = [&node](uint64_t peer, const std::string&, const std::string&) {
        node.relay->peer_lost(peer);
      };
      // As a daemon with one NIC runs them: no channel acknowledgements, so a frame is done
      // once written, whether or not the peer has read it.
      transports::ReliableChannel::Settings channel;
      channel.reliable = false;
      node.links = std::make_unique<NodeLinks>(handler, NodeLinks::kDefaultChunkBytes, channel);
      node.relay = std::make_unique<WeightRelay>(
          *node.links,
          WeightRelay::Hooks{.arrived =
                                 [&node](uint64_t, std::shared_ptr<const weights::Version> v) {
                                   node.arrived.push_back(std::move(v));
                                 },
                             .reach = [](const WeightRelay::NodeRef&) {}},
          idle);
      node.relay->set_memory(node.memory);
    }
    for (uint64_t x = 0; x < nodes.size(); ++x) {
      for (uint64_t y = x + 1; y < nodes.size(); ++y) {
        auto [fx, fy] = test::tcp_pair();
        // Fixed socket buffers (no autotuning): what the kernel holds of a link is bounded
        // whatever this machine's settings.
        for (int fd : {fx, fy}) {
          const int bytes = 256 << 10;
          EXPECT_EQ(::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes), 0);
          EXPECT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes), 0);
        }
        nodes[x].links->add(y, name(y), transports::tcp_path_opener(fx));
        nodes[y].links->add(x, name(x), transports::tcp_path_opener(fy));
      }
    }
  }
  static std::string name(uint64_t n) { return std::string(1, static_cast<char>('a' + n)); }
  static WeightRelay::NodeRef ref(uint64_t n) { return {.instance = n, .name = name(n)}; }

  // Polls `which` nodes' links and relays until `done` (bounded); whether it was.
  bool pump(const std::vector<size_t>& which, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      for (size_t n : which) {
        nodes[n].links->poll(0);
        nodes[n].relay->poll();
      }
    }
    return done();
  }
};

// A version of one tensor of `bytes`, every byte from its position and `number`.
std::shared_ptr<const weights::Version> version(weights::WeightMemory& memory, uint64_t number,
                                                uint64_t bytes) {
  auto v = std::make_shared<weights::Version>();
  v->number = number;
  v->shards = 1;
  v->bytes = bytes;
  auto shard = std::make_shared<weights::Shard>();
  shard->tensors.push_back({"w", 0, bytes});
  shard->buffer = memory.allocate(bytes).take();
  for (uint64_t i = 0; i < bytes; ++i) {
    shard->buffer->data()[i] = static_cast<std::byte>(i * 7 + number);
  }
  v->index["w"] = {0, 0};
  v->parts.push_back(std::move(shard));
  return v;
}

// Whether `got` is version `want`, byte for byte (one tensor, as version() makes).
testing::AssertionResult same_version(const weights::Version& got, const weights::Version& want) {
  if (got.number != want.number || got.bytes != want.bytes) {
    return testing::AssertionFailure() << "version " << got.number << " of " << got.bytes
                                       << " bytes, not " << want.number << " of " << want.bytes;
  }
  if (std::memcmp(got.parts[0]->buffer->data(), want.parts[0]->buffer->data(), want.bytes) != 0) {
    return testing::AssertionFailure() << "its bytes differ";
  }
  return testing::AssertionSuccess();
}

// What a node that refuses a version (or has it whole) may still get of one of 80 MiB: the
// sender's window (WeightRelay::kRangesAhead ranges, 32 MiB) and what the sockets held when
// the refusal came (their buffers fixed at 256 KiB), with room to spare; 80 MiB without it.
constexpr uint64_t kMostPastARefusal = uint64_t{40} << 20;

// Node b subscribes to nothing, so it refuses the version once its header is whole; a sent
// everything to b before b read a byte (the version fits the sockets' buffers), so the refusal
// finds a's forward to b finished. a passes b over from its finished forwards: c gets the
// version exact.
TEST(WeightRelayTest, ARefusalAfterEveryRangeWasSentStillPassesTheNodeOver) {
  Relays r;
  r.nodes[2].relay->accept(kRelay);
  // Small enough for the sockets' buffers (256 KiB, fixed above).
  auto v = version(*r.nodes[0].memory, 1, (16u << 10) + 5);
  r.nodes[0].relay->push(kRelay, v, {Relays::ref(1), Relays::ref(2)});
  ASSERT_TRUE(r.pump({0}, [&] { return !r.nodes[0].relay->busy_with(1); }))
      << "a's forward to b never finished";
  ASSERT_TRUE(r.pump({0, 1, 2}, [&] { return !r.nodes[2].arrived.empty(); }))
      << "c never got the version b refused";
  EXPECT_TRUE(r.nodes[1].arrived.empty());
  EXPECT_TRUE(same_version(*r.nodes[2].arrived[0], *v));
}

// b refuses a version of 80 MiB as soon as its header is whole (it subscribes to nothing). a
// has at most WeightRelay::kRangesAhead ranges (32 MiB) on b's link unreleased, so after the
// refusal b gets only what was already on it, not the rest of the version (with the sockets'
// buffers fixed at 256 KiB, all that is under 40 MiB); c gets the version exact.
TEST(WeightRelayTest, ANodeThatRefusesGetsAWindowOfRangesNotTheWholeVersion) {
  Relays r;
  r.nodes[2].relay->accept(kRelay);
  auto v = version(*r.nodes[0].memory, 1, 80u << 20);
  r.nodes[0].relay->push(kRelay, v, {Relays::ref(1), Relays::ref(2)});
  ASSERT_TRUE(r.pump({0, 1, 2}, [&] { return !r.nodes[2].arrived.empty(); }))
      << "c never got the version b refused";
  // Everything a had queued for b is in once a frame of a later version is (one flow, one
  // path: in order).
  r.nodes[0].relay->push(kRelay, version(*r.nodes[0].memory, 2, 4096), {Relays::ref(1)});
  ASSERT_TRUE(r.pump({0, 1, 2}, [&] { return r.nodes[1].newest_seen == 2; }))
      << "b never saw version 2";
  EXPECT_TRUE(r.nodes[1].arrived.empty());
  EXPECT_LT(r.nodes[1].unplaced_bytes, kMostPastARefusal)
      << "b, which refused the version at its header, got most of it anyway";
  EXPECT_TRUE(same_version(*r.nodes[2].arrived[0], *v));
}

// a's forward to b ends once a wrote b the whole 80 MiB version, but b cannot have passed it
// all on to c (c reads nothing yet: b has at most its window and the sockets' buffers on the
// way). Then b is lost: a sends the version down the chain past b again, and c gets it exact.
TEST(WeightRelayTest, ANodeLostAfterItHadTheWholeVersionIsPassedOverAgain) {
  Relays r;
  r.nodes[1].relay->accept(kRelay);
  r.nodes[2].relay->accept(kRelay);
  auto v = version(*r.nodes[0].memory, 1, 80u << 20);
  r.nodes[0].relay->push(kRelay, v, {Relays::ref(1), Relays::ref(2)});
  ASSERT_TRUE(r.pump({0, 1}, [&] { return !r.nodes[0].relay->busy_with(1); }))
      << "a's forward to b never ended";
  ASSERT_TRUE(r.nodes[2].arrived.empty());
  r.nodes[0].links->peer_gone(1, "the test lost it");
  r.nodes[2].links->peer_gone(1, "the test lost it");
  ASSERT_TRUE(r.pump({0, 2}, [&] { return !r.nodes[2].arrived.empty(); }))
      << "c never got the version b was passing on when it was lost";
  EXPECT_TRUE(same_version(*r.nodes[2].arrived[0], *v));
}

// A node that has a version whole says so when it is sent the version again (a late node's
// push, a chain repaired past a lost node): the sender stops there, as the chain after that
// node is its own, rather than send it every range again and go on down the chain.
TEST(WeightRelayTest, ANodeThatHasTheVersionWholeEndsAForwardSentItAgain) {
  Relays r;
  r.nodes[1].relay->accept(kRelay);
  r.nodes[2].relay->accept(kRelay);
  auto v = version(*r.nodes[0].memory, 1, 80u << 20);
  r.nodes[0].relay->push(kRelay, v, {Relays::ref(1)});
  ASSERT_TRUE(r.pump({0, 1}, [&] { return !r.nodes[1].arrived.empty(); }));
  r.nodes[1].unplaced_bytes = 0;
  r.nodes[0].relay->push(kRelay, v, {Relays::ref(1), Relays::ref(2)});
  ASSERT_TRUE(r.pump({0, 1, 2}, [&] {
    return !r.nodes[0].relay->busy_with(1) && !r.nodes[0].relay->busy_with(2);
  })) << "a's forward never ended";
  EXPECT_TRUE(r.nodes[2].arrived.empty()) << "a went on past b, which had the version whole";
  EXPECT_EQ(r.nodes[2].unplaced_bytes, 0u);
  EXPECT_LT(r.nodes[1].unplaced_bytes, kMostPastARefusal)
      << "b, which had the version, took most of it again";
}

// A node whose store had no room refuses a version; sent again once it has room (here a store
// of its own with more), it takes it: a refusal is not remembered as if it had the version.
TEST(WeightRelayTest, AVersionRefusedForRoomIsTakenWhenSentAgainWithRoom) {
  Relays r;
  r.nodes[1].relay->accept(kRelay);
  r.nodes[1].relay->set_memory(std::make_shared<weights::WeightMemory>(uint64_t{1} << 20));
  auto v = version(*r.nodes[0].memory, 1, 4u << 20);
  r.nodes[0].relay->push(kRelay, v, {Relays::ref(1)});
  ASSERT_TRUE(r.pump({0, 1}, [&] { return !r.nodes[0].relay->busy_with(1); }));
  ASSERT_TRUE(r.nodes[1].arrived.empty()) << "b kept 4 MiB in a store of 1 MiB";
  r.nodes[1].relay->set_memory(r.nodes[1].memory);
  r.nodes[0].relay->push(kRelay, v, {Relays::ref(1)});
  ASSERT_TRUE(r.pump({0, 1}, [&] { return !r.nodes[1].arrived.empty(); }))
      << "b never took the version it had refused for room";
  EXPECT_TRUE(same_version(*r.nodes[1].arrived[0], *v));
}

// a sends b a version of 64 MiB but is polled only until b has part of it, then never again:
// its link stays up (nothing ticks), and b hears nothing more. Past its idle time b gives the
// version up, and its buffer goes back to the store's memory.
TEST(WeightRelayTest, AnArrivalNothingComesForIsGivenUpWithItsMemory) {
  Relays r(std::chrono::milliseconds(200));
  r.nodes[1].relay->accept(kRelay);
  auto v = version(*r.nodes[0].memory, 1, 64u << 20);
  r.nodes[0].relay->push(kRelay, v, {Relays::ref(1)});
  ASSERT_TRUE(r.pump({0, 1}, [&] { return r.nodes[1].memory->held() > 0; }))
      << "b never began the version";
  EXPECT_EQ(r.nodes[1].relay->arriving(), 1u);
  EXPECT_TRUE(r.pump({1}, [&] { return r.nodes[1].relay->arriving() == 0; }))
      << "b kept the silent arrival";
  EXPECT_EQ(r.nodes[1].memory->held(), 0u) << "its buffer was not let go";
  EXPECT_TRUE(r.nodes[1].arrived.empty());
}

}  // namespace
}  // namespace plexus::daemon
