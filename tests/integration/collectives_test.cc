// Every collective x dtype x count x op, in place and out of place, for 1..4 local
// ranks against a real plexusd, with exact results.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "shm/dtype.h"
#include "tests/integration/collective_cases.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_processes.h"
#include "tests/integration/test_data.h"

namespace plexus::test {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 4097, (1u << 20) + 3};
constexpr size_t kLargest = (1u << 20) + 3;
constexpr plexus_redop_t kOps[] = {PLEXUS_SUM, PLEXUS_PROD, PLEXUS_MIN, PLEXUS_MAX, PLEXUS_AVG};
std::vector<Case> all_cases(int n, const std::vector<size_t>& counts) {
  std::vector<Case> cases;
  for (const char* coll :
       {"allreduce", "reduce", "reducescatter", "broadcast", "allgather", "alltoall", "sendrecv"}) {
    const std::string name = coll;
    const bool reduces = name == "allreduce" || name == "reduce" || name == "reducescatter";
    const bool in_place_form = name != "sendrecv";
    for (int dt = 0; dt < PLEXUS_NUM_DTYPES; ++dt) {
      for (size_t count : counts) {
        for (plexus_redop_t op : kOps) {
          if (!reduces && op != PLEXUS_SUM) continue;
          // The largest count runs with sum only, to keep the suite fast.
          if (count == kLargest && op != PLEXUS_SUM) continue;
          for (bool in_place : {false, true}) {
            if (in_place && !in_place_form) continue;
            const int root =
                static_cast<int>((count + static_cast<size_t>(dt)) % static_cast<size_t>(n));
            cases.push_back(Case{name, static_cast<plexus_dtype_t>(dt), op, count, in_place, root});
          }
        }
      }
    }
  }
  return cases;
}

// Each rank runs every case in the same order; the first failure ends that rank.
std::string run_all(int rank, int n, const plexus_unique_id_t& id, bool pool_buffers,
                    const std::vector<size_t>& counts) {
  plexus_comm_t comm = nullptr;
  if (plexus_result_t r = plexus_comm_init_rank(&comm, n, id, rank); r != PLEXUS_SUCCESS) {
    return call_failed("plexus_comm_init_rank", r);
  }
  const size_t bytes = static_cast<size_t>(n) * kLargest * 8;
  Buffers buf;
  std::vector<std::byte> heap_a;
  std::vector<std::byte> heap_b;
  if (pool_buffers) {
    if (plexus_alloc(reinterpret_cast<void**>(&buf.a), bytes) != PLEXUS_SUCCESS ||
        plexus_alloc(reinterpret_cast<void**>(&buf.b), bytes) != PLEXUS_SUCCESS) {
      return std::string("plexus_alloc: ") + plexus_get_last_error();
    }
  } else {
    heap_a.resize(bytes);
    heap_b.resize(bytes);
    buf.a = heap_a.data();
    buf.b = heap_b.data();
  }
  for (const Case& c : all_cases(n, counts)) {
    std::string error = run_case(c, rank, n, comm, buf);
    if (!error.empty()) return error;
  }
  if (plexus_result_t r = plexus_comm_destroy(comm); r != PLEXUS_SUCCESS) {
    return call_failed("plexus_comm_destroy", r);
  }
  return {};
}

class CollectivesTest : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() { daemon_ = new DaemonProcess(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static DaemonProcess* daemon_;
};
DaemonProcess* CollectivesTest::daemon_ = nullptr;

TEST_P(CollectivesTest, EveryCollectiveDtypeCountAndOpIsExactFromPoolBuffers) {
  const int n = GetParam();
  std::vector<size_t> counts(std::begin(kCounts), std::end(kCounts));
  auto results = run_ranks(daemon_->socket_path(), n, [&](int rank, int nranks, const auto& id) {
    return run_all(rank, nranks, id, true, counts);
  });
  EXPECT_EQ(failures(results), "");
  EXPECT_TRUE(daemon_->alive()) << daemon_->log();
}

TEST_P(CollectivesTest, BuffersOutsideThePoolAreStagedAndExact) {
  const int n = GetParam();
  auto results = run_ranks(daemon_->socket_path(), n, [&](int rank, int nranks, const auto& id) {
    return run_all(rank, nranks, id, false, {1, 4097});
  });
  EXPECT_EQ(failures(results), "");
  EXPECT_TRUE(daemon_->alive()) << daemon_->log();
}

TEST_F(CollectivesTest, ThePoolSizeIsTheOneAskedFor) {
  auto results = run_ranks(daemon_->socket_path(), 1, [](int, int, const auto&) -> std::string {
    ::setenv("PLEXUS_POOL_SIZE", "268435456", 1);
    size_t bytes = 0;
    if (plexus_result_t r = plexus_pool_size(&bytes); r != PLEXUS_SUCCESS) {
      return describe("plexus_pool_size", r);
    }
    if (bytes != 268435456) return "pool of " + std::to_string(bytes) + " bytes";
    if (plexus_pool_size(nullptr) != PLEXUS_ERR_INVALID_ARGUMENT) return "NULL accepted";
    return {};
  });
  EXPECT_EQ(failures(results), "");
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectivesTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& param_info) {
                           return std::to_string(param_info.param) + "ranks";
                         });

}  // namespace
}  // namespace plexus::test
