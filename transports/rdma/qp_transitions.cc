#include "transports/rdma/qp_transitions.h"

#include <algorithm>

namespace plexus::transports::rdma {

QpTransition init_transition(uint8_t port) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_INIT;
  t.attr.pkey_index = 0;
  t.attr.port_num = port;
  t.attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;  // the peer writes frames; nothing more
  t.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  return t;
}

QpTransition rtr_transition(const Hello& peer, uint8_t port, uint32_t gid_index,
                            ibv_mtu local_mtu) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTR;
  t.attr.path_mtu = static_cast<ibv_mtu>(std::min<uint32_t>(peer.mtu, local_mtu));
  t.attr.dest_qp_num = peer.qpn;
  t.attr.rq_psn = peer.psn;
  t.attr.max_dest_rd_atomic = 1;
  t.attr.min_rnr_timer = 12;     // 0.64 ms
  t.attr.ah_attr.is_global = 1;  // RoCE: routed by GID
  t.attr.ah_attr.grh.dgid = peer.gid;
  t.attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
  t.attr.ah_attr.grh.hop_limit = 64;
  t.attr.ah_attr.port_num = port;
  t.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return t;
}

QpTransition rts_transition(uint8_t ack_timeout, uint8_t retry_count, uint32_t psn) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTS;
  t.attr.timeout = ack_timeout;
  t.attr.retry_cnt = retry_count;
  t.attr.rnr_retry = 7;  // receives are reposted as frames are handled: wait for them
  t.attr.sq_psn = psn;
  t.attr.max_rd_atomic = 1;
  t.mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
           IBV_QP_MAX_QP_RD_ATOMIC;
  return t;
}

QpTransition error_transition() {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_ERR;
  t.mask = IBV_QP_STATE;
  return t;
}

}  // namespace plexus::transports::rdma
