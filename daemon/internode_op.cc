// The hierarchical phases of each collective around the inter-node plan.
#include "daemon/internode_op.h"

#include <cstring>

#include "daemon/reduce.h"
#include "shm/dtype.h"
#include "shm/ring_layout.h"

namespace plexus::daemon {

algo::Collective InternodeOp::collective_of(shm::Opcode opcode) {
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

algo::Shape InternodeOp::shape_for(const NodeTopology& t, const CollectiveArgs& args) {
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

InternodeOp::InternodeOp(const NodeTopology& topology, const CollectiveArgs& args,
                         std::vector<Contribution> local_parts, algo::Algorithm algorithm,
                         std::shared_ptr<OpScratch> scratch, PostSend post_send)
    : topology_(topology),
      args_(args),
      parts_(std::move(local_parts)),
      scratch_(std::move(scratch)),
      post_send_(std::move(post_send)),
      elem_(static_cast<uint32_t>(shm::dtype_size(args.dtype))),
      network_op_(args.redop == PLEXUS_AVG ? PLEXUS_SUM : args.redop),
      shape_(shape_for(topology, args)),
      plan_(algo::make_plan(algorithm, shape_)) {}

uint64_t InternodeOp::node_order_offset(int rank, uint64_t block) const {
  const int node = topology_.rank_node[static_cast<size_t>(rank)];
  uint64_t before = 0;
  for (int n = 0; n < node; ++n) before += topology_.node_ranks[static_cast<size_t>(n)].size();
  return (before + static_cast<uint64_t>(topology_.index_in_node(rank))) * block;
}

void InternodeOp::reduce_into(std::byte* out, std::span<const std::byte* const> inputs,
                              uint64_t count) {
  reduce_arrays(args_.dtype, network_op_, reinterpret_cast<const void* const*>(inputs.data()),
                static_cast<int>(inputs.size()), out, count, 1);
}

// The last copy to a rank's buffer divides an average by the communicator's size.
void InternodeOp::copy_out(std::byte* dst, const std::byte* src, uint64_t count) {
  if (args_.redop == PLEXUS_AVG && shm::uses_redop(args_.opcode)) {
    const void* in = src;
    reduce_arrays(args_.dtype, PLEXUS_AVG, &in, 1, dst, count,
                  static_cast<uint32_t>(topology_.nranks()));
  } else {
    std::memmove(dst, src, count * elem_);
  }
}

void InternodeOp::local_phase_in() {
  const uint64_t c = args_.count;
  const uint64_t e = elem_;
  const auto k = parts_.size();
  const auto nranks = static_cast<uint64_t>(topology_.nranks());
  OpScratch& s = *scratch_;
  switch (shape_.collective) {
    case algo::Collective::kAllreduce:
    case algo::Collective::kReduce:
      s.work.resize(c * e);
      if (c > 0) reduce_into(s.work.data(), inputs_, c);
      break;
    case algo::Collective::kBroadcast:
      s.work.resize(c * e);
      if (topology_.rank_node[static_cast<size_t>(args_.root)] == topology_.my_node && c > 0) {
        const Contribution& root = parts_[static_cast<size_t>(topology_.index_in_node(args_.root))];
        std::memcpy(s.work.data(), root.send, c * e);
      }
      break;
    case algo::Collective::kAllgather:
      s.work.resize(nranks * c * e);
      for (size_t i = 0; i < k; ++i) {
        std::memcpy(s.work.data() + node_order_offset(parts_[i].rank, c) * e, parts_[i].send,
                    c * e);
      }
      break;
    case algo::Collective::kReduceScatter: {
      s.work.resize(nranks * c * e);
      std::vector<const std::byte*> blocks(k);
      for (int r = 0; r < topology_.nranks(); ++r) {
        for (size_t i = 0; i < k; ++i) blocks[i] = inputs_[i] + static_cast<uint64_t>(r) * c * e;
        if (c > 0) reduce_into(s.work.data() + node_order_offset(r, c) * e, blocks, c);
      }
      break;
    }
    case algo::Collective::kAlltoall: {
      // To node j: for each of my ranks s (in order), its blocks for each rank of j.
      uint64_t out = 0;
      s.send.resize(k * nranks * c * e);
      for (const auto& theirs : topology_.node_ranks) {
        for (size_t i = 0; i < k; ++i) {
          for (int d : theirs) {
            std::memcpy(s.send.data() + out, inputs_[i] + static_cast<uint64_t>(d) * c * e, c * e);
            out += c * e;
          }
        }
      }
      s.work.resize(nranks * k * c * e);
      break;
    }
  }
}

void InternodeOp::start() {
  const auto k = parts_.size();
  OpScratch& s = *scratch_;
  inputs_.resize(k);
  for (size_t i = 0; i < k; ++i) inputs_[i] = parts_[i].send;
  // Count 0: the parts have no buffers at all (null pointers), and the plan is empty.
  if (args_.count > 0) local_phase_in();
  algo::PlanBuffers buffers{s.work.data(), s.work.size(), s.send.data(), s.send.size(), elem_};
  auto reduce = [this](std::byte* inout, const std::byte* in, size_t bytes) {
    const void* both[2] = {inout, in};
    reduce_arrays(args_.dtype, network_op_, both, 2, inout, bytes / elem_, 1);
  };
  runner_ = std::make_unique<algo::PlanRunner>(plan_, buffers, reduce, *this);
  runner_->start();
}

void InternodeOp::post_send(int peer, uint32_t message, std::span<const std::byte> data) {
  post_send_(peer, message, data);
}

std::string InternodeOp::deliver(int node, uint32_t message, uint64_t offset,
                                 std::span<const std::byte> data) {
  return runner_->deliver(node, message, offset, data);
}

void InternodeOp::send_done(int node, uint32_t message) { runner_->send_done(node, message); }

uint64_t InternodeOp::finish() {
  const uint64_t c = args_.count;
  if (c == 0) return 0;
  const uint64_t e = elem_;
  const std::byte* w = scratch_->work.data();
  uint64_t written = 0;
  switch (shape_.collective) {
    case algo::Collective::kAllreduce:
    case algo::Collective::kBroadcast:
      for (const Contribution& part : parts_) {
        copy_out(part.recv, w, c);
        written += c * e;
      }
      break;
    case algo::Collective::kReduce:
      for (const Contribution& part : parts_) {
        if (part.rank != args_.root) continue;
        copy_out(part.recv, w, c);
        written += c * e;
      }
      break;
    case algo::Collective::kAllgather:
      for (const Contribution& part : parts_) {
        for (int r = 0; r < topology_.nranks(); ++r) {
          std::memmove(part.recv + static_cast<uint64_t>(r) * c * e,
                       w + node_order_offset(r, c) * e, c * e);
        }
        written += static_cast<uint64_t>(topology_.nranks()) * c * e;
      }
      break;
    case algo::Collective::kReduceScatter:
      for (const Contribution& part : parts_) {
        copy_out(part.recv, w + node_order_offset(part.rank, c) * e, c);
        written += c * e;
      }
      break;
    case algo::Collective::kAlltoall: {
      // From node i: for each of its ranks s, its blocks for each of my ranks.
      const auto k = static_cast<uint64_t>(parts_.size());
      uint64_t from = 0;
      for (const auto& theirs : topology_.node_ranks) {
        for (int src : theirs) {
          for (uint64_t d = 0; d < k; ++d) {
            std::memcpy(parts_[d].recv + static_cast<uint64_t>(src) * c * e, w + from, c * e);
            from += c * e;
          }
        }
      }
      written = k * static_cast<uint64_t>(topology_.nranks()) * c * e;
      break;
    }
  }
  return written;
}

}  // namespace plexus::daemon
