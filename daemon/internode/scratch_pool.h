// The scratch memory a multi-node communicator's slices take turns with. Engine thread:
// InternodeOp takes a buffer as each slice starts; the transport keeps a reference while it
// may still read a slice's sends.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace plexus::daemon {

// Scratch memory of one slice.
struct OpScratch {
  std::vector<std::byte> work;
  std::vector<std::byte> send;
};

// The scratch buffers a communicator's slices take turns with. A buffer is free when the
// pool holds the only reference (the transport keeps one while it may still read it).
class ScratchPool {
 public:
  std::shared_ptr<OpScratch> take();
  size_t size() const { return buffers_.size(); }
  // Lets every buffer go (a parked communicator's): the idle ones are freed now, one a link
  // still reads once it lets go. Returns their bytes. take() makes new ones as needed.
  uint64_t release();

 private:
  std::vector<std::shared_ptr<OpScratch>> buffers_;
};

}  // namespace plexus::daemon
