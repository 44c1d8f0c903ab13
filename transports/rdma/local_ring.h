// The receiver's side of the ring a peer writes frames into (RemoteRing is the sender's):
// checks that each frame is exactly where the ring's rule puts it (next after the last one,
// or at offset 0 when it would not fit before the end) and counts what it has consumed, which
// it reports back as credit. A frame anywhere else means a confused or hostile peer: the path
// fails rather than read a frame that overlaps one not yet consumed.
#pragma once

#include <cstdint>
#include <string>

#include "transports/rdma/remote_ring.h"

namespace plexus::transports::rdma {

class LocalRing {
 public:
  explicit LocalRing(uint64_t size) : size_(size) {}

  // Whether a frame's header may be read at `offset` (from the immediate value): aligned,
  // and where the ring's rule allows a frame to start now.
  std::string check_start(uint64_t offset) const;
  // The frame at `offset` (checked by check_start), `bytes` long (its header and payload),
  // has been handled: its space, and any skipped before it, is consumed. Empty, or why the
  // frame cannot be there (it would run past the end, or should have started elsewhere).
  std::string consume(uint64_t offset, uint64_t bytes);

  uint64_t consumed() const { return consumed_; }
  uint64_t size() const { return size_; }
  // Whether to report credit now: a quarter of the ring consumed since the last report
  // (`reported`), so the sender never stalls on a full ring while credit sits here. The path
  // also reports whatever is left when it has no more completions to handle.
  bool credit_due(uint64_t reported) const { return consumed_ - reported >= size_ / 4; }

 private:
  uint64_t size_;
  uint64_t consumed_ = 0;
};

}  // namespace plexus::transports::rdma
