// The engine's command queue: closures posted from any thread, run on the engine thread in
// posting order, each given the engine (`Target`). Owns the eventfd that wakes a parked
// engine and the lock the posters share; the flag lets the loop look for commands without
// taking the lock.
#pragma once

#include <sys/eventfd.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <mutex>
#include <system_error>
#include <vector>

#include "common/unique_fd.h"
#include "shm/ring.h"

namespace plexus::daemon {

template <typename Target>
class CommandQueue {
 public:
  using Command = std::function<void(Target&)>;

  // Throws std::system_error when the eventfd cannot be made.
  CommandQueue() : eventfd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!eventfd_) {
      throw std::system_error(errno, std::generic_category(), "engine command eventfd");
    }
  }

  // Any thread: queues fn and wakes the engine.
  void post(Command fn) {
    {
      std::lock_guard lock(mutex_);
      commands_.push_back(std::move(fn));
    }
    pending_.store(true, std::memory_order_release);
    shm::signal_eventfd(eventfd_.get());
  }
  // Any thread: wakes a parked engine without a command (stopping).
  void wake() const { shm::signal_eventfd(eventfd_.get()); }
  // Engine thread: whether a command waits (post() is seen once it has returned).
  bool pending() const { return pending_.load(std::memory_order_acquire); }
  // Engine thread: runs every command queued so far, in order, on `target`.
  void run(Target& target) {
    std::vector<Command> commands;
    {
      std::lock_guard lock(mutex_);
      commands.swap(commands_);
      pending_.store(false, std::memory_order_relaxed);
    }
    for (auto& command : commands) command(target);
  }
  // The eventfd a parked engine waits on (readable after post() or wake()).
  int fd() const { return eventfd_.get(); }

 private:
  common::UniqueFd eventfd_;
  std::mutex mutex_;
  std::vector<Command> commands_;  // under mutex_
  std::atomic<bool> pending_{false};
};

}  // namespace plexus::daemon
