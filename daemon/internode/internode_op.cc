// Slice scheduling of a multi-node collective, and the network routed to its slices.
#include "daemon/internode/internode_op.h"

#include <algorithm>
#include <utility>

namespace plexus::daemon {

InternodeOp::InternodeOp(const NodeTopology& topology, const CollectiveArgs& args,
                         std::vector<Contribution> local_parts, algo::Algorithm algorithm,
                         std::shared_ptr<ScratchPool> scratch, PostSend post_send,
                         SliceOptions slices, std::shared_ptr<void> rank_memory_owner)
    : topology_(topology),
      scratch_(std::move(scratch)),
      post_send_(std::move(post_send)),
      in_flight_(std::max<uint32_t>(slices.in_flight, 1)),
      local_(topology, args, std::move(local_parts), std::move(rank_memory_owner)),
      plans_(topology, args, algorithm, slices.work_bytes, slices.speeds),
      peers_(algo::peers_of(plans_.plan_of(0))),
      clock_(slices.timed),
      failure_(plans_.failure()) {}

InternodeOp::~InternodeOp() = default;

void InternodeOp::fail(std::string why) {
  if (failure_.empty()) failure_ = std::move(why);
}

void InternodeOp::start() { pump(); }

void InternodeOp::start_slice(uint64_t index) {
  const SliceLayout& layout = plans_.layout();
  std::shared_ptr<OpScratch> scratch = scratch_->take();
  const auto began = clock_.now();
  LocalPhases::SliceMemory memory =
      local_.phase_in(layout.first(index), layout.count_of(index), scratch);
  auto reduce = [this](std::byte* inout, const std::byte* in, size_t bytes) {
    local_.reduce(inout, in, bytes);
  };
  running_.push_back(std::make_unique<SliceRun>(index, std::move(scratch), std::move(memory),
                                                SliceRun::Rounds{.plan = plans_.plan_of(index),
                                                                 .reduce = reduce,
                                                                 .elem_bytes = local_.elem_bytes(),
                                                                 .post_send = post_send_}));
  SliceRun& slice = *running_.back();
  ++runner_depth_;
  slice.start(clock_.rounds_begin(began));
  // Pieces that came before the slice started, in arrival order.
  for (const HeldPieces::Piece& piece : held_.take(index)) {
    std::string error = slice.runner().deliver(piece.node, piece.message, piece.offset, piece.data);
    if (!error.empty()) {
      fail("node " + topology_.node_names[static_cast<size_t>(piece.node)] +
           " sent data that does not fit: " + error);
    }
  }
  --runner_depth_;
}

void InternodeOp::finish_slice(SliceRun& slice) {
  const auto rounds_ended = clock_.now();
  const SliceLayout& layout = plans_.layout();
  written_ +=
      local_.phase_out(layout.first(slice.index()), layout.count_of(slice.index()), slice.work());
  ++finished_;
  clock_.slice_finished(slice.rounds_began(), rounds_ended);
}

void InternodeOp::pump() {
  if (runner_depth_ > 0 || pumping_) return;
  pumping_ = true;
  const SliceLayout& layout = plans_.layout();
  for (bool changed = true; changed && failure_.empty();) {
    changed = false;
    for (size_t i = 0; i < running_.size();) {
      if (!running_[i]->runner().done()) {
        ++i;
        continue;
      }
      finish_slice(*running_[i]);
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      changed = true;
    }
    while (running_.size() < in_flight_ && next_slice_ < layout.slices && failure_.empty()) {
      // Every local part's input for the slice must be in (LocalPhases::DeviceStaging).
      waiting_for_input_ = false;
      common::Result<bool> in =
          local_.input_in(layout.first(next_slice_), layout.count_of(next_slice_));
      if (!in.ok()) {
        fail(in.error());
        break;
      }
      if (!*in) {
        waiting_for_input_ = true;
        break;
      }
      start_slice(next_slice_++);
      changed = true;
    }
  }
  pumping_ = false;
}

SliceRun* InternodeOp::running_slice(uint64_t index) {
  for (auto& slice : running_) {
    if (slice->index() == index) return slice.get();
  }
  return nullptr;
}

std::string InternodeOp::deliver(int node, uint32_t message, uint64_t offset,
                                 std::span<const std::byte> data) {
  if (!failure_.empty()) return failure_;
  const transports::wire::CollectiveStep m = transports::wire::decode_collective_step(message);
  const uint64_t slices = plans_.layout().slices;
  if (m.slice >= slices) {
    return "slice " + std::to_string(m.slice) + " of a collective in " + std::to_string(slices) +
           " slices";
  }
  if (m.slice >= next_slice_) return held_.hold(node, m.slice, m.message, offset, data);
  SliceRun* slice = running_slice(m.slice);
  if (slice == nullptr) {
    return "data for slice " + std::to_string(m.slice) + ", which already finished";
  }
  ++runner_depth_;
  std::string error = slice->runner().deliver(node, m.message, offset, data);
  --runner_depth_;
  if (!error.empty()) return "slice " + std::to_string(m.slice) + ": " + error;
  pump();
  return failure_;
}

InternodeOp::Placement InternodeOp::placement(int node, uint32_t message, uint64_t offset,
                                              uint64_t bytes) {
  if (!failure_.empty()) return {};
  const transports::wire::CollectiveStep m = transports::wire::decode_collective_step(message);
  SliceRun* slice = running_slice(m.slice);
  if (slice == nullptr) return {};
  std::byte* at = slice->runner().placement(node, m.message, offset, bytes);
  if (at == nullptr) return {};
  return {{at, static_cast<size_t>(bytes)}, slice->keep_alive()};
}

void InternodeOp::deliver_placed(int node, uint32_t message, uint64_t offset, uint64_t bytes) {
  const transports::wire::CollectiveStep m = transports::wire::decode_collective_step(message);
  SliceRun* slice = running_slice(m.slice);
  if (slice == nullptr) return;
  ++runner_depth_;
  slice->runner().deliver_placed(node, m.message, offset, bytes);
  --runner_depth_;
  pump();
}

void InternodeOp::send_done(int node, uint32_t message) {
  const transports::wire::CollectiveStep m = transports::wire::decode_collective_step(message);
  if (SliceRun* slice = running_slice(m.slice); slice != nullptr) {
    ++runner_depth_;
    slice->runner().send_done(node, m.message);
    --runner_depth_;
  }
  pump();
}

std::vector<const void*> InternodeOp::placement_owners() const {
  std::vector<const void*> owners;
  for (const auto& slice : running_) owners.push_back(slice->keep_alive().get());
  return owners;
}

std::vector<int> InternodeOp::waiting_for() const {
  std::vector<int> nodes;
  for (const auto& slice : running_) {
    for (int node : slice->runner().waiting_for()) {
      if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
    }
  }
  return nodes;
}

bool InternodeOp::expects_from(int node) const {
  for (const auto& slice : running_) {
    if (slice->runner().expects_from(node)) return true;
  }
  if (next_slice_ >= plans_.layout().slices) return false;
  // Slices not started: everything they receive from the node may already be held.
  return held_.bytes_from(node) < plans_.receives_from(node, next_slice_);
}

}  // namespace plexus::daemon
