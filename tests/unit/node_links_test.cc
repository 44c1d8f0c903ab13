// Inter-node ops over real loopback TCP through NodeLinks: three nodes, uneven ranks,
// large and odd sizes, exact results; a link that dies is reported with its name.
#include "daemon/links/node_links.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "daemon/internode/internode_op.h"
#include "tests/unit/tcp_pair.h"
#include "transports/tcp/tcp_path.h"

namespace plexus::daemon {
namespace {

using ::testing::HasSubstr;

using test::tcp_pair;

float rank_input(int rank, uint64_t j) { return static_cast<float>((rank * 31 + j * 7) % 1000); }

struct Node {
  NodeTopology topology;
  std::unique_ptr<NodeLinks> links;
  std::unique_ptr<InternodeOp> op;
  std::shared_ptr<ScratchPool> scratch = std::make_shared<ScratchPool>();
  std::string error;
};

// With `place`, large pieces of plain receives are read straight into the op's scratch.
// `paths` connections between each pair of nodes: the channel stripes messages over them,
// so pieces arrive out of order.
std::string run_allreduce(algo::Algorithm algorithm, uint64_t count, bool place,
                          uint64_t* placed_frames = nullptr, int paths = 1,
                          uint32_t chunk_bytes = 64 * 1024) {
  const std::vector<int> rank_node = {0, 1, 1, 2};
  constexpr int kNodes = 3;
  std::vector<std::vector<float>> bufs(rank_node.size());
  for (size_t r = 0; r < bufs.size(); ++r) {
    bufs[r].resize(count);
    for (uint64_t j = 0; j < count; ++j) bufs[r][j] = rank_input(static_cast<int>(r), j);
  }
  std::vector<Node> nodes(kNodes);
  for (int n = 0; n < kNodes; ++n) {
    Node& node = nodes[static_cast<size_t>(n)];
    node.topology.my_node = n;
    node.topology.node_names = {"a", "b", "c"};
    node.topology.rank_node = rank_node;
    node.topology.finish();
    NodeLinks::Handler handler;
    handler.on_frame = [&nodes, n](uint64_t peer, const transports::wire::DataFrameHeader& h,
                                   std::span<const std::byte> payload) {
      return nodes[static_cast<size_t>(n)].op->deliver(static_cast<int>(peer), h.step, h.offset,
                                                       payload);
    };
    if (place) {
      handler.place = [&nodes, n](uint64_t peer, const transports::wire::DataFrameHeader& h) {
        auto p = nodes[static_cast<size_t>(n)].op->placement(static_cast<int>(peer), h.step,
                                                             h.offset, h.length);
        return transports::Placement{p.destination, p.keep_alive};
      };
      handler.on_placed = [&nodes, n, placed_frames](uint64_t peer,
                                                     const transports::wire::DataFrameHeader& h) {
        nodes[static_cast<size_t>(n)].op->deliver_placed(static_cast<int>(peer), h.step, h.offset,
                                                         h.length);
        if (placed_frames != nullptr) ++*placed_frames;
        return std::string();
      };
    }
    handler.on_lost = [&nodes, n](uint64_t, const std::string& name, const std::string& why) {
      nodes[static_cast<size_t>(n)].error = "lost " + name + ": " + why;
    };
    node.links = std::make_unique<NodeLinks>(handler, chunk_bytes);
  }
  for (int a = 0; a < kNodes; ++a) {
    for (int b = a + 1; b < kNodes; ++b) {
      for (int path = 0; path < paths; ++path) {
        auto [fa, fb] = tcp_pair();
        nodes[static_cast<size_t>(a)].links->add(
            static_cast<uint64_t>(b), "node" + std::to_string(b), transports::tcp_path_opener(fa));
        nodes[static_cast<size_t>(b)].links->add(
            static_cast<uint64_t>(a), "node" + std::to_string(a), transports::tcp_path_opener(fb));
      }
    }
  }
  const CollectiveArgs args{shm::Opcode::kAllReduce, PLEXUS_FLOAT32, PLEXUS_SUM, count, 0};
  for (int n = 0; n < kNodes; ++n) {
    Node& node = nodes[static_cast<size_t>(n)];
    std::vector<Contribution> parts;
    for (int r : node.topology.local_ranks()) {
      Contribution c;
      c.rank = r;
      c.send = reinterpret_cast<const std::byte*>(bufs[static_cast<size_t>(r)].data());
      c.recv = reinterpret_cast<std::byte*>(bufs[static_cast<size_t>(r)].data());
      parts.push_back(c);
    }
    auto post = [&node](int peer, uint32_t message, std::span<const std::byte> data,
                        std::shared_ptr<void> keep_alive) {
      node.links->send_message(static_cast<uint64_t>(peer), 1, 0, message, data, keep_alive,
                               [&node, peer, message] { node.op->send_done(peer, message); });
    };
    node.op = std::make_unique<InternodeOp>(node.topology, args, std::move(parts), algorithm,
                                            node.scratch, post);
  }
  for (auto& node : nodes) node.op->start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto all_done = [&] {
    for (auto& node : nodes) {
      if (!node.op->network_done()) return false;
    }
    return true;
  };
  while (!all_done() && std::chrono::steady_clock::now() < deadline) {
    for (auto& node : nodes) {
      node.links->poll(0);
      if (!node.error.empty()) return node.error;
    }
  }
  if (!all_done()) return "timed out";
  for (size_t r = 0; r < bufs.size(); ++r) {
    for (uint64_t j = 0; j < count; ++j) {
      float want = 0;
      for (size_t s = 0; s < bufs.size(); ++s) want += rank_input(static_cast<int>(s), j);
      if (bufs[r][j] != want) {
        return "rank " + std::to_string(r) + " element " + std::to_string(j) + ": got " +
               std::to_string(bufs[r][j]) + ", want " + std::to_string(want);
      }
    }
  }
  return {};
}

TEST(NodeLinksTest, AllreduceOverLoopbackTcpIsExact) {
  for (algo::Algorithm a : algo::algorithms_for(algo::Collective::kAllreduce)) {
    for (uint64_t count : {uint64_t{1}, uint64_t{100003}, uint64_t{3} << 20}) {
      EXPECT_EQ(run_allreduce(a, count, false), "")
          << algo::algorithm_name(a) << " count " << count;
    }
  }
}

TEST(NodeLinksTest, PiecesReadStraightIntoScratchGiveExactResults) {
  uint64_t placed = 0;
  for (algo::Algorithm a : algo::algorithms_for(algo::Collective::kAllreduce)) {
    for (uint64_t count : {uint64_t{1}, uint64_t{100003}, uint64_t{3} << 20}) {
      EXPECT_EQ(run_allreduce(a, count, true, &placed), "")
          << algo::algorithm_name(a) << " count " << count;
    }
  }
  EXPECT_GT(placed, 0u);  // the placement path was taken, not only the buffered one
}

TEST(NodeLinksTest, PiecesStripedOverTwoPathsArePlacedInAnyOrder) {
  uint64_t placed = 0;
  for (auto a : {algo::Algorithm::kRing, algo::Algorithm::kRecursiveHalvingDoubling}) {
    for (uint64_t count : {uint64_t{1} << 20, uint64_t{6000017}}) {
      // Frames of 512 KiB are read in several bites, so one path's frame is still being
      // placed when the next arrives whole on the other.
      EXPECT_EQ(run_allreduce(a, count, true, &placed, 2, 512 * 1024), "")
          << algo::algorithm_name(a) << " count " << count;
    }
  }
  EXPECT_GT(placed, 0u);
}

TEST(NodeLinksTest, ALinkThatDiesIsReportedWithItsNameAndReason) {
  std::string lost;
  NodeLinks::Handler handler;
  handler.on_frame = [](uint64_t, const auto&, auto) { return std::string(); };
  handler.on_lost = [&](uint64_t peer, const std::string& name, const std::string& why) {
    lost = std::to_string(peer) + " " + name + ": " + why;
  };
  transports::ReliableChannel::Settings settings;
  settings.last_path_grace = std::chrono::milliseconds(200);
  NodeLinks links(handler, NodeLinks::kDefaultChunkBytes, settings);
  auto [mine, theirs] = tcp_pair();
  links.add(7, "node-b", transports::tcp_path_opener(mine));
  ::close(theirs);
  for (int i = 0; i < 300 && lost.empty(); ++i) links.poll(10);
  // Closed (at once), or reset, since this side had written its first heartbeat (after
  // the grace period: a reset may come from a kernel that forgot an aborted connection).
  EXPECT_THAT(lost, testing::AnyOf(HasSubstr("7 node-b: peer closed the connection"),
                                   HasSubstr("7 node-b: no path to node node-b for")));
  EXPECT_THAT(lost, testing::AnyOf(HasSubstr("closed the connection"),
                                   HasSubstr("receive failed: Connection reset")));
  EXPECT_FALSE(links.has(7));
  EXPECT_FALSE(links.send_message(7, 1, 0, 0, {}, nullptr, nullptr));
}

// Without acknowledgements (one NIC): a message whose link dies before it is written is not
// sent, so its `done` never runs, however its chunks were let go. The peer reads nothing, so
// the second message still waits behind the first's 64 MiB in the link's queue when the peer
// closes (with unread bytes: a reset) and the path fails: it is let go without a path.
TEST(NodeLinksTest, AMessageLostWithItsLinkNeverRunsItsDone) {
  bool lost = false;
  NodeLinks::Handler handler;
  handler.on_frame = [](uint64_t, const auto&, auto) { return std::string(); };
  handler.on_lost = [&](uint64_t, const std::string&, const std::string&) { lost = true; };
  transports::ReliableChannel::Settings settings;
  settings.reliable = false;
  NodeLinks links(handler, NodeLinks::kDefaultChunkBytes, settings);
  auto [mine, theirs] = tcp_pair();
  for (int fd : {mine, theirs}) {  // fixed buffers: 64 MiB never fits, whatever the sysctls
    const int bytes = 256 << 10;
    ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes), 0);
    ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes), 0);
  }
  links.add(7, "node-b", transports::tcp_path_opener(mine));
  auto big = std::make_shared<std::vector<std::byte>>(64u << 20);
  auto small = std::make_shared<std::vector<std::byte>>(4096);
  int done = 0;
  ASSERT_TRUE(links.send_message(7, 1, 0, 0, *big, big, [&] { ++done; }));
  ASSERT_TRUE(links.send_message(7, 1, 0, 1, *small, small, [&] { ++done; }));
  for (int i = 0; i < 10; ++i) links.poll(10);
  ::close(theirs);
  for (int i = 0; i < 300 && !lost; ++i) links.poll(10);
  ASSERT_TRUE(lost) << "the link to a closed peer was never lost";
  EXPECT_EQ(done, 0) << "a message never written was reported sent";
  EXPECT_EQ(big.use_count(), 1) << "its memory was not let go";
  EXPECT_EQ(small.use_count(), 1) << "its memory was not let go";
}

}  // namespace
}  // namespace plexus::daemon
