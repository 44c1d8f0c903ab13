// Round bookkeeping for plans and message numbering.
#include "daemon/algorithms/plan.h"

#include <algorithm>
#include <map>

namespace plexus::daemon::algo {

std::vector<int> peers_of(const Plan& plan) {
  std::vector<int> peers;
  for (const Step& step : plan.steps) {
    if (step.kind != StepKind::kCopy) peers.push_back(step.peer);
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

void PlanBuilder::add(Step step) {
  if (step.bytes == 0) return;
  plan_.steps.push_back(step);
}

void PlanBuilder::send(int peer, uint64_t offset, uint64_t bytes, BufferId buffer) {
  add(Step{StepKind::kSend, peer, buffer, offset, bytes});
}

void PlanBuilder::recv(int peer, uint64_t offset, uint64_t bytes) {
  add(Step{StepKind::kRecv, peer, BufferId::kWork, offset, bytes});
}

void PlanBuilder::recv_reduce(int peer, uint64_t offset, uint64_t bytes) {
  add(Step{StepKind::kRecvReduce, peer, BufferId::kWork, offset, bytes});
}

void PlanBuilder::copy(uint64_t src_offset, uint64_t dst_offset, uint64_t bytes) {
  add(Step{StepKind::kCopy, -1, BufferId::kSend, src_offset, bytes, dst_offset});
}

void PlanBuilder::end_round() {
  const auto size = static_cast<uint32_t>(plan_.steps.size());
  if (size > plan_.round_begin(plan_.rounds())) plan_.round_ends.push_back(size);
}

Plan PlanBuilder::finish() {
  end_round();
  std::map<int, uint32_t> sent;
  std::map<int, uint32_t> received;
  // Rounds are runs of steps in plan order: numbering in step order is numbering by round.
  for (Step& step : plan_.steps) {
    if (step.kind == StepKind::kSend) {
      step.message = sent[step.peer]++;
    } else if (step.kind == StepKind::kRecv || step.kind == StepKind::kRecvReduce) {
      step.message = received[step.peer]++;
    }
  }
  return std::move(plan_);
}

}  // namespace plexus::daemon::algo
