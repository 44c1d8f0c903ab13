// LocalExecutor's slices: a bulk op may be cut, with the between-slices call after each
// slice, and an op run from that call (a latency job's) goes whole on an executor of its
// own while the cut op's plan is kept; both results exact.
#include "daemon/local/local_collectives.h"

#include <gtest/gtest.h>

#include <vector>

namespace plexus::daemon {
namespace {

// `ranks` ranks' float buffers, rank r's input element i being r + i.
struct Buffers {
  Buffers(size_t ranks, size_t count) : send(ranks), recv(ranks) {
    for (size_t r = 0; r < ranks; ++r) {
      send[r].resize(count);
      recv[r].assign(count, -1.0f);
      for (size_t i = 0; i < count; ++i) send[r][i] = static_cast<float>(r + i % 1000);
    }
  }
  std::vector<Contribution> parts() {
    std::vector<Contribution> out(send.size());
    for (size_t r = 0; r < send.size(); ++r) {
      out[r].rank = static_cast<int>(r);
      out[r].send = reinterpret_cast<const std::byte*>(send[r].data());
      out[r].recv = reinterpret_cast<std::byte*>(recv[r].data());
    }
    return out;
  }
  // Every rank's result is the sum over ranks.
  void expect_sums() const {
    const size_t n = send.size();
    for (size_t r = 0; r < n; ++r) {
      for (size_t i = 0; i < recv[r].size(); ++i) {
        const float want = static_cast<float>(n * (i % 1000) + n * (n - 1) / 2);
        ASSERT_EQ(recv[r][i], want) << "rank " << r << " element " << i;
      }
    }
  }
  std::vector<std::vector<float>> send;
  std::vector<std::vector<float>> recv;
};

CollectiveArgs allreduce(size_t count) {
  return {shm::Opcode::kAllReduce, PLEXUS_FLOAT32, PLEXUS_SUM, count, 0};
}

TEST(LocalExecutorTest, ACutOpPausesBetweenSlicesAndAnOpRunFromThePauseGoesWholeAndExact) {
  WorkerPool pool(1);
  LocalExecutor executor(pool, 64 * 1024);
  constexpr size_t kCount = 1 << 20;  // 4 MiB per rank, 8 MiB of reduce work over 2 ranks
  Buffers bulk(2, kCount);
  constexpr size_t kUrgent = 16384;  // 192 KiB of reduce work: shared by the pool too
  Buffers urgent(3, kUrgent);
  int pauses = 0;
  bool cut = true;
  executor.set_between_slices(
      [&] {
        ++pauses;
        if (pauses == 2) {
          auto parts = urgent.parts();
          EXPECT_EQ(executor.run(allreduce(kUrgent), parts, true), 3u * kUrgent * sizeof(float));
        }
      },
      1 << 20, [&] { return cut; });
  auto parts = bulk.parts();
  EXPECT_EQ(executor.run(allreduce(kCount), parts, true), 2u * kCount * sizeof(float));
  // 8 items of 1 MiB; a slice of 1 MiB, but an item for each of the 2 threads at least.
  EXPECT_EQ(pauses, 3);
  bulk.expect_sums();
  urgent.expect_sums();
  // Not to be cut (a latency job's op), or no cut wanted (no latency job): no pause.
  for (const bool may_slice : {false, true}) {
    pauses = 0;
    cut = may_slice ? false : true;
    Buffers again(2, kCount);
    parts = again.parts();
    executor.run(allreduce(kCount), parts, may_slice);
    EXPECT_EQ(pauses, 0) << may_slice;
    again.expect_sums();
  }
}

TEST(LocalExecutorTest, WithNoWorkersAnOpIsStillCutAndASliceIsTheSizeAsked) {
  WorkerPool pool(0);
  LocalExecutor executor(pool, 64 * 1024);
  constexpr size_t kCount = 1 << 20;
  Buffers bulk(2, kCount);
  int pauses = 0;
  executor.set_between_slices([&] { ++pauses; }, 2 << 20, [] { return true; });
  auto parts = bulk.parts();
  executor.run(allreduce(kCount), parts, true);
  EXPECT_EQ(pauses, 3) << "8 MiB of work in 2 MiB slices";
  bulk.expect_sums();
}

TEST(LocalExecutorTest, ASliceGivesEveryThreadAnItemHoweverSmallTheSliceAsked) {
  WorkerPool pool(3);
  LocalExecutor executor(pool, 64 * 1024);
  constexpr size_t kCount = 1 << 20;  // 8 items of 512 KiB x 2 ranks: 4 per slice of 4 threads
  Buffers bulk(2, kCount);
  int pauses = 0;
  executor.set_between_slices([&] { ++pauses; }, 1, [] { return true; });
  auto parts = bulk.parts();
  executor.run(allreduce(kCount), parts, true);
  EXPECT_EQ(pauses, 1);
  bulk.expect_sums();
}

}  // namespace
}  // namespace plexus::daemon
