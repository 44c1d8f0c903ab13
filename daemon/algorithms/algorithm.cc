// Algorithm names, which collective each serves, shape checks and the make_plan dispatch.
#include "daemon/algorithms/algorithm.h"

#include <cassert>

namespace plexus::daemon::algo {

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kRecursiveHalvingDoubling:
      return "rhd";
    case Algorithm::kRecursiveDoubling:
      return "rd";
    case Algorithm::kBruck:
      return "bruck";
    case Algorithm::kBinomial:
      return "binomial";
    case Algorithm::kChain:
      return "chain";
    case Algorithm::kPairwise:
      return "pairwise";
    case Algorithm::kOffload:
      return "offload";
  }
  return "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (Algorithm a : kAllAlgorithms) {
    if (name == algorithm_name(a)) return a;
  }
  return std::nullopt;
}

const char* collective_name(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce:
      return "allreduce";
    case Collective::kReduceScatter:
      return "reducescatter";
    case Collective::kAllgather:
      return "allgather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kAlltoall:
      return "alltoall";
  }
  return "?";
}

std::span<const Algorithm> algorithms_for(Collective collective) {
  static constexpr Algorithm kAllreduce[] = {Algorithm::kRing, Algorithm::kRecursiveHalvingDoubling,
                                             Algorithm::kRecursiveDoubling, Algorithm::kOffload};
  static constexpr Algorithm kReduceScatter[] = {Algorithm::kRing};
  static constexpr Algorithm kAllgather[] = {Algorithm::kRing, Algorithm::kBruck,
                                             Algorithm::kOffload};
  static constexpr Algorithm kRooted[] = {Algorithm::kChain, Algorithm::kBinomial};
  static constexpr Algorithm kAlltoall[] = {Algorithm::kPairwise};
  switch (collective) {
    case Collective::kAllreduce:
      return kAllreduce;
    case Collective::kReduceScatter:
      return kReduceScatter;
    case Collective::kAllgather:
      return kAllgather;
    case Collective::kBroadcast:
    case Collective::kReduce:
      return kRooted;
    case Collective::kAlltoall:
      return kAlltoall;
  }
  return {};
}

bool supports(Algorithm algorithm, Collective collective) {
  for (Algorithm a : algorithms_for(collective)) {
    if (a == algorithm) return true;
  }
  return false;
}

std::string check_shape(const Shape& s) {
  const auto p = static_cast<size_t>(s.participants);
  if (s.participants < 1) return "participants must be at least 1";
  if (s.me < 0 || s.me >= s.participants) return "me is out of range";
  if (s.root < 0 || s.root >= s.participants) return "root is out of range";
  if (s.elem_bytes == 0) return "elem_bytes is 0";
  if (!s.speeds.empty() && s.speeds.size() != p)
    return "speeds must be empty or one per participant";
  for (double speed : s.speeds) {
    if (!(speed > 0.0 && speed <= 1.0)) return "a speed is outside (0, 1]";
  }
  if (!(s.slow_share >= 0.0 && s.slow_share <= 1.0)) return "slow_share is outside [0, 1]";
  switch (s.collective) {
    case Collective::kReduceScatter:
    case Collective::kAllgather:
      if (s.segments.size() != p) return "segments must have one entry per participant";
      break;
    case Collective::kAlltoall:
      if (s.send_counts.size() != p || s.recv_counts.size() != p) {
        return "send_counts and recv_counts must have one entry per participant";
      }
      if (s.send_counts[static_cast<size_t>(s.me)] != s.recv_counts[static_cast<size_t>(s.me)]) {
        return "what a participant sends itself must equal what it receives from itself";
      }
      break;
    default:
      break;
  }
  return {};
}

Plan make_plan(Algorithm algorithm, const Shape& shape) {
  assert(check_shape(shape).empty());
  assert(supports(algorithm, shape.collective));
  switch (algorithm) {
    case Algorithm::kRing:
      return plan_ring(shape);
    case Algorithm::kRecursiveHalvingDoubling:
      return plan_recursive_halving_doubling(shape);
    case Algorithm::kRecursiveDoubling:
      return plan_recursive_doubling(shape);
    case Algorithm::kBruck:
      return plan_bruck(shape);
    case Algorithm::kBinomial:
      return plan_binomial(shape);
    case Algorithm::kChain:
      return plan_chain(shape);
    case Algorithm::kPairwise:
      return plan_pairwise(shape);
    case Algorithm::kOffload:
      return shape.collective == Collective::kAllgather ? plan_offload_allgather(shape)
                                                        : plan_offload(shape);
  }
  return Plan{};
}

std::vector<uint64_t> split_evenly(uint64_t total, int parts) {
  const auto n = static_cast<uint64_t>(parts);
  std::vector<uint64_t> sizes(static_cast<size_t>(parts), total / n);
  for (uint64_t i = 0; i < total % n; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
}

std::vector<uint64_t> prefix_offsets(std::span<const uint64_t> sizes) {
  std::vector<uint64_t> offsets(sizes.size() + 1, 0);
  for (size_t i = 0; i < sizes.size(); ++i) offsets[i + 1] = offsets[i] + sizes[i];
  return offsets;
}

}  // namespace plexus::daemon::algo
