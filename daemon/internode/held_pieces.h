// Pieces of an InternodeOp's messages that came for slices not started yet (a peer's slice
// may run ahead of this node's), held in arrival order until their slice starts. Bounded:
// a peer that runs this far ahead is broken, or a broadcast root outran its receivers.
// Owns the pieces' copies. Engine thread, called by InternodeOp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace plexus::daemon {

// Pieces held for slices not started yet, before the op fails naming the sender.
inline constexpr uint64_t kMaxHeldSliceBytes = uint64_t{1} << 30;

class HeldPieces {
 public:
  struct Piece {
    int node;
    uint64_t slice;
    uint32_t message;  // within the slice
    uint64_t offset;
    std::vector<std::byte> data;
  };

  // Keeps a copy of `data` for slice `slice`: "" or why not (over kMaxHeldSliceBytes).
  std::string hold(int node, uint64_t slice, uint32_t message, uint64_t offset,
                   std::span<const std::byte> data);
  // Hands over the pieces of slice `slice`, in arrival order.
  std::vector<Piece> take(uint64_t slice);
  // Bytes held from `node`.
  uint64_t bytes_from(int node) const;

 private:
  std::vector<Piece> pieces_;
  uint64_t bytes_ = 0;
};

}  // namespace plexus::daemon
