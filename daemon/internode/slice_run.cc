#include "daemon/internode/slice_run.h"

#include <utility>

#include "daemon/internode/op_slices.h"

namespace plexus::daemon {

SliceRun::SliceRun(uint64_t index, std::shared_ptr<OpScratch> scratch,
                   LocalPhases::SliceMemory memory, Rounds rounds)
    : index_(index),
      scratch_(std::move(scratch)),
      memory_(std::move(memory)),
      post_send_(rounds.post_send) {
  algo::PlanBuffers buffers{memory_.work.data(), memory_.work.size(), scratch_->send.data(),
                            scratch_->send.size(), rounds.elem_bytes};
  runner_ =
      std::make_unique<algo::PlanRunner>(rounds.plan, buffers, std::move(rounds.reduce), *this);
}

void SliceRun::start(StageClock::Clock::time_point began) {
  rounds_began_ = began;
  runner_->start();
}

void SliceRun::post_send(int peer, uint32_t message, std::span<const std::byte> data) {
  post_send_(peer, transports::wire::encode_collective_step({index_, message}), data,
             memory_.keep_alive);
}

}  // namespace plexus::daemon
