#include "daemon/internode/plan_shape.h"

#include "shm/dtype.h"

namespace plexus::daemon {

algo::Collective collective_of(shm::Opcode opcode) {
  switch (opcode) {
    case shm::Opcode::kAllReduce:
      return algo::Collective::kAllreduce;
    case shm::Opcode::kReduceScatter:
      return algo::Collective::kReduceScatter;
    case shm::Opcode::kAllGather:
      return algo::Collective::kAllgather;
    case shm::Opcode::kBroadcast:
      return algo::Collective::kBroadcast;
    case shm::Opcode::kReduce:
      return algo::Collective::kReduce;
    default:
      return algo::Collective::kAlltoall;
  }
}

algo::Shape plan_shape(const NodeTopology& t, const CollectiveArgs& args) {
  algo::Shape s;
  s.collective = collective_of(args.opcode);
  s.participants = t.nodes();
  s.me = t.my_node;
  s.elem_bytes = static_cast<uint32_t>(shm::dtype_size(args.dtype));
  s.count = args.count;
  if (s.collective == algo::Collective::kBroadcast || s.collective == algo::Collective::kReduce) {
    s.root = t.rank_node[static_cast<size_t>(args.root)];
  }
  const auto mine = static_cast<uint64_t>(t.local_ranks().size());
  for (const auto& ranks : t.node_ranks) {
    const auto theirs = static_cast<uint64_t>(ranks.size());
    s.segments.push_back(theirs * args.count);
    if (s.collective == algo::Collective::kAlltoall) {
      s.send_counts.push_back(mine * theirs * args.count);
      s.recv_counts.push_back(theirs * mine * args.count);
    }
  }
  if (s.collective != algo::Collective::kAllgather &&
      s.collective != algo::Collective::kReduceScatter) {
    s.segments.clear();
  }
  return s;
}

}  // namespace plexus::daemon
