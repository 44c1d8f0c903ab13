// Slice layout: as many elements per slice as fit the slice size, never more slices than
// the frame's step field can number.
#include "daemon/internode/op_slices.h"

#include <algorithm>

namespace plexus::daemon {

uint64_t SliceLayout::count_of(uint64_t slice) const {
  if (slice >= slices) return 0;
  return std::min(count - first(slice), elems_per_slice);
}

SliceLayout slice_layout(algo::Collective collective, uint64_t count, uint32_t elem_bytes,
                         int nranks, uint64_t work_bytes) {
  SliceLayout layout;
  layout.count = count;
  const bool per_rank_blocks = collective == algo::Collective::kAllgather ||
                               collective == algo::Collective::kReduceScatter ||
                               collective == algo::Collective::kAlltoall;
  const uint64_t bytes_per_elem =
      uint64_t{std::max<uint32_t>(elem_bytes, 1)} *
      (per_rank_blocks ? static_cast<uint64_t>(std::max(nranks, 1)) : 1);
  uint64_t per_slice = std::max<uint64_t>(1, work_bytes / bytes_per_elem);
  per_slice = std::max(per_slice, (count + kMaxSlices - 1) / kMaxSlices);
  layout.elems_per_slice = count == 0 ? 0 : std::min(per_slice, count);
  layout.slices = count == 0 ? 1 : (count + layout.elems_per_slice - 1) / layout.elems_per_slice;
  return layout;
}

std::string check_plan_sliceable(const algo::Plan& plan) {
  for (const algo::Step& step : plan.steps) {
    if (step.kind != algo::StepKind::kCopy && step.message >= kMaxMessagesPerSlice) {
      return "the " + plan.algorithm + " plan exchanges more than " +
             std::to_string(kMaxMessagesPerSlice) + " messages with one node per slice";
    }
  }
  return {};
}

}  // namespace plexus::daemon
