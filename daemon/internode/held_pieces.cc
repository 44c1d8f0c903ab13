#include "daemon/internode/held_pieces.h"

namespace plexus::daemon {

std::string HeldPieces::hold(int node, uint64_t slice, uint32_t message, uint64_t offset,
                             std::span<const std::byte> data) {
  if (bytes_ + data.size() > kMaxHeldSliceBytes) {
    return "more than 1 GiB of data ahead of this node";
  }
  bytes_ += data.size();
  pieces_.push_back(Piece{node, slice, message, offset, {data.begin(), data.end()}});
  return {};
}

std::vector<HeldPieces::Piece> HeldPieces::take(uint64_t slice) {
  std::vector<Piece> taken;
  for (auto it = pieces_.begin(); it != pieces_.end();) {
    if (it->slice != slice) {
      ++it;
      continue;
    }
    bytes_ -= it->data.size();
    taken.push_back(std::move(*it));
    it = pieces_.erase(it);
  }
  return taken;
}

uint64_t HeldPieces::bytes_from(int node) const {
  uint64_t bytes = 0;
  for (const Piece& piece : pieces_) {
    if (piece.node == node) bytes += piece.data.size();
  }
  return bytes;
}

}  // namespace plexus::daemon
