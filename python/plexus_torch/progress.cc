#include "python/plexus_torch/progress.h"

#include <chrono>
#include <utility>

namespace plexus::torch_backend {

Progress::Progress(std::function<void(const PlexusWork&)> on_timeout)
    : on_timeout_(std::move(on_timeout)) {
  runner_ = std::thread([this] { run(); });
  watchdog_ = std::thread([this] { watch(); });
}

Progress::~Progress() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  runner_.join();
  watchdog_.join();
}

void Progress::stop_detached() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    on_timeout_ = nullptr;  // its owner is going away: the watchdog must not call it
  }
  changed_.notify_all();
  runner_.detach();
  watchdog_.detach();
}

size_t Progress::queued() {
  std::lock_guard lock(mutex_);
  return works_.size();
}

void Progress::enqueue(c10::intrusive_ptr<PlexusWork> work) {
  {
    std::lock_guard lock(mutex_);
    works_.push_back(std::move(work));
  }
  changed_.notify_all();
}

void Progress::run() {
  for (;;) {
    c10::intrusive_ptr<PlexusWork> work;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !works_.empty(); });
      if (works_.empty()) return;  // stopping, and nothing left
      work = works_.front();
    }
    std::string error = work->submit_error;
    for (plexus_request_t& request : work->requests) {
      const plexus_result_t r = plexus_wait(&request);
      if (r != PLEXUS_SUCCESS && error.empty()) error = plexus_get_last_error();
    }
    work->requests.clear();
    {
      std::lock_guard lock(mutex_);
      if (!error.empty() && !timed_out_.empty()) error = timed_out_ + " (" + error + ")";
      works_.pop_front();
    }
    work->complete(error);
    changed_.notify_all();
  }
}

void Progress::watch() {
  std::unique_lock lock(mutex_);
  while (!stopping_ || !works_.empty()) {
    changed_.wait_for(lock, std::chrono::milliseconds(200));
    if (works_.empty() || !timed_out_.empty()) continue;
    const c10::intrusive_ptr<PlexusWork>& oldest = works_.front();
    if (PlexusWork::Clock::now() < oldest->deadline()) continue;
    timed_out_ =
        "timed out: not complete within the process group's timeout; the "
        "communicator was aborted, so the other ranks' operations fail naming this rank";
    c10::intrusive_ptr<PlexusWork> work = oldest;
    std::function<void(const PlexusWork&)> on_timeout = on_timeout_;
    lock.unlock();
    if (on_timeout) on_timeout(*work);
    lock.lock();
  }
}

}  // namespace plexus::torch_backend
