// How an InternodeOp is cut into slices (op_slices.h) and the plans its slices run: the
// algorithm's plan for a full slice, and one more for a shorter last slice, each made once
// per op. Owns the layout and both plans. Engine thread, made and read by InternodeOp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/algorithms/algorithm.h"
#include "daemon/internode/node_topology.h"
#include "daemon/internode/op_slices.h"
#include "daemon/local/local_collectives.h"

namespace plexus::daemon {

class SlicePlans {
 public:
  // Slices of about `work_bytes` (kSliceWorkBytes between daemons); `speeds`: the nodes'
  // agreed speeds (algo::Shape::speeds; empty: alike).
  SlicePlans(const NodeTopology& topology, const CollectiveArgs& args, algo::Algorithm algorithm,
             uint64_t work_bytes, const std::vector<double>& speeds);

  const SliceLayout& layout() const { return layout_; }
  const algo::Plan& plan_of(uint64_t slice) const;
  // Empty, or why the plans cannot run as slices (check_plan_sliceable).
  const std::string& failure() const { return failure_; }
  // Bytes the slices from `first_slice` on receive from `node`.
  uint64_t receives_from(int node, uint64_t first_slice) const;

 private:
  SliceLayout layout_;
  algo::Plan full_plan_;  // a slice of layout_.elems_per_slice
  algo::Plan last_plan_;  // the last slice, when it is shorter
  std::string failure_;
};

}  // namespace plexus::daemon
