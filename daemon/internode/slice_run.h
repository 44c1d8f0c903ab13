// One slice of an InternodeOp while its rounds run: the scratch it took, where its rounds
// run (LocalPhases::SliceMemory: scratch, or the rank's buffer) and what the transport holds
// for it, and the plan runner. It is the runner's transport: each send goes out numbered
// with the slice (transports::wire::encode_collective_step) and holding the slice's memory. Owns
// those; the op routes each piece of the network to its slice. Engine thread, called by
// InternodeOp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "daemon/algorithms/plan_runner.h"
#include "daemon/internode/local_phases.h"
#include "daemon/internode/scratch_pool.h"
#include "daemon/internode/stage_clock.h"

namespace plexus::daemon {

class SliceRun final : public algo::PlanTransport {
 public:
  // Sends `data` to node `node` as message `message` of the op; `keep_alive` owns the
  // memory. The op's send_done must follow once the bytes may change.
  using PostSend = std::function<void(int node, uint32_t message, std::span<const std::byte> data,
                                      std::shared_ptr<void> keep_alive)>;
  // What the slice's rounds run: `plan` over its memory, reducing with `reduce`, sending
  // through `post_send` (the op's, which outlives the slice).
  struct Rounds {
    const algo::Plan& plan;
    algo::ReduceFn reduce;
    uint32_t elem_bytes;
    const PostSend& post_send;
  };

  SliceRun(uint64_t index, std::shared_ptr<OpScratch> scratch, LocalPhases::SliceMemory memory,
           Rounds rounds);
  SliceRun(const SliceRun&) = delete;
  SliceRun& operator=(const SliceRun&) = delete;

  // Starts the rounds, which began at `began` (StageClock).
  void start(StageClock::Clock::time_point began);
  algo::PlanRunner& runner() { return *runner_; }
  const algo::PlanRunner& runner() const { return *runner_; }
  uint64_t index() const { return index_; }
  std::span<std::byte> work() const { return memory_.work; }
  // What sends and placements into the slice hold (NodeLinks::abandon_placements).
  const std::shared_ptr<void>& keep_alive() const { return memory_.keep_alive; }
  StageClock::Clock::time_point rounds_began() const { return rounds_began_; }

  void post_send(int peer, uint32_t message, std::span<const std::byte> data) override;

 private:
  uint64_t index_;
  std::shared_ptr<OpScratch> scratch_;  // its send buffer
  LocalPhases::SliceMemory memory_;
  const PostSend& post_send_;
  StageClock::Clock::time_point rounds_began_{};  // timed ops only
  std::unique_ptr<algo::PlanRunner> runner_;      // last: it reads the memory above
};

}  // namespace plexus::daemon
