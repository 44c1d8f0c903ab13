// The hierarchical phases of each collective around the inter-node plan.
#include "daemon/internode/local_phases.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "daemon/internode/plan_shape.h"
#include "daemon/local/reduce.h"
#include "shm/dtype.h"
#include "shm/ring_layout.h"

namespace plexus::daemon {

LocalPhases::LocalPhases(const NodeTopology& topology, const CollectiveArgs& args,
                         std::vector<Contribution> parts, std::shared_ptr<void> rank_memory_owner)
    : topology_(topology),
      args_(args),
      parts_(std::move(parts)),
      elem_(static_cast<uint32_t>(shm::dtype_size(args.dtype))),
      network_op_(args.redop == PLEXUS_AVG ? PLEXUS_SUM : args.redop) {
  // With one rank here, an allreduce's slice is a range of that rank's receive buffer:
  // the rounds run there, saving the copies into scratch and back out.
  if (rank_memory_owner && parts_.size() == 1 &&
      collective_of(args_.opcode) == algo::Collective::kAllreduce) {
    rank_memory_owner_ = std::move(rank_memory_owner);
  }
}

uint64_t LocalPhases::node_order_offset(int rank, uint64_t piece) const {
  const int node = topology_.rank_node[static_cast<size_t>(rank)];
  uint64_t before = 0;
  for (int n = 0; n < node; ++n) before += topology_.node_ranks[static_cast<size_t>(n)].size();
  return (before + static_cast<uint64_t>(topology_.index_in_node(rank))) * piece;
}

void LocalPhases::reduce(std::byte* inout, const std::byte* in, size_t bytes) const {
  // A frame's payload lies where the transport read it, not always on an element boundary,
  // and the kernels load whole elements: such a span is reduced from an aligned copy (one
  // buffer per thread, kept: a reduce may run on any worker).
  auto misaligned = [this](const std::byte* p) {
    return reinterpret_cast<uintptr_t>(p) % elem_ != 0;
  };
  if (misaligned(inout) || misaligned(in)) {
    thread_local std::vector<std::byte> copies;
    copies.resize(2 * bytes);
    std::memcpy(copies.data(), inout, bytes);
    std::memcpy(copies.data() + bytes, in, bytes);
    const void* both[2] = {copies.data(), copies.data() + bytes};
    reduce_arrays(args_.dtype, network_op_, both, 2, copies.data(), bytes / elem_, 1);
    std::memcpy(inout, copies.data(), bytes);
    return;
  }
  const void* both[2] = {inout, in};
  reduce_arrays(args_.dtype, network_op_, both, 2, inout, bytes / elem_, 1);
}

void LocalPhases::reduce_into(std::byte* out, std::span<const std::byte* const> inputs,
                              uint64_t count) {
  reduce_arrays(args_.dtype, network_op_, reinterpret_cast<const void* const*>(inputs.data()),
                static_cast<int>(inputs.size()), out, count, 1);
}

// The last copy to a rank's buffer divides an average by the communicator's size.
void LocalPhases::copy_out(std::byte* dst, const std::byte* src, uint64_t count) {
  if (args_.redop == PLEXUS_AVG && shm::uses_redop(args_.opcode)) {
    const void* in = src;
    reduce_arrays(args_.dtype, PLEXUS_AVG, &in, 1, dst, count,
                  static_cast<uint32_t>(topology_.nranks()));
  } else {
    std::memmove(dst, src, count * elem_);
  }
}

common::Result<bool> LocalPhases::input_in(uint64_t first, uint64_t count) const {
  if (!staging_.input_in) return true;
  const uint64_t block = args_.count * elem_;
  const uint64_t end = (first + count) * elem_;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const uint64_t send_bytes = parts_[i].entry.send.bytes;
    if (send_bytes == 0 || block == 0) continue;
    // The slice reads [first, first + count) of every per-rank block the send span holds.
    const uint64_t needed = std::min(send_bytes, (send_bytes / block - 1) * block + end);
    common::Result<bool> in = staging_.input_in(i, needed);
    if (!in.ok() || !*in) return in;
  }
  return true;
}

// Slice elements [a, a + n) of every block; blocks lie `count` elements apart in the
// ranks' buffers and `n` apart in the slice's scratch.
LocalPhases::SliceMemory LocalPhases::phase_in(uint64_t first, uint64_t count,
                                               std::shared_ptr<OpScratch> scratch) {
  OpScratch& s = *scratch;
  if (count == 0) {  // the parts have no buffers at all (null pointers), and the plan is empty
    s.work.clear();
    s.send.clear();
    return {{}, std::move(scratch)};
  }
  const uint64_t n = count;
  const uint64_t e = elem_;
  const uint64_t a = first * e;             // byte offset within a block
  const uint64_t stride = args_.count * e;  // bytes between blocks in the ranks' buffers
  const auto k = parts_.size();
  const auto nranks = static_cast<uint64_t>(topology_.nranks());
  std::vector<const std::byte*> inputs(k);
  for (size_t i = 0; i < k; ++i) inputs[i] = parts_[i].send + a;
  if (borrows_rank_memory()) {
    const std::span<std::byte> work{parts_[0].recv + a, n * e};
    // In place, the input is already there; memmove: a client may pass overlapping buffers.
    if (inputs[0] != work.data()) std::memmove(work.data(), inputs[0], n * e);
    return {work, std::make_shared<std::pair<std::shared_ptr<OpScratch>, std::shared_ptr<void>>>(
                      std::move(scratch), rank_memory_owner_)};
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
  return {{s.work.data(), s.work.size()}, std::move(scratch)};
}

uint64_t LocalPhases::phase_out(uint64_t first, uint64_t count, std::span<std::byte> work) {
  if (count == 0) return 0;
  const uint64_t n = count;
  const uint64_t e = elem_;
  const uint64_t a = first * e;
  const uint64_t stride = args_.count * e;
  const std::byte* w = work.data();
  uint64_t written = 0;
  if (borrows_rank_memory()) {
    // The result is in place; an average still needs its division.
    if (args_.redop == PLEXUS_AVG) copy_out(work.data(), w, n);
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

}  // namespace plexus::daemon
