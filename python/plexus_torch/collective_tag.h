// The tag of the sends and recvs gather, scatter and alltoall are made of (process_group_plexus.cc)
// and the check that keeps callers' sends and recvs off it (process_group_p2p.cc).
#pragma once

#include <c10/util/Exception.h>

#include <limits>

#include "plexus/plexus.h"
#include "python/plexus_torch/tensor_types.h"

namespace plexus::torch_backend {

// The tag of the sends and recvs that make up gather, scatter and alltoall: apart from every
// tag a torch caller may pass.
inline constexpr int kCollectiveTag = std::numeric_limits<int>::min();

inline void check_tag(int tag, const char* what) {
  TORCH_CHECK(tag != kCollectiveTag, "ProcessGroupPlexus: ", what, " with tag ", tag,
              ", which plexus keeps for its own collectives");
}

// A piece of gather, scatter or alltoall: `t` to or from `peer`, under kCollectiveTag.
inline plexus_result_t send_part(const at::Tensor& t, int peer, plexus_comm_t c,
                                 plexus_request_t* req) {
  return plexus_send_tagged(t.data_ptr(), elements(t), plexus_dtype(t), peer, kCollectiveTag, c,
                            req);
}
inline plexus_result_t recv_part(const at::Tensor& t, int peer, plexus_comm_t c,
                                 plexus_request_t* req) {
  return plexus_recv_tagged(t.data_ptr(), elements(t), plexus_dtype(t), peer, kCollectiveTag,
                            nullptr, c, req);
}

}  // namespace plexus::torch_backend
