// The sender's view of the receive ring a peer exposes on an RDMA path: where the next frame
// goes and whether it fits. Frames are written whole (48-byte header and payload) with RDMA
// WRITE WITH IMMEDIATE at 64-byte aligned offsets, never across the ring's end: a frame that
// does not fit before the end skips to offset 0, and the receiver, which knows where it
// expected the frame, counts the skipped bytes as consumed too. The receiver hands the space
// back by reporting how many bytes it has consumed in all (RingCredit), which bounds what is
// in flight to the ring's size and so never overwrites a frame not yet read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace plexus::transports::rdma {

// Frames start at multiples of this: the header's 8-byte fields stay aligned, and the
// immediate value (the offset in these units) addresses rings up to 256 GiB.
inline constexpr uint64_t kRingAlign = 64;

inline uint64_t ring_align_up(uint64_t bytes) {
  return (bytes + kRingAlign - 1) & ~(kRingAlign - 1);
}

// A peer's report of what it has consumed in all (`reported`, in `units`), against what was
// last known (`known`) and what was sent (`sent`): empty, or why it cannot be (going back, or
// beyond what was sent). Ring bytes and frames are checked alike.
std::string check_consumed(uint64_t known, uint64_t reported, uint64_t sent, const char* units);

class RemoteRing {
 public:
  // `size`: the peer's ring, a multiple of kRingAlign.
  explicit RemoteRing(uint64_t size) : size_(size) {}

  struct Slot {
    uint64_t offset;   // where the frame goes in the peer's ring
    uint64_t skipped;  // bytes left unused before the end of the ring to get there
  };
  // Where a frame of `bytes` (header and payload) would go now, or nothing while the peer
  // has not freed enough. A frame larger than the ring never fits (the caller refuses it).
  std::optional<Slot> place(uint64_t bytes) const;
  // The frame was posted at that slot.
  void commit(const Slot& slot, uint64_t bytes);
  // The peer reports `consumed` bytes consumed in all (skips included). Returns an empty
  // string, or why the report is impossible (beyond what was written, or going back).
  std::string on_credit(uint64_t consumed);

  uint64_t size() const { return size_; }
  // Bytes written and not yet handed back, skips included (so, after a skip into an empty
  // ring, more than the ring's size until the receiver reads that frame).
  uint64_t in_flight() const { return written_ - consumed_; }
  uint64_t written() const { return written_; }

 private:
  uint64_t size_;
  uint64_t written_ = 0;   // bytes taken from the ring in all, skips included
  uint64_t consumed_ = 0;  // bytes the peer has handed back in all
};

}  // namespace plexus::transports::rdma
