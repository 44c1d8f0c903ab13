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
  Buffers urgent(3, 4096);
  int pauses = 0;
  executor.set_between_slices(
      [&] {
        ++pauses;
        if (pauses == 2) {
          auto parts = urgent.parts();
          EXPECT_EQ(executor.run(allreduce(4096), parts, true), 3u * 4096 * sizeof(float));
        }
      },
      1 << 20);
  auto parts = bulk.parts();
  EXPECT_EQ(executor.run(allreduce(kCount), parts, true), 2u * kCount * sizeof(float));
  EXPECT_GE(pauses, 7) << "8 MiB of work in 1 MiB slices";
  EXPECT_LE(pauses, 8);
  bulk.expect_sums();
  urgent.expect_sums();
  // Not to be cut (a latency job's op): no pause.
  pauses = 0;
  Buffers again(2, kCount);
  parts = again.parts();
  executor.run(allreduce(kCount), parts, false);
  EXPECT_EQ(pauses, 0);
  again.expect_sums();
}

}  // namespace
}  // namespace plexus::daemon
