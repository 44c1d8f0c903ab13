// ProcessGroupPlexus's coalesced tensor forms (torch 2.x): what torch's _coalescing_manager
// hands over for all_gather_into_tensor and reduce_scatter_tensor called inside it (FSDP's
// pattern). Each pair is one allgather (reduce-scatter), all in one libplexus group: the
// daemon gets them together and the work completes once every one has.
#include <c10/util/Exception.h>

#include <vector>

#include "python/plexus_torch/process_group_plexus.h"
#include "python/plexus_torch/tensor_types.h"

namespace plexus::torch_backend {

#if PLEXUS_TORCH_TENSOR_COALESCED

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "ProcessGroupPlexus: allgather_into_tensor_coalesced has ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_gather_pair(outputs[i], inputs[i], "allgather_into_tensor_coalesced");
  }
  return run("allgather_into_tensor_coalesced", c10d::OpType::COALESCED, outputs,
             [&](PlexusWork& w, plexus_comm_t c) {
               for (size_t i = 0; i < inputs.size(); ++i) {
                 issue_allgather(w, c, outputs[i], inputs[i]);
               }
             });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "ProcessGroupPlexus: reduce_scatter_tensor_coalesced has ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  std::vector<plexus_redop_t> ops;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_scatter_pair(outputs[i], inputs[i], "reduce_scatter_tensor_coalesced");
    ops.push_back(plexus_redop(opts.reduceOp, outputs[i].scalar_type()));
  }
  return run("reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED, outputs,
             [&](PlexusWork& w, plexus_comm_t c) {
               for (size_t i = 0; i < inputs.size(); ++i) {
                 issue_reduce_scatter(w, c, outputs[i], inputs[i], ops[i]);
               }
             });
}

#endif

}  // namespace plexus::torch_backend
