// Every collective x dtype x count x op, in place and out of place, for 1..4 local
// ranks against a real plexusd, with exact results.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "shm/dtype.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_processes.h"
#include "tests/integration/test_data.h"

namespace plexus::test {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 4097, (1u << 20) + 3};
constexpr size_t kLargest = (1u << 20) + 3;
constexpr plexus_redop_t kOps[] = {PLEXUS_SUM, PLEXUS_PROD, PLEXUS_MIN, PLEXUS_MAX, PLEXUS_AVG};
constexpr uint8_t kSentinel = 0x5a;

struct Case {
  std::string collective;
  plexus_dtype_t dtype;
  plexus_redop_t op;
  size_t count;
  bool in_place;
  int root;

  std::string describe() const {
    return collective + " " + std::string(shm::dtype_name(dtype)) + " " +
           std::string(shm::redop_name(op)) + " count " + std::to_string(count) +
           (in_place ? " in-place" : " out-of-place") + " root " + std::to_string(root);
  }
};

// Buffers for one rank: from the pool (zero copy) or from the heap (staged).
struct Buffers {
  std::byte* a = nullptr;  // send (or the in-place buffer)
  std::byte* b = nullptr;  // recv
};

std::string call_failed(const char* call, plexus_result_t r) {
  return std::string(call) + " returned " + plexus_result_string(r) + ": " +
         plexus_get_last_error();
}

std::string wait_for(plexus_result_t submitted, plexus_request_t* request, const char* call) {
  if (submitted != PLEXUS_SUCCESS) return call_failed(call, submitted);
  plexus_result_t r = plexus_wait(request);
  return r == PLEXUS_SUCCESS ? "" : call_failed("plexus_wait", r);
}

// Runs one case on this rank and checks its output. Returns "" or the failure.
std::string run_case(const Case& c, int rank, int n, plexus_comm_t comm, const Buffers& buf) {
  const size_t elem = shm::dtype_size(c.dtype);
  const size_t count = c.count;
  const auto un = static_cast<size_t>(n);
  const auto ur = static_cast<size_t>(rank);
  // Sentinels over what the case can touch, so an unwritten element shows.
  std::memset(buf.a, kSentinel, un * count * elem);
  std::memset(buf.b, kSentinel, un * count * elem);
  plexus_request_t req = nullptr;
  std::string error;
  const plexus_dtype_t d = c.dtype;

  if (c.collective == "allreduce") {
    fill_input(buf.a, d, c.op, rank, count);
    void* recv = c.in_place ? buf.a : buf.b;
    error = wait_for(plexus_allreduce(buf.a, recv, count, d, c.op, comm, &req), &req, "allreduce");
    if (error.empty()) {
      error = compare(recv, d, count, [&](size_t j) { return reduced_bits(d, c.op, n, j); });
    }
  } else if (c.collective == "reduce") {
    fill_input(buf.a, d, c.op, rank, count);
    void* recv = c.in_place ? buf.a : buf.b;
    error =
        wait_for(plexus_reduce(buf.a, recv, count, d, c.op, c.root, comm, &req), &req, "reduce");
    if (error.empty() && rank == c.root) {
      error = compare(recv, d, count, [&](size_t j) { return reduced_bits(d, c.op, n, j); });
    }
    if (error.empty() && rank != c.root && !c.in_place) {
      // A non-root's recv buffer is not touched.
      error = compare(buf.b, PLEXUS_UINT8, count * elem, [](size_t) { return kSentinel; });
    }
  } else if (c.collective == "reducescatter") {
    fill_input(buf.a, d, c.op, rank, count * un);
    void* recv = c.in_place ? buf.a + ur * count * elem : buf.b;
    error = wait_for(plexus_reducescatter(buf.a, recv, count, d, c.op, comm, &req), &req,
                     "reducescatter");
    if (error.empty()) {
      error = compare(recv, d, count,
                      [&](size_t j) { return reduced_bits(d, c.op, n, ur * count + j); });
    }
  } else if (c.collective == "broadcast") {
    if (rank == c.root) fill_input(buf.a, d, PLEXUS_SUM, rank, count);
    void* recv = c.in_place ? buf.a : buf.b;
    error =
        wait_for(plexus_broadcast(buf.a, recv, count, d, c.root, comm, &req), &req, "broadcast");
    if (error.empty()) {
      error =
          compare(recv, d, count, [&](size_t j) { return input_bits(d, PLEXUS_SUM, c.root, j); });
    }
  } else if (c.collective == "allgather") {
    std::byte* send = c.in_place ? buf.b + ur * count * elem : buf.a;
    fill_input(send, d, PLEXUS_SUM, rank, count);
    error = wait_for(plexus_allgather(send, buf.b, count, d, comm, &req), &req, "allgather");
    if (error.empty()) {
      error = compare(buf.b, d, count * un, [&](size_t j) {
        return input_bits(d, PLEXUS_SUM, static_cast<int>(j / count), j % count);
      });
    }
  } else if (c.collective == "alltoall") {
    // Rank r's block for rank d holds input(r, d*count + j).
    fill_input(buf.a, d, PLEXUS_SUM, rank, count * un);
    void* recv = c.in_place ? buf.a : buf.b;
    error = wait_for(plexus_alltoall(buf.a, recv, count, d, comm, &req), &req, "alltoall");
    if (error.empty()) {
      error = compare(recv, d, count * un, [&](size_t j) {
        return input_bits(d, PLEXUS_SUM, static_cast<int>(j / count), ur * count + j % count);
      });
    }
  } else if (c.collective == "sendrecv") {
    // A ring: send to the next rank, receive from the previous, batched in a group.
    fill_input(buf.a, d, PLEXUS_SUM, rank, count);
    const int next = (rank + 1) % n;
    const int prev = (rank + n - 1) % n;
    plexus_request_t send_req = nullptr;
    plexus_request_t recv_req = nullptr;
    plexus_group_start();
    plexus_result_t s = plexus_send(buf.a, count, d, next, comm, &send_req);
    plexus_result_t r = plexus_recv(buf.b, count, d, prev, comm, &recv_req);
    plexus_group_end();
    error = wait_for(s, &send_req, "send");
    if (error.empty()) error = wait_for(r, &recv_req, "recv");
    if (error.empty()) {
      error =
          compare(buf.b, d, count, [&](size_t j) { return input_bits(d, PLEXUS_SUM, prev, j); });
    }
  }
  return error.empty() ? "" : c.describe() + ": " + error;
}

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

INSTANTIATE_TEST_SUITE_P(Ranks, CollectivesTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& param_info) {
                           return std::to_string(param_info.param) + "ranks";
                         });

}  // namespace
}  // namespace plexus::test
