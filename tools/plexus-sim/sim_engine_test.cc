// plexus-sim's engine on cases computed by hand: one message, equal sharing, the ring's
// closed form, a slow node, a failed NIC, plans that do not match, and the slice window's
// extrapolation against simulating every slice.
#include <gtest/gtest.h>

#include "daemon/algorithms/algorithm.h"
#include "tools/plexus-sim/bounds.h"
#include "tools/plexus-sim/collective_row.h"
#include "tools/plexus-sim/op_simulation.h"

namespace plexus::sim {
namespace {

namespace algo = daemon::algo;

ClusterModel cluster_of(int nodes, int nics = 1) {
  ClusterModel c;
  c.nodes = nodes;
  c.nics = nics;
  c.nic_rate = 1e9;
  c.latency_s = 10e-6;
  c.overhead_s = 2e-6;
  return c;
}

// Every node's plan from `plans`, one slice each.
OpTiming run_plans(const ClusterModel& c, const std::vector<algo::Plan>& plans) {
  std::vector<SlicedPlan> sliced;
  for (const algo::Plan& p : plans) sliced.push_back(SlicedPlan{&p, nullptr, 1});
  return OpSimulation(c, std::move(sliced), 4).run();
}

algo::Plan send_to(std::vector<std::pair<int, uint64_t>> sends) {
  algo::PlanBuilder b("test");
  for (auto [peer, bytes] : sends) b.send(peer, 0, bytes);
  return b.finish();
}

algo::Plan receive_from(int peer, uint64_t bytes) {
  algo::PlanBuilder b("test");
  b.recv(peer, 0, bytes);
  return b.finish();
}

TEST(SimEngine, OneMessageTakesOverheadBytesOverRateAndLatency) {
  const ClusterModel c = cluster_of(2);
  const OpTiming t = run_plans(c, {send_to({{1, 1'000'000}}), receive_from(0, 1'000'000)});
  ASSERT_EQ(t.failure, "");
  EXPECT_NEAR(t.seconds, 2e-6 + 1e-3 + 10e-6, 1e-12);
  EXPECT_EQ(t.messages, 1u);
}

TEST(SimEngine, MessagesToOnePeerGoInOrder) {
  const ClusterModel c = cluster_of(2);
  algo::PlanBuilder two("test");
  two.recv(0, 0, 1'000'000);
  two.recv(0, 0, 1'000'000);
  const OpTiming t = run_plans(c, {send_to({{1, 1'000'000}, {1, 1'000'000}}), two.finish()});
  ASSERT_EQ(t.failure, "");
  EXPECT_NEAR(t.seconds, 2e-6 + 2e-3 + 10e-6, 1e-12);
}

TEST(SimEngine, TwoFlowsOutOfOneNicShareIt) {
  const ClusterModel c = cluster_of(3);
  const OpTiming t = run_plans(c, {send_to({{1, 1'000'000}, {2, 1'000'000}}),
                                   receive_from(0, 1'000'000), receive_from(0, 1'000'000)});
  ASSERT_EQ(t.failure, "");
  EXPECT_NEAR(t.seconds, 2e-6 + 2e-3 + 10e-6, 1e-12);
}

std::vector<algo::Plan> ring_allreduce(int p, uint64_t count) {
  std::vector<algo::Plan> plans;
  for (int me = 0; me < p; ++me) {
    algo::Shape s;
    s.participants = p;
    s.me = me;
    s.elem_bytes = 4;
    s.count = count;
    plans.push_back(algo::make_plan(algo::Algorithm::kRing, s));
  }
  return plans;
}

// Each of the 2(p-1) rounds moves one block of n/p per link at the full rate, and the next
// round starts when its block has arrived: 2(p-1) (o + n/(p B) + L).
TEST(SimEngine, RingOnFourNodesIsTheClosedForm) {
  const ClusterModel c = cluster_of(4);
  const uint64_t n = 4'000'000;  // bytes
  const OpTiming t = run_plans(c, ring_allreduce(4, n / 4));
  ASSERT_EQ(t.failure, "");
  EXPECT_NEAR(t.seconds, 6 * (2e-6 + n / 4 / 1e9 + 10e-6), 1e-12);
  EXPECT_EQ(t.messages, 4u * 6u);
}

TEST(SimEngine, ASlowNodeSlowsTheRing) {
  ClusterModel c = cluster_of(4);
  const uint64_t n = 4'000'000;
  const double healthy = run_plans(c, ring_allreduce(4, n / 4)).seconds;
  c.slow_node = 2;
  c.slow_factor = 0.5;
  const OpTiming slow = run_plans(c, ring_allreduce(4, n / 4));
  ASSERT_EQ(slow.failure, "");
  EXPECT_GT(slow.seconds, healthy * 1.5);
  // No slower than every link at the slow rate.
  EXPECT_LE(slow.seconds, 6 * (2e-6 + n / 4 / 0.5e9 + 10e-6) + 1e-12);
}

TEST(SimEngine, AFailedNicHalvesATwoNicNodesBandwidth) {
  ClusterModel c = cluster_of(2, 2);
  const std::vector<algo::Plan> plans = {send_to({{1, 1'000'000}}), receive_from(0, 1'000'000)};
  EXPECT_NEAR(run_plans(c, plans).seconds, 2e-6 + 0.5e-3 + 10e-6, 1e-12);
  c.failed_nic_node = 0;
  EXPECT_NEAR(run_plans(c, plans).seconds, 2e-6 + 1e-3 + 10e-6, 1e-12);
  EXPECT_DOUBLE_EQ(c.capacity(0), 1e9);
  EXPECT_DOUBLE_EQ(c.capacity(1), 2e9);
  EXPECT_EQ(c.agreed_speeds(), (std::vector<double>{0.5, 1.0}));
}

TEST(SimEngine, PlansThatDoNotMatchFailLoudly) {
  const ClusterModel c = cluster_of(2);
  // Node 1 waits for a message node 0 never sends.
  const OpTiming unsent = run_plans(c, {algo::PlanBuilder("x").finish(), receive_from(0, 8)});
  EXPECT_NE(unsent.failure.find("never finished"), std::string::npos) << unsent.failure;
  // Node 0 sends node 1 a message its plan does not hold (it waits for node 2's).
  // (Node 0's message is the shorter, so it arrives first.)
  const OpTiming unexpected =
      run_plans(cluster_of(3), {send_to({{1, 8}}), receive_from(2, 8000), send_to({{1, 8000}})});
  EXPECT_NE(unexpected.failure.find("does not expect"), std::string::npos) << unexpected.failure;
}

TEST(SimEngine, TheSliceWindowExtrapolatesWhatEverySliceGives) {
  const ClusterModel c = cluster_of(8);
  RowSpec spec;
  spec.bytes = 256u << 20;  // 128 slices
  spec.forced = algo::Algorithm::kRing;
  spec.window_slices = 0;
  const RowResult all = simulate_row(c, spec);
  spec.window_slices = 16;
  const RowResult window = simulate_row(c, spec);
  ASSERT_EQ(all.failure + all.skipped + window.failure + window.skipped, "");
  EXPECT_EQ(all.slices, 128u);
  EXPECT_EQ(all.slices_simulated, 128u);
  EXPECT_EQ(window.slices_simulated, 16u);
  EXPECT_NEAR(window.seconds, all.seconds, 0.02 * all.seconds);
  // Bandwidth-bound: within 10 % of the bound, never below it.
  EXPECT_GE(all.seconds, all.bound);
  EXPECT_LE(all.seconds, 1.1 * all.bound);
  // The ring sends 2(p-1)/p n.
  EXPECT_NEAR(all.nic_bytes_max, 2.0 * 7 / 8 * static_cast<double>(all.bytes), 1.0);
  EXPECT_EQ(all.peers_max, 2);
}

TEST(SimEngine, BoundsAndFormationFollowTheirFormulas) {
  const ClusterModel c = cluster_of(16);
  EXPECT_DOUBLE_EQ(min_volume(algo::Collective::kAllreduce, 16, 1600), 3000);
  EXPECT_DOUBLE_EQ(min_volume(algo::Collective::kAllgather, 16, 1600), 1500);
  EXPECT_DOUBLE_EQ(min_volume(algo::Collective::kBroadcast, 16, 1600), 1600);
  EXPECT_NEAR(lower_bound_seconds(algo::Collective::kAllreduce, 16, 1e9, c), 12e-6 + 2.0 * 15 / 16,
              1e-12);
  EXPECT_NEAR(lower_bound_seconds(algo::Collective::kAllreduce, 16, 8, c), 4 * 12e-6, 1e-12);
  const Formation f = formation_seconds(16, 8, c, 50e-6);
  EXPECT_NEAR(f.plan_tree, 4 * 20e-6 + 2 * 20e-6 + 8 * 50e-6, 1e-12);
  EXPECT_NEAR(f.full_mesh, 4 * 20e-6 + 15 * 50e-6 + 15 * 50e-6, 1e-12);
}

}  // namespace
}  // namespace plexus::sim
