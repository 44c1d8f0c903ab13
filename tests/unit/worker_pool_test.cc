// Tests for daemon/worker_pool: parallel_for runs every index exactly once, on the workers
// and the calling thread, and returns only when all of them are done. A watchdog turns a
// deadlock into a failure instead of a hung test run.
#include "daemon/local/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace plexus::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// Runs body; aborts the test binary (a failure, not a hang) if it takes longer than limit.
template <typename Body>
void with_watchdog(std::chrono::seconds limit, const std::string& what, Body&& body) {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::thread dog([&] {
    std::unique_lock lock(mutex);
    if (!cv.wait_for(lock, limit, [&] { return done; })) {
      std::fprintf(stderr, "FATAL: %s did not finish within %lld s (deadlock in WorkerPool?)\n",
                   what.c_str(), static_cast<long long>(limit.count()));
      std::abort();
    }
  });
  body();
  {
    std::lock_guard lock(mutex);
    done = true;
  }
  cv.notify_one();
  dog.join();
}

constexpr auto kWatchdog = std::chrono::seconds(120);

// Checks every counter is exactly 1 and resets them; returns a description of the first
// problem, or "".
std::string check_once_and_reset(std::vector<std::atomic<uint32_t>>& hits, size_t items) {
  std::string problem;
  for (size_t i = 0; i < items; ++i) {
    uint32_t n = hits[i].exchange(0, std::memory_order_relaxed);
    if (n != 1 && problem.empty()) {
      problem = "index " + std::to_string(i) + " of " + std::to_string(items) + " ran " +
                std::to_string(n) + " times";
    }
  }
  for (size_t i = items; i < hits.size(); ++i) {
    if (hits[i].load(std::memory_order_relaxed) != 0 && problem.empty()) {
      problem = "index " + std::to_string(i) + " beyond " + std::to_string(items) + " ran";
    }
  }
  return problem;
}

class WorkerPoolCountsTest : public ::testing::TestWithParam<unsigned> {};

TEST_P(WorkerPoolCountsTest, EachIndexRunsExactlyOnce) {
  const unsigned workers = GetParam();
  with_watchdog(kWatchdog, "parallel_for with " + std::to_string(workers) + " workers", [&] {
    WorkerPool pool(workers);
    EXPECT_EQ(pool.workers(), workers);
    constexpr size_t kMaxItems = 10000;
    std::vector<std::atomic<uint32_t>> hits(kMaxItems + 1);
    std::atomic<uint64_t> calls{0};
    for (int rep = 0; rep < 100; ++rep) {
      for (size_t items : {size_t{0}, size_t{1}, size_t{7}, size_t{10000}}) {
        calls.store(0, std::memory_order_relaxed);
        pool.parallel_for(items, [&](size_t i) {
          calls.fetch_add(1, std::memory_order_relaxed);
          hits[i < hits.size() ? i : kMaxItems].fetch_add(1, std::memory_order_relaxed);
        });
        // parallel_for has returned: every call must be finished and counted.
        ASSERT_EQ(calls.load(std::memory_order_relaxed), items)
            << "rep " << rep << ", " << items << " items";
        std::string problem = check_once_and_reset(hits, items);
        ASSERT_EQ(problem, "") << "rep " << rep << ", " << workers << " workers";
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, WorkerPoolCountsTest, ::testing::Values(0u, 1u, 3u),
                         [](const ::testing::TestParamInfo<unsigned>& param_info) {
                           return std::to_string(param_info.param) + "Workers";
                         });

TEST(WorkerPoolTest, ResultsWrittenByItemsAreVisibleWhenParallelForReturns) {
  with_watchdog(kWatchdog, "visibility test", [] {
    WorkerPool pool(3);
    for (int rep = 0; rep < 100; ++rep) {
      std::vector<uint64_t> out(777, 0);  // plain memory, not atomics
      pool.parallel_for(out.size(), [&](size_t i) { out[i] = i * i + static_cast<uint64_t>(rep); });
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_EQ(out[i], i * i + static_cast<uint64_t>(rep)) << "rep " << rep << " index " << i;
      }
    }
  });
}

TEST(WorkerPoolTest, WorkersAndTheCallerRunItemsConcurrently) {
  // Four items that each wait until all four have started can only finish if four
  // threads (3 workers + the caller) run them at the same time.
  with_watchdog(kWatchdog, "concurrency test", [] {
    WorkerPool pool(3);
    for (int rep = 0; rep < 20; ++rep) {
      std::atomic<int> started{0};
      std::atomic<bool> timed_out{false};
      std::mutex ids_mutex;
      std::set<std::thread::id> ids;
      pool.parallel_for(4, [&](size_t) {
        {
          std::lock_guard lock(ids_mutex);
          ids.insert(std::this_thread::get_id());
        }
        started.fetch_add(1);
        const auto until = Clock::now() + std::chrono::seconds(20);
        while (started.load() < 4) {
          if (Clock::now() > until) {
            timed_out = true;
            return;
          }
          std::this_thread::yield();
        }
      });
      ASSERT_FALSE(timed_out.load())
          << "rep " << rep << ": only " << started.load() << " items ever ran at once";
      EXPECT_EQ(ids.size(), 4u);
      EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u) << "the caller must take part";
    }
  });
}

TEST(WorkerPoolTest, NoWorkersOrOneItemRunsOnTheCallingThread) {
  with_watchdog(kWatchdog, "inline test", [] {
    const auto me = std::this_thread::get_id();
    WorkerPool none(0);
    std::vector<size_t> order;
    none.parallel_for(5, [&](size_t i) {
      EXPECT_EQ(std::this_thread::get_id(), me);
      order.push_back(i);
    });
    EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));

    WorkerPool three(3);
    bool ran = false;
    three.parallel_for(1, [&](size_t i) {
      EXPECT_EQ(i, 0u);
      EXPECT_EQ(std::this_thread::get_id(), me);
      ran = true;
    });
    EXPECT_TRUE(ran);
    three.parallel_for(0, [&](size_t) { ADD_FAILURE() << "ran an item of an empty range"; });
  });
}

TEST(WorkerPoolTest, UnevenItemsStillRunExactlyOnce) {
  with_watchdog(kWatchdog, "uneven test", [] {
    WorkerPool pool(3);
    constexpr size_t kItems = 257;
    std::vector<std::atomic<uint32_t>> hits(kItems + 1);
    for (int rep = 0; rep < 20; ++rep) {
      pool.parallel_for(kItems, [&](size_t i) {
        // Every 16th item is much slower, so fast threads must pick up the rest.
        if (i % 16 == 0) {
          volatile uint64_t sink = 0;
          for (int k = 0; k < 20000; ++k) sink = sink + static_cast<uint64_t>(k);
        }
        hits[i].fetch_add(1, std::memory_order_relaxed);
      });
      ASSERT_EQ(check_once_and_reset(hits, kItems), "") << "rep " << rep;
    }
  });
}

TEST(WorkerPoolTest, CreatingAndDestroyingPoolsRepeatedlyNeitherHangsNorLeaks) {
  with_watchdog(kWatchdog, "create/destroy test", [] {
    for (int rep = 0; rep < 100; ++rep) {
      const unsigned workers = static_cast<unsigned>(rep % 4);
      auto pool = std::make_unique<WorkerPool>(workers);
      if (rep % 3 != 0) {  // some pools are destroyed without ever running anything
        std::atomic<size_t> sum{0};
        pool->parallel_for(100, [&](size_t i) { sum.fetch_add(i, std::memory_order_relaxed); });
        ASSERT_EQ(sum.load(), 4950u) << "rep " << rep;
      }
      pool.reset();
    }
  });
}

}  // namespace
}  // namespace plexus::daemon
