// The hierarchical phases of each collective around the inter-node plan.
#include "daemon/internode/internode_op.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "daemon/local/reduce.h"
#include "shm/dtype.h"
#include "shm/ring_layout.h"

namespace plexus::daemon {

using Clock = std::chrono::steady_clock;

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

// A slice's view of the network: its runner numbers messages within the slice.
class InternodeOp::SliceTransport final : public algo::PlanTransport {
 public:
  SliceTransport(InternodeOp& op, uint64_t index) : op_(op), index_(index) {}
  void post_send(int peer, uint32_t message, std::span<const std::byte> data) override {
    op_.post_send_(peer, encode_slice_message(index_, message), data, keep_alive);
  }
  std::shared_ptr<OpScratch> scratch;
  // What a send or placement holds while the transport may touch the slice's memory: the
  // scratch, and with it the rank memory's owner when the rounds run there.
  std::shared_ptr<void> keep_alive;

 private:
  InternodeOp& op_;
  uint64_t index_;
};

struct InternodeOp::Slice {
  Slice(InternodeOp& op, uint64_t i) : index(i), transport(op, i) {}
  uint64_t index;
  uint64_t first = 0;  // element within each block
  uint64_t count = 0;
  std::span<std::byte> work;  // where the rounds run: scratch, or the rank's buffer
  SliceTransport transport;   // holds the slice's scratch
  std::unique_ptr<algo::PlanRunner> runner;
  Clock::time_point rounds_began{};  // timed ops only
};

std::shared_ptr<OpScratch> ScratchPool::take() {
  for (const auto& buffer : buffers_) {
    if (buffer.use_count() == 1) return buffer;
  }
  buffers_.push_back(std::make_shared<OpScratch>());
  return buffers_.back();
}

InternodeOp::InternodeOp(const NodeTopology& topology, const CollectiveArgs& args,
                         std::vector<Contribution> local_parts, algo::Algorithm algorithm,
                         std::shared_ptr<ScratchPool> scratch, PostSend post_send,
                         SliceOptions slices, std::shared_ptr<void> rank_memory_owner)
    : topology_(topology),
      args_(args),
      parts_(std::move(local_parts)),
      scratch_(std::move(scratch)),
      post_send_(std::move(post_send)),
      options_(slices),
      elem_(static_cast<uint32_t>(shm::dtype_size(args.dtype))),
      network_op_(args.redop == PLEXUS_AVG ? PLEXUS_SUM : args.redop),
      algorithm_(algorithm),
      layout_(slice_layout(collective_of(args.opcode), args.count, elem_, topology.nranks(),
                           options_.work_bytes)) {
  options_.in_flight = std::max<uint32_t>(options_.in_flight, 1);
  // With one rank here, an allreduce's slice is a range of that rank's receive buffer:
  // the rounds run there, saving the copies into scratch and back out.
  if (rank_memory_owner && parts_.size() == 1 &&
      collective_of(args_.opcode) == algo::Collective::kAllreduce) {
    rank_memory_owner_ = std::move(rank_memory_owner);
  }
  CollectiveArgs slice_args = args_;
  slice_args.count = layout_.count_of(0);
  auto slice_shape = [&] {
    algo::Shape shape = shape_for(topology_, slice_args);
    shape.speeds = options_.speeds;
    return shape;
  };
  full_plan_ = algo::make_plan(algorithm_, slice_shape());
  fail(check_plan_sliceable(full_plan_));
  const uint64_t last = layout_.count_of(layout_.slices - 1);
  if (last != slice_args.count) {
    slice_args.count = last;
    last_plan_ = algo::make_plan(algorithm_, slice_shape());
    fail(check_plan_sliceable(last_plan_));
  }
}

InternodeOp::~InternodeOp() = default;

const algo::Plan& InternodeOp::plan_of(uint64_t slice) const {
  const bool last = slice + 1 == layout_.slices && layout_.count_of(slice) != layout_.count_of(0);
  return last ? last_plan_ : full_plan_;
}

void InternodeOp::fail(std::string why) {
  if (failure_.empty()) failure_ = std::move(why);
}

uint64_t InternodeOp::node_order_offset(int rank, uint64_t piece) const {
  const int node = topology_.rank_node[static_cast<size_t>(rank)];
  uint64_t before = 0;
  for (int n = 0; n < node; ++n) before += topology_.node_ranks[static_cast<size_t>(n)].size();
  return (before + static_cast<uint64_t>(topology_.index_in_node(rank))) * piece;
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

// Slice elements [a, a + n) of every block; blocks lie `count` elements apart in the
// ranks' buffers and `n` apart in the slice's scratch.
void InternodeOp::local_phase_in(Slice& slice) {
  const uint64_t n = slice.count;
  const uint64_t e = elem_;
  const uint64_t a = slice.first * e;       // byte offset within a block
  const uint64_t stride = args_.count * e;  // bytes between blocks in the ranks' buffers
  const auto k = parts_.size();
  const auto nranks = static_cast<uint64_t>(topology_.nranks());
  OpScratch& s = *slice.transport.scratch;
  std::vector<const std::byte*> inputs(k);
  for (size_t i = 0; i < k; ++i) inputs[i] = parts_[i].send + a;
  if (borrows_rank_memory()) {
    slice.work = {parts_[0].recv + a, n * e};
    // In place, the input is already there; memmove: a client may pass overlapping buffers.
    if (inputs[0] != slice.work.data()) std::memmove(slice.work.data(), inputs[0], n * e);
    slice.transport.keep_alive =
        std::make_shared<std::pair<std::shared_ptr<OpScratch>, std::shared_ptr<void>>>(
            slice.transport.scratch, rank_memory_owner_);
    return;
  }
  switch (collective_of(args_.opcode)) {
    case algo::Collective::kAllreduce:
    case algo::Collective::kReduce:
      s.work.resize(n * e);
      reduce_into(s.work.data(), inputs, n);
      break;
    case algo::Collective::kBroadcast:
      s.work.resize(n * e);
      if (topology_.rank_node[static_cast<size_t>(args_.root)] == topology_.my_node) {
        const Contribution& root = parts_[static_cast<size_t>(topology_.index_in_node(args_.root))];
        std::memcpy(s.work.data(), root.send + a, n * e);
      }
      break;
    case algo::Collective::kAllgather:
      s.work.resize(nranks * n * e);
      for (size_t i = 0; i < k; ++i) {
        std::memcpy(s.work.data() + node_order_offset(parts_[i].rank, n) * e, inputs[i], n * e);
      }
      break;
    case algo::Collective::kReduceScatter: {
      s.work.resize(nranks * n * e);
      std::vector<const std::byte*> blocks(k);
      for (int r = 0; r < topology_.nranks(); ++r) {
        for (size_t i = 0; i < k; ++i) blocks[i] = inputs[i] + static_cast<uint64_t>(r) * stride;
        reduce_into(s.work.data() + node_order_offset(r, n) * e, blocks, n);
      }
      break;
    }
    case algo::Collective::kAlltoall: {
      // To node j: for each of my ranks (in order), its pieces for each rank of j.
      uint64_t out = 0;
      s.send.resize(k * nranks * n * e);
      for (const auto& theirs : topology_.node_ranks) {
        for (size_t i = 0; i < k; ++i) {
          for (int d : theirs) {
            std::memcpy(s.send.data() + out, inputs[i] + static_cast<uint64_t>(d) * stride, n * e);
            out += n * e;
          }
        }
      }
      s.work.resize(nranks * k * n * e);
      break;
    }
  }
  slice.work = {s.work.data(), s.work.size()};
}

uint64_t InternodeOp::local_phase_out(const Slice& slice) {
  const uint64_t n = slice.count;
  const uint64_t e = elem_;
  const uint64_t a = slice.first * e;
  const uint64_t stride = args_.count * e;
  const std::byte* w = slice.work.data();
  uint64_t written = 0;
  if (borrows_rank_memory()) {
    // The result is in place; an average still needs its division.
    if (args_.redop == PLEXUS_AVG) copy_out(slice.work.data(), w, n);
    return n * e;
  }
  switch (collective_of(args_.opcode)) {
    case algo::Collective::kAllreduce:
    case algo::Collective::kBroadcast:
      for (size_t i = 0; i < parts_.size(); ++i) {
        copy_out(parts_[i].recv + a, w, n);
        if (staging_.written) staging_.written(i, a, n * e);
        written += n * e;
      }
      break;
    case algo::Collective::kReduce:
      for (size_t i = 0; i < parts_.size(); ++i) {
        if (parts_[i].rank != args_.root) continue;
        copy_out(parts_[i].recv + a, w, n);
        if (staging_.written) staging_.written(i, a, n * e);
        written += n * e;
      }
      break;
    case algo::Collective::kAllgather:
      for (const Contribution& part : parts_) {
        for (int r = 0; r < topology_.nranks(); ++r) {
          std::memmove(part.recv + static_cast<uint64_t>(r) * stride + a,
                       w + node_order_offset(r, n) * e, n * e);
        }
        written += static_cast<uint64_t>(topology_.nranks()) * n * e;
      }
      break;
    case algo::Collective::kReduceScatter:
      for (size_t i = 0; i < parts_.size(); ++i) {
        copy_out(parts_[i].recv + a, w + node_order_offset(parts_[i].rank, n) * e, n);
        if (staging_.written) staging_.written(i, a, n * e);
        written += n * e;
      }
      break;
    case algo::Collective::kAlltoall: {
      // From node i: for each of its ranks, its pieces for each of my ranks.
      const auto k = static_cast<uint64_t>(parts_.size());
      uint64_t from = 0;
      for (const auto& theirs : topology_.node_ranks) {
        for (int src : theirs) {
          for (uint64_t d = 0; d < k; ++d) {
            std::memcpy(parts_[d].recv + static_cast<uint64_t>(src) * stride + a, w + from, n * e);
            from += n * e;
          }
        }
      }
      written = k * static_cast<uint64_t>(topology_.nranks()) * n * e;
      break;
    }
  }
  return written;
}

void InternodeOp::start() { pump(); }

bool InternodeOp::input_in_for(uint64_t index) {
  waiting_for_input_ = false;
  if (!staging_.input_in) return true;
  const uint64_t block = args_.count * elem_;
  const uint64_t end = (layout_.first(index) + layout_.count_of(index)) * elem_;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const uint64_t send_bytes = parts_[i].entry.send.bytes;
    if (send_bytes == 0 || block == 0) continue;
    // The slice reads [first, first + count) of every per-rank block the send span holds.
    const uint64_t needed = std::min(send_bytes, (send_bytes / block - 1) * block + end);
    std::string error;
    if (staging_.input_in(i, needed, &error)) continue;
    if (error.empty()) {
      waiting_for_input_ = true;
    } else {
      fail(std::move(error));
    }
    return false;
  }
  return true;
}

void InternodeOp::start_slice(uint64_t index) {
  auto slice = std::make_unique<Slice>(*this, index);
  slice->first = layout_.first(index);
  slice->count = layout_.count_of(index);
  slice->transport.scratch = scratch_->take();
  OpScratch& s = *slice->transport.scratch;
  slice->transport.keep_alive = slice->transport.scratch;
  const auto began = options_.timed ? Clock::now() : Clock::time_point{};
  // Count 0: the parts have no buffers at all (null pointers), and the plan is empty.
  if (slice->count > 0) {
    local_phase_in(*slice);
  } else {
    s.work.clear();
    s.send.clear();
    slice->work = {};
  }
  algo::PlanBuffers buffers{slice->work.data(), slice->work.size(), s.send.data(), s.send.size(),
                            elem_};
  auto reduce = [this](std::byte* inout, const std::byte* in, size_t bytes) {
    const void* both[2] = {inout, in};
    reduce_arrays(args_.dtype, network_op_, both, 2, inout, bytes / elem_, 1);
  };
  slice->runner =
      std::make_unique<algo::PlanRunner>(plan_of(index), buffers, reduce, slice->transport);
  if (options_.timed) {
    slice->rounds_began = Clock::now();
    stage_times_.local_in += slice->rounds_began - began;
  }
  algo::PlanRunner& runner = *slice->runner;
  running_.push_back(std::move(slice));
  ++runner_depth_;
  runner.start();
  // Pieces that came before the slice started, in arrival order.
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->slice != index) {
      ++it;
      continue;
    }
    std::string error = runner.deliver(it->node, it->message, it->offset, it->data);
    if (!error.empty()) {
      fail("node " + topology_.node_names[static_cast<size_t>(it->node)] +
           " sent data that does not fit: " + error);
    }
    held_bytes_ -= it->data.size();
    it = held_.erase(it);
  }
  --runner_depth_;
}

void InternodeOp::finish_slice(Slice& slice) {
  const auto rounds_ended = options_.timed ? Clock::now() : Clock::time_point{};
  if (slice.count > 0) written_ += local_phase_out(slice);
  ++finished_;
  if (!options_.timed) return;
  const auto rounds = rounds_ended - slice.rounds_began;
  stage_times_.network += rounds;
  stage_times_.slowest_slice_network =
      std::max<std::chrono::nanoseconds>(stage_times_.slowest_slice_network, rounds);
  stage_times_.local_out += Clock::now() - rounds_ended;
  ++stage_times_.slices;
}

void InternodeOp::pump() {
  if (runner_depth_ > 0 || pumping_) return;
  pumping_ = true;
  for (bool changed = true; changed && failure_.empty();) {
    changed = false;
    for (size_t i = 0; i < running_.size();) {
      if (!running_[i]->runner->done()) {
        ++i;
        continue;
      }
      finish_slice(*running_[i]);
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      changed = true;
    }
    while (running_.size() < options_.in_flight && next_slice_ < layout_.slices &&
           failure_.empty() && input_in_for(next_slice_)) {
      start_slice(next_slice_++);
      changed = true;
    }
  }
  pumping_ = false;
}

std::string InternodeOp::deliver(int node, uint32_t message, uint64_t offset,
                                 std::span<const std::byte> data) {
  if (!failure_.empty()) return failure_;
  const SliceMessage m = decode_slice_message(message);
  if (m.slice >= layout_.slices) {
    return "slice " + std::to_string(m.slice) + " of a collective in " +
           std::to_string(layout_.slices) + " slices";
  }
  if (m.slice >= next_slice_) {
    if (held_bytes_ + data.size() > kMaxHeldSliceBytes) {
      return "more than 1 GiB of data ahead of this node";
    }
    held_bytes_ += data.size();
    held_.push_back(HeldPiece{node, m.slice, m.message, offset, {data.begin(), data.end()}});
    return {};
  }
  for (auto& slice : running_) {
    if (slice->index != m.slice) continue;
    ++runner_depth_;
    std::string error = slice->runner->deliver(node, m.message, offset, data);
    --runner_depth_;
    if (!error.empty()) return "slice " + std::to_string(m.slice) + ": " + error;
    pump();
    return failure_;
  }
  return "data for slice " + std::to_string(m.slice) + ", which already finished";
}

InternodeOp::Slice* InternodeOp::running_slice(uint64_t index) {
  for (auto& slice : running_) {
    if (slice->index == index) return slice.get();
  }
  return nullptr;
}

InternodeOp::Placement InternodeOp::placement(int node, uint32_t message, uint64_t offset,
                                              uint64_t bytes) {
  if (!failure_.empty()) return {};
  const SliceMessage m = decode_slice_message(message);
  Slice* slice = running_slice(m.slice);
  if (slice == nullptr) return {};
  std::byte* at = slice->runner->placement(node, m.message, offset, bytes);
  if (at == nullptr) return {};
  return {{at, static_cast<size_t>(bytes)}, slice->transport.keep_alive};
}

void InternodeOp::deliver_placed(int node, uint32_t message, uint64_t offset, uint64_t bytes) {
  const SliceMessage m = decode_slice_message(message);
  Slice* slice = running_slice(m.slice);
  if (slice == nullptr) return;
  ++runner_depth_;
  slice->runner->deliver_placed(node, m.message, offset, bytes);
  --runner_depth_;
  pump();
}

void InternodeOp::send_done(int node, uint32_t message) {
  const SliceMessage m = decode_slice_message(message);
  for (auto& slice : running_) {
    if (slice->index != m.slice) continue;
    ++runner_depth_;
    slice->runner->send_done(node, m.message);
    --runner_depth_;
    break;
  }
  pump();
}

std::vector<const void*> InternodeOp::placement_owners() const {
  std::vector<const void*> owners;
  for (const auto& slice : running_) owners.push_back(slice->transport.keep_alive.get());
  return owners;
}

std::vector<int> InternodeOp::waiting_for() const {
  std::vector<int> nodes;
  for (const auto& slice : running_) {
    for (int node : slice->runner->waiting_for()) {
      if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
    }
  }
  return nodes;
}

bool InternodeOp::expects_from(int node) const {
  for (const auto& slice : running_) {
    if (slice->runner->expects_from(node)) return true;
  }
  if (next_slice_ >= layout_.slices) return false;
  // Slices not started: everything they receive from the node may already be held.
  auto receives = [node](const algo::Plan& plan) {
    uint64_t bytes = 0;
    for (const algo::Step& step : plan.steps) {
      const bool receive =
          step.kind == algo::StepKind::kRecv || step.kind == algo::StepKind::kRecvReduce;
      if (receive && step.peer == node) bytes += step.bytes;
    }
    return bytes;
  };
  const uint64_t full = receives(full_plan_);
  const uint64_t last = receives(plan_of(layout_.slices - 1));
  uint64_t held = 0;
  for (const HeldPiece& piece : held_) {
    if (piece.node == node) held += piece.data.size();
  }
  const uint64_t unstarted = layout_.slices - next_slice_;
  const uint64_t needed = (unstarted - 1) * full + last;
  return held < needed;
}

}  // namespace plexus::daemon
