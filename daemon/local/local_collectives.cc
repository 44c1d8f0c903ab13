#include "daemon/local/local_collectives.h"

#include <algorithm>
#include <cstring>

#include "daemon/local/reduce.h"
#include "shm/dtype.h"

namespace plexus::daemon {
namespace {

// A chunk is what one thread takes at a time; a tile is what stays in L1/L2 while its
// reduced result is copied to every output.
constexpr size_t kChunkBytes = 512 * 1024;
constexpr size_t kTileBytes = 16 * 1024;

}  // namespace

LocalExecutor::LocalExecutor(WorkerPool& pool, size_t parallel_threshold_bytes)
    : pool_(pool), parallel_threshold_bytes_(parallel_threshold_bytes) {}

void LocalExecutor::set_between_slices(std::function<void()> fn, size_t slice_bytes,
                                       std::function<bool()> wanted) {
  between_slices_ = std::move(fn);
  slice_bytes_ = slice_bytes;
  slices_wanted_ = std::move(wanted);
}

void LocalExecutor::set_thresholds(size_t parallel_threshold_bytes, size_t slice_bytes) {
  parallel_threshold_bytes_ = parallel_threshold_bytes;
  slice_bytes_ = slice_bytes;
  if (nested_) nested_->set_thresholds(parallel_threshold_bytes, 0);  // nested ones never cut
}

void LocalExecutor::add_copy(std::byte* dst, const std::byte* src, size_t bytes) {
  if (dst == src || bytes == 0) return;  // in place
  copies_.push_back(CopyTask{dst, src, bytes});
}

void LocalExecutor::plan(const CollectiveArgs& args, std::span<const Contribution> parts) {
  copies_.clear();
  reduces_.clear();
  inputs_.clear();
  outputs_.clear();
  k_ = static_cast<int>(parts.size());
  const size_t n = parts.size();
  const size_t elem = shm::dtype_size(args.dtype);
  const size_t block = args.count * elem;
  switch (args.opcode) {
    case shm::Opcode::kAllReduce: {
      ReduceTask task{static_cast<uint32_t>(inputs_.size()), static_cast<uint32_t>(outputs_.size()),
                      static_cast<uint32_t>(n), args.count};
      for (const auto& p : parts) inputs_.push_back(p.send);
      for (const auto& p : parts) outputs_.push_back(p.recv);
      reduces_.push_back(task);
      bytes_written_ = block * n;
      break;
    }
    case shm::Opcode::kReduce: {
      for (const auto& p : parts) inputs_.push_back(p.send);
      outputs_.push_back(parts[static_cast<size_t>(args.root)].recv);
      reduces_.push_back(ReduceTask{0, 0, 1, args.count});
      bytes_written_ = block;
      break;
    }
    case shm::Opcode::kReduceScatter: {
      for (size_t r = 0; r < n; ++r) {
        ReduceTask task{static_cast<uint32_t>(inputs_.size()),
                        static_cast<uint32_t>(outputs_.size()), 1, args.count};
        for (const auto& p : parts) inputs_.push_back(p.send + r * block);
        outputs_.push_back(parts[r].recv);
        reduces_.push_back(task);
      }
      bytes_written_ = block * n;
      break;
    }
    case shm::Opcode::kBroadcast: {
      const std::byte* src = parts[static_cast<size_t>(args.root)].send;
      for (const auto& p : parts) add_copy(p.recv, src, block);
      bytes_written_ = block * n;
      break;
    }
    case shm::Opcode::kAllGather: {
      for (const auto& dst : parts) {
        for (size_t s = 0; s < n; ++s) add_copy(dst.recv + s * block, parts[s].send, block);
      }
      bytes_written_ = block * n * n;
      break;
    }
    case shm::Opcode::kAllToAll: {
      // In place, rank d's send blocks are overwritten by others' data: read them from
      // a snapshot instead.
      size_t snapshot_bytes = 0;
      for (const auto& p : parts) snapshot_bytes += p.entry.in_place ? block * n : 0;
      if (scratch_.size() < snapshot_bytes) scratch_.resize(snapshot_bytes);
      std::vector<const std::byte*> sources(n);
      size_t used = 0;
      for (size_t s = 0; s < n; ++s) {
        sources[s] = parts[s].send;
        if (parts[s].entry.in_place) {
          std::memcpy(scratch_.data() + used, parts[s].send, block * n);
          sources[s] = scratch_.data() + used;
          used += block * n;
        }
      }
      for (size_t d = 0; d < n; ++d) {
        for (size_t s = 0; s < n; ++s) {
          add_copy(parts[d].recv + s * block, sources[s] + d * block, block);
        }
      }
      bytes_written_ = block * n * n;
      break;
    }
    case shm::Opcode::kSend:
    case shm::Opcode::kRecv:
      break;  // point-to-point goes through copy()
  }
}

void LocalExecutor::run_item(const CollectiveArgs& args, const WorkItem& item) {
  if (!item.is_reduce) {
    const CopyTask& c = copies_[item.task];
    std::memcpy(c.dst + item.begin, c.src + item.begin, item.end - item.begin);
    return;
  }
  const ReduceTask& task = reduces_[item.task];
  const size_t elem = shm::dtype_size(args.dtype);
  const size_t tile = std::max<size_t>(1, kTileBytes / elem);
  constexpr int kStackInputs = 64;
  const void* stack_inputs[kStackInputs];
  std::vector<const void*> heap_inputs;
  const void** inputs = stack_inputs;
  if (k_ > kStackInputs) {
    heap_inputs.resize(static_cast<size_t>(k_));
    inputs = heap_inputs.data();
  }
  for (size_t begin = item.begin; begin < item.end; begin += tile) {
    const size_t n = std::min(tile, item.end - begin);
    for (int i = 0; i < k_; ++i)
      inputs[i] = inputs_[task.first_input + static_cast<size_t>(i)] + begin * elem;
    std::byte* first_out = outputs_[task.first_output] + begin * elem;
    reduce_arrays(args.dtype, args.redop, inputs, k_, first_out, n, static_cast<uint32_t>(k_));
    for (uint32_t o = 1; o < task.num_outputs; ++o) {
      std::byte* out = outputs_[task.first_output + o] + begin * elem;
      if (out != first_out) std::memcpy(out, first_out, n * elem);
    }
  }
}

size_t LocalExecutor::item_bytes(const WorkItem& item, size_t elem) const {
  const size_t n = item.end - item.begin;
  return item.is_reduce ? n * elem * static_cast<size_t>(k_) : n;
}

void LocalExecutor::execute(const CollectiveArgs& args, bool may_slice) {
  const size_t elem = shm::dtype_size(args.dtype);
  size_t total = 0;
  for (const auto& c : copies_) total += c.bytes;
  for (const auto& r : reduces_) total += r.count * elem * static_cast<size_t>(k_);
  items_.clear();
  const bool parallel = total >= parallel_threshold_bytes_ && pool_.workers() > 0;
  const bool cut = may_slice && between_slices_ && slice_bytes_ > 0 && total > slice_bytes_ &&
                   (!slices_wanted_ || slices_wanted_());
  const size_t chunk_bytes = parallel || cut ? kChunkBytes : SIZE_MAX;
  for (uint32_t t = 0; t < copies_.size(); ++t) {
    for (size_t b = 0; b < copies_[t].bytes; b += chunk_bytes) {
      items_.push_back(WorkItem{false, t, b, std::min(copies_[t].bytes, b + chunk_bytes)});
    }
  }
  const size_t chunk_elems = parallel || cut ? std::max<size_t>(1, kChunkBytes / elem) : SIZE_MAX;
  for (uint32_t t = 0; t < reduces_.size(); ++t) {
    for (size_t b = 0; b < reduces_[t].count; b += chunk_elems) {
      items_.push_back(WorkItem{true, t, b, std::min(reduces_[t].count, b + chunk_elems)});
    }
  }
  auto run_items = [&](size_t first, size_t end) {
    if (!parallel) {
      for (size_t i = first; i < end; ++i) run_item(args, items_[i]);
      return;
    }
    pool_.parallel_for(end - first, [&](size_t i) { run_item(args, items_[first + i]); });
  };
  if (!cut) {
    run_items(0, items_.size());
    return;
  }
  // In slices, each shared by the whole pool (an item per thread at least), then the
  // caller looks for more urgent work, which so waits at most one slice.
  const size_t least_items = parallel ? size_t{pool_.workers()} + 1 : 1;
  for (size_t first = 0; first < items_.size();) {
    size_t end = first;
    for (size_t bytes = 0;
         end < items_.size() && (bytes < slice_bytes_ || end - first < least_items); ++end) {
      bytes += item_bytes(items_[end], elem);
    }
    run_items(first, end);
    first = end;
    if (first < items_.size()) between_slices_();
  }
}

uint64_t LocalExecutor::run(const CollectiveArgs& args, std::span<const Contribution> parts,
                            bool may_slice) {
  if (args.count == 0) return 0;
  if (running_) {
    if (!nested_) nested_ = std::make_unique<LocalExecutor>(pool_, parallel_threshold_bytes_);
    return nested_->run(args, parts);
  }
  running_ = true;
  plan(args, parts);
  execute(args, may_slice);
  running_ = false;
  return bytes_written_;
}

uint64_t LocalExecutor::copy(std::byte* dst, const std::byte* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
  return bytes;
}

}  // namespace plexus::daemon
