// What an inter-node op plans for: the shape among the nodes (plan_shape.h), the layout in
// slices, one plan for a full slice and one for a shorter last, and what the slices not
// started yet still receive from a node.
#include "daemon/internode/slice_plans.h"

#include <gtest/gtest.h>

#include "daemon/internode/plan_shape.h"

namespace plexus::daemon {
namespace {

// Ranks 0 and 1 on node 0, rank 2 on node 1.
NodeTopology uneven(int my_node) {
  NodeTopology t;
  t.my_node = my_node;
  t.node_names = {"a", "b"};
  t.rank_node = {0, 0, 1};
  EXPECT_EQ(t.finish(), "");
  return t;
}

uint64_t received_from(const algo::Plan& plan, int node) {
  uint64_t bytes = 0;
  for (const algo::Step& step : plan.steps) {
    if ((step.kind == algo::StepKind::kRecv || step.kind == algo::StepKind::kRecvReduce) &&
        step.peer == node) {
      bytes += step.bytes;
    }
  }
  return bytes;
}

TEST(PlanShapeTest, NodesAreTheParticipantsAndTheirSegmentsTheirRanksBlocks) {
  const NodeTopology t = uneven(1);
  const algo::Shape gather =
      plan_shape(t, {shm::Opcode::kAllGather, PLEXUS_FLOAT32, PLEXUS_SUM, 10, 0});
  EXPECT_EQ(gather.collective, algo::Collective::kAllgather);
  EXPECT_EQ(gather.participants, 2);
  EXPECT_EQ(gather.me, 1);
  EXPECT_EQ(gather.elem_bytes, 4u);
  EXPECT_EQ(gather.segments, (std::vector<uint64_t>{20, 10}));
  const algo::Shape exchange =
      plan_shape(t, {shm::Opcode::kAllToAll, PLEXUS_INT8, PLEXUS_SUM, 3, 0});
  EXPECT_EQ(exchange.collective, algo::Collective::kAlltoall);
  EXPECT_TRUE(exchange.segments.empty());
  EXPECT_EQ(exchange.send_counts, (std::vector<uint64_t>{6, 3}));
  EXPECT_EQ(exchange.recv_counts, (std::vector<uint64_t>{6, 3}));
  const algo::Shape bcast =
      plan_shape(t, {shm::Opcode::kBroadcast, PLEXUS_INT32, PLEXUS_SUM, 5, 2});
  EXPECT_EQ(bcast.root, 1) << "the root rank's node";
  EXPECT_EQ(bcast.count, 5u);
  EXPECT_EQ(collective_of(shm::Opcode::kReduceScatter), algo::Collective::kReduceScatter);
  EXPECT_EQ(collective_of(shm::Opcode::kReduce), algo::Collective::kReduce);
  EXPECT_EQ(collective_of(shm::Opcode::kAllReduce), algo::Collective::kAllreduce);
}

TEST(SlicePlansTest, AShorterLastSliceHasItsOwnPlanAndUnstartedSlicesCountWhatTheyReceive) {
  const NodeTopology t = uneven(0);
  const CollectiveArgs args{shm::Opcode::kAllReduce, PLEXUS_INT32, PLEXUS_SUM, 1000, 0};
  const SlicePlans plans(t, args, algo::Algorithm::kRing, 52, {});
  EXPECT_EQ(plans.failure(), "");
  const SliceLayout& layout = plans.layout();
  EXPECT_EQ(layout.elems_per_slice, 13u);
  ASSERT_EQ(layout.slices, 77u);
  EXPECT_EQ(layout.count_of(76), 12u);
  EXPECT_EQ(&plans.plan_of(0), &plans.plan_of(75));
  EXPECT_NE(&plans.plan_of(0), &plans.plan_of(76));
  for (uint64_t from : {uint64_t{0}, uint64_t{40}, uint64_t{76}}) {
    uint64_t want = 0;
    for (uint64_t s = from; s < layout.slices; ++s) want += received_from(plans.plan_of(s), 1);
    EXPECT_EQ(plans.receives_from(1, from), want) << "from slice " << from;
    EXPECT_GT(want, 0u);
  }
  EXPECT_EQ(plans.receives_from(1, 77), 0u) << "every slice started";
  EXPECT_EQ(plans.receives_from(0, 0), 0u) << "nothing from this node itself";
}

TEST(SlicePlansTest, EvenSlicesShareOnePlan) {
  const NodeTopology t = uneven(1);
  const CollectiveArgs args{shm::Opcode::kBroadcast, PLEXUS_INT32, PLEXUS_SUM, 26, 0};
  const SlicePlans plans(t, args, algo::algorithms_for(algo::Collective::kBroadcast)[0], 52, {});
  EXPECT_EQ(plans.failure(), "");
  ASSERT_EQ(plans.layout().slices, 2u);
  EXPECT_EQ(&plans.plan_of(0), &plans.plan_of(1));
  EXPECT_EQ(plans.receives_from(0, 0), 2 * received_from(plans.plan_of(0), 0));
}

}  // namespace
}  // namespace plexus::daemon
