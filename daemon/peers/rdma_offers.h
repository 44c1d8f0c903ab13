// Whether the data connections set up over a local address can offer RDMA: --transport
// allows it, a verbs port holds the address and is active, and RLIMIT_MEMLOCK leaves room
// for the rings one path pins. Owns the verdict per local address, kept for the daemon's
// life: finding a verbs port opens the devices. Control thread only (PeerConnections').
#pragma once

#include <cstdint>
#include <map>

#include "daemon/peers/data_transport.h"
#include "transports/rdma/rdma_path.h"

namespace plexus::daemon {

class RdmaOffers {
 public:
  RdmaOffers(DataTransport transport, const transports::rdma::RdmaSettings& rdma)
      : transport_(transport), pinned_bytes_(rdma.ring_bytes + rdma.bounce_bytes + (1u << 20)) {}

  // Whether a connection over socket `fd` (its local address) can offer RDMA.
  bool offers(int fd);

 private:
  DataTransport transport_;
  uint64_t pinned_bytes_;              // what one RDMA path pins: its rings, and a margin
  std::map<uint32_t, bool> verdicts_;  // by local IPv4 address (network order)
};

}  // namespace plexus::daemon
