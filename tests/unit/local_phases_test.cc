// The local side of a multi-node collective alone: a slice gathered or reduced from the
// local ranks' buffers into scratch and copied back out, the rank's own buffer borrowed for
// an allreduce with one rank here, and staged GPU input gating a slice.
#include "daemon/internode/local_phases.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace plexus::daemon {
namespace {

// input_in's answer, as a test compares it: "true", "false", or the failure's sentence.
std::string outcome(const common::Result<bool>& in) {
  if (!in.ok()) return in.error();
  return *in ? "true" : "false";
}

// Ranks 0 and 2 on node 0 (this one), rank 1 on node 1.
NodeTopology two_nodes(int my_node) {
  NodeTopology t;
  t.my_node = my_node;
  t.node_names = {"a", "b"};
  t.rank_node = {0, 1, 0};
  EXPECT_EQ(t.finish(), "");
  return t;
}

struct Rank {
  std::vector<int32_t> send;
  std::vector<int32_t> recv;
  Contribution part(int rank) {
    Contribution c;
    c.rank = rank;
    c.send = reinterpret_cast<const std::byte*>(send.data());
    c.recv = reinterpret_cast<std::byte*>(recv.data());
    c.entry.send.bytes = send.size() * sizeof(int32_t);
    return c;
  }
};

std::vector<int32_t> ints(std::span<const std::byte> bytes) {
  std::vector<int32_t> out(bytes.size() / sizeof(int32_t));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(int32_t));
  return out;
}

TEST(LocalPhasesTest, AnAllreduceSliceIsReducedIntoScratchAndCopiedOutToEveryRank) {
  const NodeTopology t = two_nodes(0);
  Rank r0{{1, 2, 3, 4}, std::vector<int32_t>(4)};
  Rank r2{{10, 20, 30, 40}, std::vector<int32_t>(4)};
  const CollectiveArgs args{shm::Opcode::kAllReduce, PLEXUS_INT32, PLEXUS_AVG, 4, 0};
  LocalPhases local(t, args, {r0.part(0), r2.part(2)}, std::make_shared<int>(0));
  EXPECT_FALSE(local.borrows_rank_memory()) << "two ranks here: the rounds run in scratch";
  EXPECT_EQ(local.elem_bytes(), 4u);
  auto scratch = std::make_shared<OpScratch>();
  // Elements [1, 3) of the block: an average travels as a sum.
  LocalPhases::SliceMemory memory = local.phase_in(1, 2, scratch);
  EXPECT_EQ(memory.keep_alive, scratch);
  EXPECT_EQ(ints(memory.work), (std::vector<int32_t>{22, 33}));
  // The network's sum of three ranks; the copy out divides by the communicator's size.
  const int32_t network[2] = {66, 99};
  std::memcpy(memory.work.data(), network, sizeof(network));
  EXPECT_EQ(local.phase_out(1, 2, memory.work), 2 * 2 * sizeof(int32_t));
  EXPECT_EQ(r0.recv, (std::vector<int32_t>{0, 22, 33, 0}));
  EXPECT_EQ(r2.recv, (std::vector<int32_t>{0, 22, 33, 0}));
  int32_t inout[2] = {1, 2};
  const int32_t in[2] = {5, 7};
  local.reduce(reinterpret_cast<std::byte*>(inout), reinterpret_cast<const std::byte*>(in),
               sizeof(in));
  EXPECT_EQ(inout[0], 6) << "the rounds reduce an average as a sum";
  EXPECT_EQ(inout[1], 9);
  // A frame's payload need not start on an element boundary (UBSan flagged the kernels'
  // loads from one): it is reduced from an aligned copy, exactly.
  alignas(8) std::byte frame[1 + sizeof(in)];
  std::memcpy(frame + 1, in, sizeof(in));
  local.reduce(reinterpret_cast<std::byte*>(inout), frame + 1, sizeof(in));
  EXPECT_EQ(inout[0], 11);
  EXPECT_EQ(inout[1], 16);
}

TEST(LocalPhasesTest, AnAllgatherSliceIsLaidOutInNodeOrder) {
  const NodeTopology t = two_nodes(0);
  Rank r0{{1, 2}, std::vector<int32_t>(6)};
  Rank r2{{5, 6}, std::vector<int32_t>(6)};
  const CollectiveArgs args{shm::Opcode::kAllGather, PLEXUS_INT32, PLEXUS_SUM, 2, 0};
  LocalPhases local(t, args, {r0.part(0), r2.part(2)}, nullptr);
  auto scratch = std::make_shared<OpScratch>();
  LocalPhases::SliceMemory memory = local.phase_in(1, 1, scratch);
  // Node 0's ranks (0, 2) first, then node 1's (1): rank 1's piece is the network's.
  std::vector<int32_t> work = ints(memory.work);
  ASSERT_EQ(work.size(), 3u);
  EXPECT_EQ(work[0], 2);
  EXPECT_EQ(work[1], 6);
  const int32_t from_node_1 = 9;
  std::memcpy(memory.work.data() + 2 * sizeof(int32_t), &from_node_1, sizeof(from_node_1));
  EXPECT_EQ(local.phase_out(1, 1, memory.work), 2 * 3 * sizeof(int32_t));
  EXPECT_EQ(r0.recv, (std::vector<int32_t>{0, 2, 0, 9, 0, 6}));
  EXPECT_EQ(r2.recv, r0.recv);
}

TEST(LocalPhasesTest, OneRankHereLendsItsReceiveBufferAndItsOwnerGoesWithTheSlice) {
  const NodeTopology t = two_nodes(1);
  Rank r1{{1, 2, 3, 4}, std::vector<int32_t>(4)};
  const CollectiveArgs args{shm::Opcode::kAllReduce, PLEXUS_INT32, PLEXUS_SUM, 4, 0};
  auto owner = std::make_shared<int>(0);
  std::weak_ptr<void> owner_seen = owner;
  auto local = std::make_unique<LocalPhases>(t, args, std::vector<Contribution>{r1.part(1)}, owner);
  EXPECT_TRUE(local->borrows_rank_memory());
  auto scratch = std::make_shared<OpScratch>();
  std::weak_ptr<OpScratch> scratch_seen = scratch;
  LocalPhases::SliceMemory memory = local->phase_in(2, 2, std::move(scratch));
  EXPECT_EQ(memory.work.data(), reinterpret_cast<std::byte*>(r1.recv.data() + 2));
  EXPECT_EQ(r1.recv, (std::vector<int32_t>{0, 0, 3, 4})) << "the input moved into place";
  EXPECT_EQ(local->phase_out(2, 2, memory.work), 2 * sizeof(int32_t));
  local.reset();  // the op is gone
  owner.reset();  // and the session
  EXPECT_FALSE(owner_seen.expired()) << "what the transport holds keeps the rank's memory";
  EXPECT_FALSE(scratch_seen.expired());
  memory.keep_alive.reset();
  EXPECT_TRUE(owner_seen.expired());
  EXPECT_TRUE(scratch_seen.expired());
  // Not an allreduce: never borrowed.
  const CollectiveArgs gather{shm::Opcode::kAllGather, PLEXUS_INT32, PLEXUS_SUM, 4, 0};
  EXPECT_FALSE(
      LocalPhases(t, gather, {r1.part(1)}, std::make_shared<int>(0)).borrows_rank_memory());
}

TEST(LocalPhasesTest, AnEmptySliceTouchesNoBufferAndWritesNothing) {
  const NodeTopology t = two_nodes(0);
  const CollectiveArgs args{shm::Opcode::kAllReduce, PLEXUS_INT32, PLEXUS_SUM, 0, 0};
  LocalPhases local(t, args, {Contribution{}, Contribution{}}, nullptr);
  auto scratch = std::make_shared<OpScratch>();
  scratch->work.resize(64);
  scratch->send.resize(64);
  LocalPhases::SliceMemory memory = local.phase_in(0, 0, scratch);
  EXPECT_TRUE(memory.work.empty());
  EXPECT_TRUE(scratch->work.empty());
  EXPECT_TRUE(scratch->send.empty());
  EXPECT_EQ(memory.keep_alive, scratch);
  EXPECT_EQ(local.phase_out(0, 0, memory.work), 0u);
}

TEST(LocalPhasesTest, StagedInputGatesASliceAndTheResultIsHandedBackAsWritten) {
  const NodeTopology t = two_nodes(0);
  Rank r0{std::vector<int32_t>(8, 1), std::vector<int32_t>(8)};
  Rank r2{std::vector<int32_t>(8, 2), std::vector<int32_t>(8)};
  const CollectiveArgs args{shm::Opcode::kAllReduce, PLEXUS_INT32, PLEXUS_SUM, 8, 0};
  LocalPhases local(t, args, {r0.part(0), r2.part(2)}, nullptr);
  EXPECT_EQ(outcome(local.input_in(0, 8)), "true") << "no staging: every input is in";
  uint64_t in[2] = {0, 0};
  std::string copy_error;
  std::vector<std::pair<size_t, uint64_t>> written;
  local.stage_through({.input_in = [&](size_t i, uint64_t bytes) -> common::Result<bool> {
                         if (!copy_error.empty()) return common::fail(copy_error);
                         return bytes <= in[i];
                       },
                       .written =
                           [&](size_t i, uint64_t offset, uint64_t bytes) {
                             written.push_back({i, offset + bytes});
                           }});
  in[0] = 8;
  EXPECT_EQ(outcome(local.input_in(0, 2)), "false") << "rank 2's first two elements are not in";
  in[1] = 8;
  EXPECT_EQ(outcome(local.input_in(0, 2)), "true");
  EXPECT_EQ(outcome(local.input_in(2, 2)), "false") << "a slice needs its input up to its end";
  copy_error = "rank 2: the copy failed";
  EXPECT_EQ(outcome(local.input_in(2, 2)), "rank 2: the copy failed");
  auto scratch = std::make_shared<OpScratch>();
  LocalPhases::SliceMemory memory = local.phase_in(0, 2, scratch);
  local.phase_out(0, 2, memory.work);
  EXPECT_EQ(written, (std::vector<std::pair<size_t, uint64_t>>{{0, 8}, {1, 8}}));
}

}  // namespace
}  // namespace plexus::daemon
