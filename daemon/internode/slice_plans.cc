#include "daemon/internode/slice_plans.h"

#include "daemon/internode/plan_shape.h"
#include "shm/dtype.h"

namespace plexus::daemon {
namespace {

uint64_t receives(const algo::Plan& plan, int node) {
  uint64_t bytes = 0;
  for (const algo::Step& step : plan.steps) {
    const bool receive =
        step.kind == algo::StepKind::kRecv || step.kind == algo::StepKind::kRecvReduce;
    if (receive && step.peer == node) bytes += step.bytes;
  }
  return bytes;
}

}  // namespace

SlicePlans::SlicePlans(const NodeTopology& topology, const CollectiveArgs& args,
                       algo::Algorithm algorithm, uint64_t work_bytes,
                       const std::vector<double>& speeds)
    : layout_(slice_layout(collective_of(args.opcode), args.count,
                           static_cast<uint32_t>(shm::dtype_size(args.dtype)), topology.nranks(),
                           work_bytes)) {
  CollectiveArgs slice_args = args;
  slice_args.count = layout_.count_of(0);
  auto plan = [&] {
    algo::Shape shape = plan_shape(topology, slice_args);
    shape.speeds = speeds;
    algo::Plan made = algo::make_plan(algorithm, shape);
    if (failure_.empty()) failure_ = check_plan_sliceable(made);
    return made;
  };
  full_plan_ = plan();
  const uint64_t last = layout_.count_of(layout_.slices - 1);
  if (last != slice_args.count) {
    slice_args.count = last;
    last_plan_ = plan();
  }
}

const algo::Plan& SlicePlans::plan_of(uint64_t slice) const {
  const bool last = slice + 1 == layout_.slices && layout_.count_of(slice) != layout_.count_of(0);
  return last ? last_plan_ : full_plan_;
}

uint64_t SlicePlans::receives_from(int node, uint64_t first_slice) const {
  if (first_slice >= layout_.slices) return 0;
  const uint64_t later = layout_.slices - first_slice - 1;
  return later * receives(full_plan_, node) + receives(plan_of(layout_.slices - 1), node);
}

}  // namespace plexus::daemon
