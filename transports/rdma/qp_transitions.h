// The state changes of an RDMA path's RC queue pair (rdma_path.cc), as the attributes and
// the attribute mask ibv_modify_qp takes: RESET -> INIT (its port; the peer may only write
// into this side's memory), INIT -> RTR (the peer's queue pair, GID and PSN from its setup
// message, the smaller of the two path MTUs), RTR -> RTS (ack timeout and retries, this
// side's PSN), and any -> ERR (what plexusctl nic fault does). Built apart from the calls
// so that the masks, which verbs only check at run time on a device, are tested without one.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "transports/rdma/rdma_hello.h"

namespace plexus::transports::rdma {

struct QpTransition {
  ibv_qp_attr attr{};
  int mask = 0;
};

QpTransition init_transition(uint8_t port);
// `port`, `gid_index`, `local_mtu`: this side's verbs port (verbs_port.h).
QpTransition rtr_transition(const Hello& peer, uint8_t port, uint32_t gid_index, ibv_mtu local_mtu);
// `ack_timeout`: 4.096 us x 2^ack_timeout per try; `retry_count` tries (rdma_path.h).
QpTransition rts_transition(uint8_t ack_timeout, uint8_t retry_count, uint32_t psn);
QpTransition error_transition();

}  // namespace plexus::transports::rdma
