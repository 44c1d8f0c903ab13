// ProcessGroupPlexus's send and recv (process_group_plexus.h), tagged, and recv from any source.
#include <string>
#include <vector>

#include "python/plexus_torch/collective_tag.h"
#include "python/plexus_torch/process_group_plexus.h"
#include "python/plexus_torch/tensor_types.h"

namespace plexus::torch_backend {

// Tags are matched as gloo and MPI match them: a recv takes the oldest message from its
// source with its tag. The collectives built of sends and recvs here (gather, scatter,
// alltoall with splits) use kCollectiveTag, which no torch caller passes.
c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::send(std::vector<at::Tensor>& tensors, int dst,
                                                        int tag) {
  check_single(tensors, "send");
  check_rank(dst, "send destination");
  check_tag(tag, "send");
  const at::Tensor t = tensors[0];
  return run("send", c10d::OpType::SEND, tensors, [&](PlexusWork& w, plexus_comm_t c) {
    at::Tensor src = readable(w, t);
    plexus_request_t req = nullptr;
    add(w, plexus_send_tagged(src.data_ptr(), elements(src), plexus_dtype(src), dst, tag, c, &req),
        req);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::recv(std::vector<at::Tensor>& tensors, int src,
                                                        int tag) {
  check_rank(src, "recv source");
  return receive(tensors, src, tag, "recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                 int tag) {
  return receive(tensors, PLEXUS_ANY_SOURCE, tag, "recvAnysource");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::receive(std::vector<at::Tensor>& tensors,
                                                           int src, int tag, const char* call) {
  check_single(tensors, call);
  check_tag(tag, call);
  const at::Tensor t = tensors[0];
  return run(call, c10d::OpType::RECV, tensors, [&](PlexusWork& w, plexus_comm_t c) {
    at::Tensor dst = writable(w, t);
    plexus_request_t req = nullptr;
    add(w,
        plexus_recv_tagged(dst.data_ptr(), elements(dst), plexus_dtype(dst), src, tag,
                           &w.source_rank, c, &req),
        req);
  });
}

}  // namespace plexus::torch_backend
