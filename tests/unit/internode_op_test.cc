// Hierarchical collectives across simulated nodes: ranks placed unevenly and interleaved
// over nodes, every collective and algorithm, in-place and out-of-place, checked exactly
// against what a single node would compute.
#include "daemon/internode/internode_op.h"

#include <gtest/gtest.h>

#include <cstring>

#include "daemon/internode/plan_shape.h"
#include "shm/dtype.h"
#include "shm/entry_validation.h"
#include "tests/unit/in_memory_network.h"

namespace plexus::daemon {
namespace {

int32_t input(int rank, uint64_t j) {
  return static_cast<int32_t>((static_cast<uint64_t>(rank) * 7919 + j * 104729) % 20011) - 10000;
}

struct Placement {
  const char* name;
  std::vector<int> rank_node;
};

const Placement kPlacements[] = {
    {"one_node", {0, 0}},
    {"two_nodes_one_each", {0, 1}},
    {"uneven_2_1_3", {0, 0, 1, 2, 2, 2}},
    {"interleaved", {0, 1, 2, 0, 1, 2, 1}},
    {"four_nodes", {3, 2, 1, 0}},
};

struct RankBuffers {
  std::vector<int32_t> send;
  std::vector<int32_t> recv;
};

// With a rank memory owner: ops whose node has one rank must borrow its buffer, every
// send must read from it and carry the owner; the transport's holds go to `held`.
struct Borrowing {
  std::shared_ptr<void> owner;
  std::vector<std::shared_ptr<void>> held;
};

std::string run(const Placement& placement, shm::Opcode opcode, plexus_redop_t op,
                algo::Algorithm algorithm, uint64_t count, bool in_place, uint32_t seed,
                SliceOptions slices = {}, Borrowing* borrowing = nullptr) {
  const int nranks = static_cast<int>(placement.rank_node.size());
  const int nodes = *std::max_element(placement.rank_node.begin(), placement.rank_node.end()) + 1;
  const int root = static_cast<int>(count % static_cast<uint64_t>(nranks));
  const auto n = static_cast<uint64_t>(nranks);
  const CollectiveArgs args{opcode, PLEXUS_INT32, op, count, root};
  // Buffer sizes as the entry validation gives them.
  uint64_t send_elems = count;
  uint64_t recv_elems = count;
  if (opcode == shm::Opcode::kAllGather) recv_elems = n * count;
  if (opcode == shm::Opcode::kReduceScatter) send_elems = n * count;
  if (opcode == shm::Opcode::kAllToAll) send_elems = recv_elems = n * count;
  std::vector<RankBuffers> ranks(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    RankBuffers& b = ranks[static_cast<size_t>(r)];
    b.recv.assign(std::max(send_elems, recv_elems), 0x5A5A5A5A);
    if (!in_place) b.send.resize(send_elems);
    int32_t* send = in_place ? b.recv.data() : b.send.data();
    if (in_place && opcode == shm::Opcode::kAllGather) send += static_cast<uint64_t>(r) * count;
    for (uint64_t j = 0; j < send_elems; ++j) send[j] = input(r, j);
  }
  std::vector<NodeTopology> topologies(static_cast<size_t>(nodes));
  for (int node = 0; node < nodes; ++node) {
    NodeTopology& t = topologies[static_cast<size_t>(node)];
    t.my_node = node;
    for (int i = 0; i < nodes; ++i) t.node_names.push_back("node" + std::to_string(i));
    t.rank_node = placement.rank_node;
    const std::string bad = t.finish();
    if (!bad.empty()) return bad;
  }
  test::InMemoryNetwork net(seed, 4);
  std::vector<std::unique_ptr<InternodeOp>> ops;
  std::string misplaced;  // a borrowing node's send that did not come from its rank's buffer
  for (int node = 0; node < nodes; ++node) {
    const NodeTopology& t = topologies[static_cast<size_t>(node)];
    std::vector<Contribution> parts;
    for (int r : t.local_ranks()) {
      RankBuffers& b = ranks[static_cast<size_t>(r)];
      Contribution part;
      part.rank = r;
      part.recv = reinterpret_cast<std::byte*>(b.recv.data());
      auto* send = in_place ? b.recv.data() : b.send.data();
      if (in_place && opcode == shm::Opcode::kAllGather) send += static_cast<uint64_t>(r) * count;
      part.send = reinterpret_cast<const std::byte*>(send);
      parts.push_back(part);
    }
    const bool one_rank = parts.size() == 1;
    const std::byte* rank_recv = one_rank ? parts.front().recv : nullptr;
    const uint64_t rank_bytes = recv_elems * sizeof(int32_t);
    auto post = [&net, &misplaced, node, borrowing, one_rank, rank_recv, rank_bytes](
                    int peer, uint32_t message, std::span<const std::byte> data,
                    std::shared_ptr<void> keep_alive) {
      if (borrowing != nullptr && one_rank && !data.empty()) {
        if (data.data() < rank_recv || data.data() + data.size() > rank_recv + rank_bytes) {
          misplaced = "node " + std::to_string(node) + " sent from outside its rank's buffer";
        }
        borrowing->held.push_back(std::move(keep_alive));
      }
      net.post(node, peer, message, data);
    };
    ops.push_back(std::make_unique<InternodeOp>(t, args, std::move(parts), algorithm,
                                                std::make_shared<ScratchPool>(), post, slices,
                                                borrowing != nullptr ? borrowing->owner : nullptr));
    if (borrowing != nullptr && ops.back()->borrows_rank_memory() != one_rank) {
      return "node " + std::to_string(node) + (one_rank ? " did not borrow" : " borrowed") +
             " its rank's memory";
    }
  }
  for (auto& node_op : ops) node_op->start();
  std::string error = net.run(
      [&](int to, int from, uint32_t message, uint64_t offset, std::span<const std::byte> data) {
        return ops[static_cast<size_t>(to)]->deliver(from, message, offset, data);
      },
      [&](int from, int to, uint32_t message) {
        ops[static_cast<size_t>(from)]->send_done(to, message);
      });
  if (!error.empty()) return error;
  if (!misplaced.empty()) return misplaced;
  for (int node = 0; node < nodes; ++node) {
    const InternodeOp& node_op = *ops[static_cast<size_t>(node)];
    if (!node_op.failure().empty())
      return "node " + std::to_string(node) + ": " + node_op.failure();
    if (!node_op.network_done()) return "node " + std::to_string(node) + " did not finish its plan";
  }
  // The single-node reference.
  auto reduced = [&](uint64_t j) {
    int64_t acc = op == PLEXUS_MAX ? INT32_MIN : 0;
    uint32_t wrap = 0;
    for (int r = 0; r < nranks; ++r) {
      if (op == PLEXUS_MAX) {
        acc = std::max<int64_t>(acc, input(r, j));
      } else {
        wrap += static_cast<uint32_t>(input(r, j));
      }
    }
    if (op == PLEXUS_MAX) return static_cast<int32_t>(acc);
    const auto sum = static_cast<int32_t>(wrap);
    return op == PLEXUS_AVG ? static_cast<int32_t>(sum / nranks) : sum;
  };
  for (int r = 0; r < nranks; ++r) {
    const auto& got = ranks[static_cast<size_t>(r)].recv;
    auto want = [&](uint64_t j) -> std::optional<int32_t> {
      switch (opcode) {
        case shm::Opcode::kAllReduce:
          return reduced(j);
        case shm::Opcode::kReduce:
          if (r != root) return std::nullopt;
          return reduced(j);
        case shm::Opcode::kBroadcast:
          return input(root, j);
        case shm::Opcode::kAllGather:
          return input(static_cast<int>(j / count), j % count);
        case shm::Opcode::kReduceScatter:
          return reduced(static_cast<uint64_t>(r) * count + j);
        case shm::Opcode::kAllToAll:
          return input(static_cast<int>(j / count), static_cast<uint64_t>(r) * count + j % count);
        default:
          return std::nullopt;
      }
    };
    for (uint64_t j = 0; j < recv_elems; ++j) {
      const auto expected = want(j);
      if (expected && got[j] != *expected) {
        return "rank " + std::to_string(r) + " element " + std::to_string(j) + ": got " +
               std::to_string(got[j]) + ", want " + std::to_string(*expected);
      }
    }
  }
  return {};
}

TEST(InternodeOpTest, EveryCollectiveAndAlgorithmIsExactForUnevenAndInterleavedPlacements) {
  uint32_t seed = 7;
  int cases = 0;
  for (const Placement& placement : kPlacements) {
    for (shm::Opcode opcode :
         {shm::Opcode::kAllReduce, shm::Opcode::kReduce, shm::Opcode::kBroadcast,
          shm::Opcode::kAllGather, shm::Opcode::kReduceScatter, shm::Opcode::kAllToAll}) {
      for (algo::Algorithm algorithm : algo::algorithms_for(collective_of(opcode))) {
        for (plexus_redop_t op : {PLEXUS_SUM, PLEXUS_MAX, PLEXUS_AVG}) {
          if (op != PLEXUS_SUM && !shm::uses_redop(opcode)) continue;
          for (uint64_t count : {uint64_t{1}, uint64_t{3}, uint64_t{1001}}) {
            for (bool in_place : {false, true}) {
              const std::string error =
                  run(placement, opcode, op, algorithm, count, in_place, ++seed);
              ASSERT_EQ(error, "")
                  << placement.name << " " << shm::opcode_name(static_cast<uint8_t>(opcode)) << " "
                  << algo::algorithm_name(algorithm) << " op " << op << " count " << count
                  << (in_place ? " in-place" : "");
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 300);
}

// Small slices make every collective run as many sub-collectives, some in flight at once,
// their pieces arriving out of order and ahead of the slice they belong to.
TEST(InternodeOpTest, SlicedCollectivesAreExactWithAnyNumberInFlight) {
  uint32_t seed = 1000;
  int cases = 0;
  for (const Placement& placement : kPlacements) {
    for (shm::Opcode opcode :
         {shm::Opcode::kAllReduce, shm::Opcode::kReduce, shm::Opcode::kBroadcast,
          shm::Opcode::kAllGather, shm::Opcode::kReduceScatter, shm::Opcode::kAllToAll}) {
      for (algo::Algorithm algorithm : algo::algorithms_for(collective_of(opcode))) {
        for (uint32_t in_flight : {1u, 2u, 5u}) {
          for (uint64_t count : {uint64_t{7}, uint64_t{1001}}) {
            const SliceOptions slices{52, in_flight};  // 13 int32: slices of uneven blocks
            const plexus_redop_t op = shm::uses_redop(opcode) ? PLEXUS_AVG : PLEXUS_SUM;
            const std::string error =
                run(placement, opcode, op, algorithm, count, count == 7, ++seed, slices);
            ASSERT_EQ(error, "") << placement.name << " "
                                 << shm::opcode_name(static_cast<uint8_t>(opcode)) << " "
                                 << algo::algorithm_name(algorithm) << " in flight " << in_flight
                                 << " count " << count;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 200);
}

// A node with one rank runs an allreduce's rounds in that rank's receive buffer (no
// staging copies); nodes with several ranks in the same communicator still use scratch.
TEST(InternodeOpTest, AllreduceOnANodeWithOneRankRunsInTheRankBufferExactly) {
  uint32_t seed = 5000;
  int cases = 0;
  for (const Placement& placement : kPlacements) {
    for (algo::Algorithm algorithm : algo::algorithms_for(algo::Collective::kAllreduce)) {
      for (plexus_redop_t op : {PLEXUS_SUM, PLEXUS_MAX, PLEXUS_AVG}) {
        for (uint64_t count : {uint64_t{1}, uint64_t{3}, uint64_t{1001}}) {
          for (bool in_place : {false, true}) {
            for (uint32_t in_flight : {0u, 1u, 5u}) {  // 0: one slice; else 13-int32 slices
              Borrowing borrowing{std::make_shared<int>(0), {}};
              const SliceOptions slices =
                  in_flight == 0 ? SliceOptions{} : SliceOptions{52, in_flight};
              const std::string error = run(placement, shm::Opcode::kAllReduce, op, algorithm,
                                            count, in_place, ++seed, slices, &borrowing);
              ASSERT_EQ(error, "") << placement.name << " " << algo::algorithm_name(algorithm)
                                   << " op " << op << " count " << count
                                   << (in_place ? " in-place" : "") << " in flight " << in_flight;
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 300);
}

// What the transport holds for a send keeps the rank's memory owner (a session, which
// maps the client's pool) alive after the op itself is gone: a client killed mid-op
// cannot leave queued frames pointing at unmapped memory.
TEST(InternodeOpTest, SendsFromRankMemoryKeepItsOwnerAliveAfterTheOpIsGone) {
  const Placement& placement = kPlacements[1];  // two nodes, one rank each
  Borrowing borrowing{std::make_shared<int>(0), {}};
  std::weak_ptr<void> owner = borrowing.owner;
  ASSERT_EQ(run(placement, shm::Opcode::kAllReduce, PLEXUS_SUM, algo::Algorithm::kRing, 1001, false,
                1, {}, &borrowing),
            "");
  ASSERT_FALSE(borrowing.held.empty());
  borrowing.owner.reset();  // the session leaves; the ops are already destroyed
  EXPECT_FALSE(owner.expired()) << "queued sends must keep the rank's memory mapped";
  borrowing.held.clear();  // the frames are written or dropped
  EXPECT_TRUE(owner.expired());
}

TEST(SliceLayoutTest, SlicesCoverTheBlocksOnceAndFitTheStepField) {
  const SliceLayout big =
      slice_layout(algo::Collective::kAllreduce, uint64_t{16} << 20, 4, 4, kSliceWorkBytes);
  EXPECT_EQ(big.elems_per_slice, kSliceWorkBytes / 4);
  EXPECT_EQ(big.slices, (uint64_t{64} << 20) / kSliceWorkBytes);
  // Per-rank blocks: a slice holds a piece of every rank's block.
  const SliceLayout gather = slice_layout(algo::Collective::kAllgather, 1000, 4, 8, 320);
  EXPECT_EQ(gather.elems_per_slice, 10u);
  EXPECT_EQ(gather.slices, 100u);
  const SliceLayout odd = slice_layout(algo::Collective::kBroadcast, 1001, 8, 3, 80);
  uint64_t covered = 0;
  for (uint64_t s = 0; s < odd.slices; ++s) {
    EXPECT_EQ(odd.first(s), covered);
    covered += odd.count_of(s);
  }
  EXPECT_EQ(covered, 1001u);
  EXPECT_EQ(odd.count_of(odd.slices - 1), 1u);
  // More slices than a step can number: they grow instead.
  const SliceLayout huge = slice_layout(algo::Collective::kAllreduce, uint64_t{1} << 40, 1, 2, 1);
  EXPECT_LE(huge.slices, kMaxSlices);
  EXPECT_EQ(slice_layout(algo::Collective::kAllreduce, 0, 4, 2, 64).slices, 1u);
  const transports::wire::CollectiveStep m = transports::wire::decode_collective_step(
      transports::wire::encode_collective_step({77, 4095}));
  EXPECT_EQ(m.slice, 77u);
  EXPECT_EQ(m.message, 4095u);
}

}  // namespace
}  // namespace plexus::daemon
