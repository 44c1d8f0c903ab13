// Whether the data connections set up over a local address can offer RDMA: --transport
// allows it, a verbs port holds the address and is active, RLIMIT_MEMLOCK leaves room for
// the rings one path pins, and the node's pinned-memory bound (--rdma-pinned-max-bytes) has
// room for them beside the paths open now. Owns the verdict per local address, kept for the
// daemon's life (finding a verbs port opens the devices), and the node's RDMA state that the
// paths share: that bound and the opened devices (transports/rdma/verbs_devices.h), handed to
// every RDMA path's opener. Control thread only (PeerConnections'); the paths use the devices
// on the links' thread. The control thread holds each offered path's rings against the bound
// (so offers made at once cannot count on the same room) and the path takes the hold over.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "daemon/peers/data_transport.h"
#include "transports/rdma/pinned_budget.h"
#include "transports/rdma/rdma_path.h"

namespace plexus::daemon {

class RdmaOffers {
 public:
  RdmaOffers(DataTransport transport, const transports::rdma::RdmaSettings& rdma);

  // Whether a connection over socket `fd` (its local address) can offer RDMA; if so, the
  // rings of the path it would carry are held in `reserved` (dropped if RDMA is not agreed).
  bool offers(int fd, transports::rdma::PinnedBudget::Hold* reserved);
  // What every RDMA path's opener is given (null where this build has no RDMA).
  const std::shared_ptr<transports::rdma::VerbsDevices>& devices() const { return devices_; }

 private:
  DataTransport transport_;
  uint64_t pinned_bytes_;              // what one RDMA path pins (path_pinned_bytes)
  std::map<uint32_t, bool> verdicts_;  // by local IPv4 address (network order)
  std::shared_ptr<transports::rdma::PinnedBudget> budget_;
  std::shared_ptr<transports::rdma::VerbsDevices> devices_;
  bool bound_spent_ = false;  // the last offer was refused for the bound (logged once a spell)
};

}  // namespace plexus::daemon
