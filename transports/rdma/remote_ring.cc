#include "transports/rdma/remote_ring.h"

namespace plexus::transports::rdma {

std::optional<RemoteRing::Slot> RemoteRing::place(uint64_t bytes) const {
  const uint64_t need = ring_align_up(bytes);
  if (need > size_) return std::nullopt;
  const uint64_t at = written_ % size_;
  const uint64_t skipped = at + need > size_ ? size_ - at : 0;
  // Nothing unread in the ring: any place is free (the skipped bytes count as consumed
  // only once the receiver reads the frame after them, which must not hold this one back).
  if (in_flight() != 0 && in_flight() + skipped + need > size_) return std::nullopt;
  return Slot{skipped != 0 ? 0 : at, skipped};
}

void RemoteRing::commit(const Slot& slot, uint64_t bytes) {
  written_ += slot.skipped + ring_align_up(bytes);
}

std::string check_consumed(uint64_t known, uint64_t reported, uint64_t sent, const char* units) {
  if (reported < known) {
    return std::string("the peer's credit went back (") + std::to_string(reported) + " " + units +
           " consumed after " + std::to_string(known) + ")";
  }
  if (reported > sent) {
    return "the peer reports " + std::to_string(reported) + " " + units + " consumed but only " +
           std::to_string(sent) + " were sent";
  }
  return {};
}

std::string RemoteRing::on_credit(uint64_t consumed) {
  if (std::string why = check_consumed(consumed_, consumed, written_, "bytes"); !why.empty()) {
    return why;
  }
  consumed_ = consumed;
  return {};
}

}  // namespace plexus::transports::rdma
