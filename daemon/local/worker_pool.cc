#include "daemon/local/worker_pool.h"

namespace plexus::daemon {

WorkerPool::WorkerPool(unsigned workers) {
  threads_.reserve(workers);
  for (unsigned i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::drain() {
  for (size_t i = next_item_.fetch_add(1, std::memory_order_relaxed); i < items_;
       i = next_item_.fetch_add(1, std::memory_order_relaxed)) {
    (*job_)(i);
  }
}

void WorkerPool::parallel_for(size_t items, const std::function<void(size_t)>& fn) {
  if (items == 0) return;
  if (threads_.empty() || items == 1) {
    for (size_t i = 0; i < items; ++i) fn(i);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    items_ = items;
    next_item_.store(0, std::memory_order_relaxed);
    busy_ = static_cast<unsigned>(threads_.size());
    ++generation_;
  }
  work_ready_.notify_all();
  drain();
  std::unique_lock lock(mutex_);
  work_done_.wait(lock, [this] { return busy_ == 0; });
  job_ = nullptr;
}

void WorkerPool::worker_loop() {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  while (true) {
    work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    lock.unlock();
    drain();
    lock.lock();
    if (--busy_ == 0) work_done_.notify_one();
  }
}

}  // namespace plexus::daemon
