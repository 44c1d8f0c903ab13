// The engine's per-communicator state for collectives between daemons: the op running
// now (one at a time, in op order), frames that arrived for ops not started yet, and the
// scratch memory the ops share. Engine thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "daemon/internode_op.h"

namespace plexus::daemon {

// A data frame kept until its op starts.
struct HeldFrame {
  int node = 0;
  uint64_t op_seq = 0;
  uint32_t message = 0;
  uint64_t offset = 0;
  std::vector<std::byte> payload;
};

struct InternodeState {
  std::shared_ptr<OpScratch> scratch = std::make_shared<OpScratch>();
  std::shared_ptr<InternodeOp> active;  // shared: send completions hold it weakly
  uint64_t active_seq = 0;              // op number of `active`
  std::deque<HeldFrame> early;          // frames for later ops
  size_t early_bytes = 0;
  std::string failure;  // set inside a transport callback; acted on by the engine loop
};

// Frames held for a later op, per communicator, before the communicator fails with the
// sender named (a peer that runs this far ahead is broken, or a broadcast root outran
// its receivers by more than this).
inline constexpr size_t kMaxEarlyBytesPerComm = size_t{1} << 30;
// Frames for communicators this node has not formed yet (it is still connecting).
inline constexpr size_t kMaxUnknownCommBytes = size_t{256} << 20;

}  // namespace plexus::daemon
