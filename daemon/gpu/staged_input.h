// A staged op's input copied from the device into its host copy by the copy engines, in
// pieces of kPieceBytes in order, so that an op between nodes can start on its first slices
// while the rest comes in. Owns the copies in flight, how much of the input is in (a
// prefix) and the first copy's error; the op owns the host memory and keeps the mapping.
// Engine thread, which polls the pieces rather than waits for them.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "daemon/gpu/device_memory.h"

namespace plexus::daemon::gpu {

class StagedInput {
 public:
  static constexpr uint64_t kPieceBytes = 4u << 20;

  // Starts copying [offset, offset + bytes) of `mapping` into `host` (bytes 0: nothing to
  // copy, as for an op with no host copy).
  void start(DeviceMemory& device, std::byte* host, const DeviceMapping* mapping, uint64_t offset,
             uint64_t bytes);
  // The input was copied in at once, waiting (StagedOp::stage_now).
  void mark_in() { started_ = true; }
  bool started() const { return started_; }
  // False while the input is not yet in; true once it is; why not once a piece failed
  // (each time it is asked, once all pieces ended).
  common::Result<bool> ready();
  // Whether the first `bytes` of the copied range are in host memory; why not once a
  // piece's copy failed.
  common::Result<bool> in_through(uint64_t bytes);
  // Whether pieces are still being copied in.
  bool arriving();

 private:
  // Takes the pieces that have ended, in order.
  void poll();

  struct Piece {
    uint64_t end;  // of the copied range, once this piece is in
    std::unique_ptr<CopyInFlight> copy;
  };
  bool started_ = false;
  std::deque<Piece> pieces_;  // in order
  uint64_t in_ = 0;           // bytes of the range in host memory
  std::string error_;         // of the first piece that failed
};

}  // namespace plexus::daemon::gpu
