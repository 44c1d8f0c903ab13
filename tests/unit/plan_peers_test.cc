// peers_of: the distinct participants each algorithm's plan talks to, for 1..17
// participants and every participant, against each algorithm's bound (what a node opens
// connections for), and symmetric (a sends to b only where b receives from a).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>

#include "daemon/algorithms/algorithm.h"

namespace plexus::daemon::algo {
namespace {

int ceil_log2(int p) { return p <= 1 ? 0 : std::bit_width(static_cast<unsigned>(p - 1)); }

Shape shape_of(Collective collective, int p, int me) {
  Shape s;
  s.collective = collective;
  s.participants = p;
  s.me = me;
  s.root = p / 2;
  s.elem_bytes = 4;
  s.count = 1000;
  if (collective == Collective::kAllgather || collective == Collective::kReduceScatter) {
    for (int i = 0; i < p; ++i) s.segments.push_back(100 + static_cast<uint64_t>(i));
  }
  if (collective == Collective::kAlltoall) {
    s.send_counts.assign(static_cast<size_t>(p), 10);
    s.recv_counts.assign(static_cast<size_t>(p), 10);
  }
  return s;
}

// The most distinct peers one participant of `algorithm` may have among p.
int peer_bound(Algorithm algorithm, int p) {
  switch (algorithm) {
    case Algorithm::kRing:
    case Algorithm::kChain:
      return std::min(2, p - 1);
    case Algorithm::kRecursiveDoubling:
    case Algorithm::kRecursiveHalvingDoubling:
    case Algorithm::kBruck:
    case Algorithm::kBinomial:
      return 2 * ceil_log2(p);
    case Algorithm::kPairwise:
    case Algorithm::kOffload:  // the slow participant talks to everyone
      return p - 1;
  }
  return 0;
}

bool talks_to(const Plan& plan, int peer, StepKind kind) {
  return std::any_of(plan.steps.begin(), plan.steps.end(), [&](const Step& s) {
    const bool receives = s.kind == StepKind::kRecv || s.kind == StepKind::kRecvReduce;
    return s.peer == peer && (kind == StepKind::kSend ? s.kind == StepKind::kSend : receives);
  });
}

constexpr Collective kCollectives[] = {Collective::kAllreduce, Collective::kReduceScatter,
                                       Collective::kAllgather, Collective::kBroadcast,
                                       Collective::kReduce,    Collective::kAlltoall};

TEST(PlanPeers, EveryAlgorithmStaysWithinItsBoundAndIsSymmetric) {
  for (Collective c : kCollectives) {
    for (Algorithm a : algorithms_for(c)) {
      for (int p = 1; p <= 17; ++p) {
        std::vector<Plan> plans;
        for (int me = 0; me < p; ++me) plans.push_back(make_plan(a, shape_of(c, p, me)));
        for (int me = 0; me < p; ++me) {
          const std::string where = std::string(collective_name(c)) + " by " + algorithm_name(a) +
                                    ", p=" + std::to_string(p) + ", me=" + std::to_string(me);
          const Plan& plan = plans[static_cast<size_t>(me)];
          const std::vector<int> peers = peers_of(plan);
          EXPECT_LE(static_cast<int>(peers.size()), peer_bound(a, p)) << where;
          EXPECT_TRUE(std::is_sorted(peers.begin(), peers.end())) << where;
          EXPECT_EQ(std::adjacent_find(peers.begin(), peers.end()), peers.end()) << where;
          for (int peer : peers) {
            ASSERT_TRUE(peer >= 0 && peer < p && peer != me) << where << ": peer " << peer;
            const Plan& theirs = plans[static_cast<size_t>(peer)];
            const bool linked =
                (talks_to(plan, peer, StepKind::kSend) && talks_to(theirs, me, StepKind::kRecv)) ||
                (talks_to(plan, peer, StepKind::kRecv) && talks_to(theirs, me, StepKind::kSend));
            EXPECT_TRUE(linked) << where << ": peer " << peer << " does not match";
          }
          // Every step's peer is listed.
          for (const Step& s : plan.steps) {
            if (s.kind == StepKind::kCopy) continue;
            EXPECT_TRUE(std::binary_search(peers.begin(), peers.end(), s.peer)) << where;
          }
        }
      }
    }
  }
}

TEST(PlanPeers, RingTalksToItsTwoNeighboursAndPairwiseToEveryone) {
  for (int p = 3; p <= 17; ++p) {
    for (int me = 0; me < p; ++me) {
      const std::vector<int> ring =
          peers_of(make_plan(Algorithm::kRing, shape_of(Collective::kAllreduce, p, me)));
      std::vector<int> expected = {wrap(me - 1, p), wrap(me + 1, p)};
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(ring, expected) << "p=" << p << ", me=" << me;
      EXPECT_EQ(
          peers_of(make_plan(Algorithm::kPairwise, shape_of(Collective::kAlltoall, p, me))).size(),
          static_cast<size_t>(p - 1));
    }
  }
}

TEST(PlanPeers, OneParticipantAndCopiesTalkToNobody) {
  EXPECT_TRUE(
      peers_of(make_plan(Algorithm::kRing, shape_of(Collective::kAllreduce, 1, 0))).empty());
  EXPECT_TRUE(
      peers_of(make_plan(Algorithm::kPairwise, shape_of(Collective::kAlltoall, 1, 0))).empty());
  // Recursive doubling at a power of two: exactly log2 p partners, me ^ 2^k.
  const std::vector<int> rd =
      peers_of(make_plan(Algorithm::kRecursiveDoubling, shape_of(Collective::kAllreduce, 16, 5)));
  EXPECT_EQ(rd, (std::vector<int>{1, 4, 7, 13}));
}

}  // namespace
}  // namespace plexus::daemon::algo
