// Threads that share large copy/reduce work with the engine thread. Work is a count of
// items; threads take items from an atomic counter, so uneven items balance out.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace plexus::daemon {

class WorkerPool {
 public:
  explicit WorkerPool(unsigned workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  unsigned workers() const { return static_cast<unsigned>(threads_.size()); }

  // Runs fn(i) for every i in [0, items) on the workers and the calling thread;
  // returns when all are done. Not reentrant: one caller at a time.
  void parallel_for(size_t items, const std::function<void(size_t)>& fn);

 private:
  void worker_loop();
  void drain();

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t items_ = 0;
  std::atomic<size_t> next_item_{0};
  uint64_t generation_ = 0;
  unsigned busy_ = 0;
  bool stopping_ = false;
};

}  // namespace plexus::daemon
