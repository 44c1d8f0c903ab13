#include "tools/plexus-bench/collective_runner.h"

#include <time.h>

#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "shm/dtype.h"
#include "tools/plexus-bench/plexus_call.h"

namespace plexus::bench {
namespace {

int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

std::byte* byte_ptr(void* pointer) { return static_cast<std::byte*>(pointer); }
const std::byte* byte_ptr(const void* pointer) { return static_cast<const std::byte*>(pointer); }

}  // namespace

CollectiveRunner::CollectiveRunner(plexus_comm_t comm, int rank, int nranks, RankBuffers buffers,
                                   TimingOptions timing)
    : comm_(comm), rank_(rank), nranks_(nranks), buffers_(buffers), timing_(timing) {}

CollectiveRunner::CallBuffers CollectiveRunner::call_buffers(const RunSpec& spec,
                                                             bool in_place) const {
  const bool device = buffers_.device_send != nullptr;
  if (!in_place) {
    return device ? CallBuffers{buffers_.device_send, buffers_.device_recv}
                  : CallBuffers{buffers_.send, buffers_.recv};
  }
  // The in-place forms plexus.h defines: allgather sends from its own block of the result,
  // reducescatter receives into its own block of the input, the rest use one buffer.
  std::byte* buffer = byte_ptr(device ? buffers_.device_recv : buffers_.recv);
  const size_t own_block =
      static_cast<size_t>(rank_) * spec.shape.count * shm::dtype_size(spec.dtype);
  switch (spec.collective) {
    case Collective::kAllGather:
      return {buffer + own_block, buffer};
    case Collective::kReduceScatter:
      return {buffer, buffer + own_block};
    default:
      return {buffer, buffer};
  }
}

void CollectiveRunner::run_once(const RunSpec& spec, const CallBuffers& buffers) {
  const size_t count = spec.shape.count;
  plexus_request_t request = nullptr;
  switch (spec.collective) {
    case Collective::kAllReduce:
      check_plexus(
          plexus_allreduce(buffers.send, buffers.recv, count, spec.dtype, spec.op, comm_, &request),
          "plexus_allreduce");
      break;
    case Collective::kBroadcast:
      check_plexus(plexus_broadcast(buffers.send, buffers.recv, count, spec.dtype, spec.root, comm_,
                                    &request),
                   "plexus_broadcast");
      break;
    case Collective::kReduce:
      check_plexus(plexus_reduce(buffers.send, buffers.recv, count, spec.dtype, spec.op, spec.root,
                                 comm_, &request),
                   "plexus_reduce");
      break;
    case Collective::kAllGather:
      check_plexus(plexus_allgather(buffers.send, buffers.recv, count, spec.dtype, comm_, &request),
                   "plexus_allgather");
      break;
    case Collective::kReduceScatter:
      check_plexus(plexus_reducescatter(buffers.send, buffers.recv, count, spec.dtype, spec.op,
                                        comm_, &request),
                   "plexus_reducescatter");
      break;
    case Collective::kAllToAll:
      check_plexus(plexus_alltoall(buffers.send, buffers.recv, count, spec.dtype, comm_, &request),
                   "plexus_alltoall");
      break;
    case Collective::kSendRecv: {
      // A ring: every rank sends to the next and receives from the previous, submitted as
      // one group so that no rank's send waits for its own receive to be posted.
      const int next = (rank_ + 1) % nranks_;
      const int previous = (rank_ - 1 + nranks_) % nranks_;
      plexus_request_t receive_request = nullptr;
      check_plexus(plexus_group_start(), "plexus_group_start");
      check_plexus(plexus_send(buffers.send, count, spec.dtype, next, comm_, &request),
                   "plexus_send");
      check_plexus(plexus_recv(buffers.recv, count, spec.dtype, previous, comm_, &receive_request),
                   "plexus_recv");
      check_plexus(plexus_group_end(), "plexus_group_end");
      check_plexus(plexus_wait(&receive_request), "plexus_wait");
      break;
    }
  }
  check_plexus(plexus_wait(&request), "plexus_wait");
}

DataPattern CollectiveRunner::pattern_for(const RunSpec& spec, uint32_t seed) const {
  PatternKind kind = PatternKind::kMove;
  if (collective_reduces(spec.collective)) {
    kind = spec.op == PLEXUS_PROD ? PatternKind::kProduct : PatternKind::kReduce;
  }
  return DataPattern(kind, spec.dtype, nranks_, seed);
}

void CollectiveRunner::prepare(const RunSpec& spec, bool in_place, const DataPattern& pattern) {
  fill_mirrors(spec, in_place, pattern);
  if (buffers_.device_send != nullptr) {
    buffers_.copy(buffers_.device_send, buffers_.send, buffers_.bytes, true);
    buffers_.copy(buffers_.device_recv, buffers_.recv, buffers_.bytes, true);
  }
}

void CollectiveRunner::fill_mirrors(const RunSpec& spec, bool in_place,
                                    const DataPattern& pattern) {
  const size_t type_size = shm::dtype_size(spec.dtype);
  const size_t count = spec.shape.count;
  std::byte* recv = byte_ptr(buffers_.recv);
  // 0 is no valid result in any pattern (every value, product and average is >= 1), so
  // elements an op failed to write are counted as wrong.
  if (!in_place) {
    std::memset(recv, 0, spec.shape.recv_count * type_size);
    // Broadcast too: every rank sends its own values, so a result taken from a non-root shows.
    fill_contribution(buffers_.send, spec.shape.send_count, pattern, rank_, 0);
    return;
  }
  switch (spec.collective) {
    case Collective::kBroadcast:
      if (rank_ == spec.root) {
        fill_contribution(recv, count, pattern, rank_, 0);
      } else {
        std::memset(recv, 0, count * type_size);
      }
      break;
    case Collective::kAllGather:
      std::memset(recv, 0, spec.shape.recv_count * type_size);
      fill_contribution(recv + static_cast<size_t>(rank_) * count * type_size, count, pattern,
                        rank_, 0);
      break;
    default:
      fill_contribution(recv, spec.shape.send_count, pattern, rank_, 0);
      break;
  }
}

uint64_t CollectiveRunner::count_wrong(const RunSpec& spec, bool in_place,
                                       const DataPattern& pattern) const {
  const size_t type_size = shm::dtype_size(spec.dtype);
  const size_t count = spec.shape.count;
  const size_t block_bytes = count * type_size;
  const std::byte* result = byte_ptr(static_cast<const void*>(buffers_.recv));
  const auto rank = static_cast<size_t>(rank_);
  uint64_t wrong = 0;
  switch (spec.collective) {
    case Collective::kAllReduce:
      return count_wrong_reduction(result, count, pattern, spec.op, 0);
    case Collective::kReduce:
      // Only the root receives anything.
      return rank_ == spec.root ? count_wrong_reduction(result, count, pattern, spec.op, 0) : 0;
    case Collective::kBroadcast:
      return count_wrong_contribution(result, count, pattern, spec.root, 0);
    case Collective::kAllGather:
      for (int peer = 0; peer < nranks_; ++peer) {
        wrong += count_wrong_contribution(result + static_cast<size_t>(peer) * block_bytes, count,
                                          pattern, peer, 0);
      }
      return wrong;
    case Collective::kReduceScatter:
      // This rank's result is the reduction of block `rank` of every rank's input.
      return count_wrong_reduction(in_place ? result + rank * block_bytes : result, count, pattern,
                                   spec.op, rank * count);
    case Collective::kAllToAll:
      // Block `peer` of the result is block `rank` of peer's input.
      for (int peer = 0; peer < nranks_; ++peer) {
        wrong += count_wrong_contribution(result + static_cast<size_t>(peer) * block_bytes, count,
                                          pattern, peer, rank * count);
      }
      return wrong;
    case Collective::kSendRecv:
      return count_wrong_contribution(result, count, pattern, (rank_ - 1 + nranks_) % nranks_, 0);
  }
  return wrong;
}

void CollectiveRunner::barrier() {
  auto* token = static_cast<int32_t*>(buffers_.scratch);
  *token = 0;
  check_plexus(plexus_allreduce(token, token, 1, PLEXUS_INT32, PLEXUS_SUM, comm_, nullptr),
               "plexus_allreduce");
}

uint64_t CollectiveRunner::sum_across_ranks(uint64_t value) {
  auto* slot = static_cast<uint64_t*>(buffers_.scratch);
  *slot = value;
  check_plexus(plexus_allreduce(slot, slot, 1, PLEXUS_UINT64, PLEXUS_SUM, comm_, nullptr),
               "plexus_allreduce");
  return *slot;
}

void CollectiveRunner::max_across_ranks(double& first, double& second) {
  auto* slots = static_cast<double*>(buffers_.scratch);
  slots[0] = first;
  slots[1] = second;
  check_plexus(plexus_allreduce(slots, slots, 2, PLEXUS_FLOAT64, PLEXUS_MAX, comm_, nullptr),
               "plexus_allreduce");
  first = slots[0];
  second = slots[1];
}

VariantResult CollectiveRunner::run(const RunSpec& spec, bool in_place) {
  VariantResult result;
  // plexus.h defines no in-place form for point-to-point: a rank's send and receive would
  // race on one buffer.
  if (in_place && spec.collective == Collective::kSendRecv) return result;
  result.ran = true;
  const CallBuffers buffers = call_buffers(spec, in_place);

  // Timed runs start from valid data; repeated in-place reductions then compound it (sums
  // grow, integers wrap), which costs the same, and the check below starts afresh.
  prepare(spec, in_place, pattern_for(spec, 0));
  for (int iteration = 0; iteration < timing_.warmup_iters; ++iteration) run_once(spec, buffers);
  // Start the timed loop together, so no rank's first iteration includes waiting for
  // another to arrive.
  barrier();
  std::vector<double> iteration_seconds(static_cast<size_t>(timing_.iters));
  for (double& seconds : iteration_seconds) {
    const int64_t start = monotonic_ns();
    run_once(spec, buffers);
    seconds = static_cast<double>(monotonic_ns() - start) * 1e-9;
  }

  // The slowest rank bounds a collective, so both statistics report the largest rank's.
  double mean_seconds = mean_of(iteration_seconds);
  double median_seconds = median_of(std::move(iteration_seconds));
  max_across_ranks(mean_seconds, median_seconds);
  const double seconds = timing_.stat == TimeStat::kMedian ? median_seconds : mean_seconds;
  result.mean_us = mean_seconds * 1e6;
  result.median_us = median_seconds * 1e6;
  result.time_us = seconds * 1e6;
  result.algbw_gbs = algorithm_bandwidth_gbs(spec.shape.bytes, seconds);
  result.busbw_gbs = result.algbw_gbs * bus_bandwidth_factor(spec.collective, nranks_);

  for (int check = 0; check < timing_.check_iters; ++check) {
    const DataPattern pattern = pattern_for(spec, next_check_seed_++);
    prepare(spec, in_place, pattern);
    run_once(spec, buffers);
    result.checked = true;
    if (buffers_.device_recv != nullptr) {
      buffers_.copy(buffers_.recv, buffers_.device_recv, buffers_.bytes, false);
    }
    result.wrong = sum_across_ranks(count_wrong(spec, in_place, pattern));
    if (result.wrong != 0) break;
  }
  return result;
}

}  // namespace plexus::bench
