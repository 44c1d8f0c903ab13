// One slice's rounds between two nodes: every send goes out numbered with the slice and
// holding the slice's memory, and two slices that deliver to each other finish exact.
#include "daemon/internode/slice_run.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>

#include "daemon/internode/op_slices.h"
#include "daemon/internode/plan_shape.h"
#include "daemon/local/reduce.h"

namespace plexus::daemon {
namespace {

struct Sent {
  int from;
  int to;
  uint32_t step;
  std::vector<std::byte> data;
  std::shared_ptr<void> keep_alive;
};

TEST(SliceRunTest, SendsCarryTheSliceNumberAndItsMemoryAndTwoSlicesFinishExact) {
  constexpr uint64_t kSlice = 5;
  constexpr uint64_t kCount = 8;
  std::deque<Sent> wire;
  std::vector<NodeTopology> topologies(2);
  std::vector<std::vector<int32_t>> work(2);
  std::vector<algo::Plan> plans(2);
  std::vector<SliceRun::PostSend> posts;
  std::vector<std::unique_ptr<SliceRun>> slices;
  std::vector<std::shared_ptr<void>> keep_alive;
  auto reduce = [](std::byte* inout, const std::byte* in, size_t bytes) {
    const void* both[2] = {inout, in};
    reduce_arrays(PLEXUS_INT32, PLEXUS_SUM, both, 2, inout, bytes / sizeof(int32_t), 1);
  };
  for (int node = 0; node < 2; ++node) {
    NodeTopology& t = topologies[static_cast<size_t>(node)];
    t.my_node = node;
    t.node_names = {"a", "b"};
    t.rank_node = {0, 1};
    ASSERT_EQ(t.finish(), "");
    plans[static_cast<size_t>(node)] =
        algo::make_plan(algo::Algorithm::kRing,
                        plan_shape(t, {shm::Opcode::kAllReduce, PLEXUS_INT32, PLEXUS_SUM, kCount}));
    work[static_cast<size_t>(node)].assign(kCount, node + 1);
    posts.emplace_back([&wire, node](int peer, uint32_t step, std::span<const std::byte> data,
                                     std::shared_ptr<void> held) {
      wire.push_back({node, peer, step, {data.begin(), data.end()}, std::move(held)});
    });
  }
  for (int node = 0; node < 2; ++node) {
    auto scratch = std::make_shared<OpScratch>();
    keep_alive.push_back(std::make_shared<int>(node));
    std::span<std::byte> memory{
        reinterpret_cast<std::byte*>(work[static_cast<size_t>(node)].data()),
        kCount * sizeof(int32_t)};
    slices.push_back(std::make_unique<SliceRun>(
        kSlice, scratch, LocalPhases::SliceMemory{memory, keep_alive.back()},
        SliceRun::Rounds{.plan = plans[static_cast<size_t>(node)],
                         .reduce = reduce,
                         .elem_bytes = sizeof(int32_t),
                         .post_send = posts[static_cast<size_t>(node)]}));
    EXPECT_EQ(slices.back()->index(), kSlice);
    EXPECT_EQ(slices.back()->work().data(), memory.data());
    EXPECT_EQ(slices.back()->keep_alive(), keep_alive.back());
  }
  const auto began = StageClock::Clock::now();
  for (auto& slice : slices) slice->start(began);
  EXPECT_EQ(slices[0]->rounds_began(), began);
  EXPECT_EQ(slices[0]->runner().waiting_for(), std::vector<int>{1});
  ASSERT_FALSE(wire.empty());
  int sends = 0;
  while (!wire.empty()) {
    Sent sent = std::move(wire.front());
    wire.pop_front();
    ++sends;
    const transports::wire::CollectiveStep m = transports::wire::decode_collective_step(sent.step);
    EXPECT_EQ(m.slice, kSlice);
    EXPECT_EQ(sent.keep_alive, keep_alive[static_cast<size_t>(sent.from)]);
    EXPECT_EQ(
        slices[static_cast<size_t>(sent.to)]->runner().deliver(sent.from, m.message, 0, sent.data),
        "");
    slices[static_cast<size_t>(sent.from)]->runner().send_done(sent.to, m.message);
  }
  EXPECT_GT(sends, 0);
  for (int node = 0; node < 2; ++node) {
    EXPECT_TRUE(slices[static_cast<size_t>(node)]->runner().done());
    EXPECT_EQ(work[static_cast<size_t>(node)], std::vector<int32_t>(kCount, 3));
  }
}

}  // namespace
}  // namespace plexus::daemon
