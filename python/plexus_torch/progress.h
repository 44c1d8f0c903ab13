// The thread that completes a process group's works in submission order (waiting on their
// libplexus requests), and a watchdog that fails the group when its oldest work outlives
// the process group's timeout.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "python/plexus_torch/plexus_work.h"

namespace plexus::torch_backend {

class Progress {
 public:
  // on_timeout(work) runs on the watchdog thread once, for the first work past its
  // deadline: it must make the work's requests complete (abort the communicator).
  explicit Progress(std::function<void(const PlexusWork&)> on_timeout);
  ~Progress();  // completes what is queued, then joins
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void enqueue(c10::intrusive_ptr<PlexusWork> work);
  // True on the thread that completes works (a future's callback may drop the last
  // reference to the group there: it then cannot join itself).
  bool on_runner_thread() const { return std::this_thread::get_id() == runner_.get_id(); }
  // Asks both threads to end once the queue is empty, without joining them; the timeout
  // callback is not called after this.
  void stop_detached();
  // Works not yet completed (the one being waited for included).
  size_t queued();

 private:
  void run();
  void watch();

  std::function<void(const PlexusWork&)> on_timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<c10::intrusive_ptr<PlexusWork>> works_;  // front: the one being waited for
  bool stopping_ = false;
  std::string timed_out_;  // set by the watchdog: every later failure says why
  std::thread runner_;
  std::thread watchdog_;
};

}  // namespace plexus::torch_backend
