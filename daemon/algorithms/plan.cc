// Round bookkeeping for plans: message numbering and the deferred-receive rule.
#include "daemon/algorithms/plan.h"

#include <map>

namespace plexus::daemon::algo {

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

namespace {

bool overlaps(uint64_t a, uint64_t a_bytes, uint64_t b, uint64_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

Plan PlanBuilder::finish() {
  end_round();
  std::map<int, uint32_t> sent;
  std::map<int, uint32_t> received;
  for (size_t round = 0; round < plan_.rounds(); ++round) {
    const uint32_t begin = plan_.round_begin(round);
    const uint32_t end = plan_.round_ends[round];
    for (uint32_t i = begin; i < end; ++i) {
      Step& step = plan_.steps[i];
      if (step.kind == StepKind::kSend) {
        step.message = sent[step.peer]++;
      } else if (step.kind == StepKind::kRecv || step.kind == StepKind::kRecvReduce) {
        step.message = received[step.peer]++;
        for (uint32_t j = begin; j < end; ++j) {
          const Step& other = plan_.steps[j];
          if (other.kind == StepKind::kSend && other.buffer == BufferId::kWork &&
              overlaps(step.offset, step.bytes, other.offset, other.bytes)) {
            step.deferred = true;
          }
        }
      }
    }
  }
  return std::move(plan_);
}

}  // namespace plexus::daemon::algo
