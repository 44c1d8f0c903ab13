// The thread that copies weights in and out of the store: a publish from the publisher's
// pool (or GPU memory) into the store's buffer, a pull from a version into the puller's pool
// (or GPU memory); a GPU tensor's copy is a closure the job carries (device_copies). Neither runs
// on the control or the engine thread, so a 1 GiB copy holds up no request and no
// collective. Large copies are cut into pieces shared with the copier's own workers.
//
// Any thread calls copy(); `done` runs on the copier thread (it posts to its owner). The
// thread starts with the first copy, so a daemon that never stores weights has none.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/local/worker_pool.h"

namespace plexus::daemon::weights {

struct CopySpan {
  std::byte* to = nullptr;
  const std::byte* from = nullptr;
  size_t bytes = 0;
};

struct CopyJob {
  std::vector<CopySpan> spans;
  // Copies the copier thread runs itself after the spans, one at a time, each returning ""
  // or why it failed: a GPU tensor's, which the device copies (DeviceMemory::copy_aside).
  std::vector<std::function<std::string()>> device_copies;
  // The client whose pool one side of the spans lies in: if it is gone by the time the job
  // runs (its connection closed), nothing is copied (its mapping is held only while copying,
  // so a client killed mid-publish leaves nothing half-copied behind, and a pull for a client
  // gone costs nothing).
  std::weak_ptr<const void> client;
  // Holds the store's memory the other side points into until the copy is over.
  std::vector<std::shared_ptr<const void>> holds;
  // Runs after the holds are let go: "" when every byte was copied, else why not (kClientGone
  // when the client was gone, so nothing was).
  std::function<void(const std::string& failure)> done;
};

// CopyJob::done's failure when the job's client was gone before it ran.
inline constexpr const char* kClientGone = "the client went away";

class WeightCopier {
 public:
  // `workers`: threads besides the copier's own that share a large copy (0: none).
  explicit WeightCopier(unsigned workers) : workers_(workers) {}
  ~WeightCopier();
  WeightCopier(const WeightCopier&) = delete;
  WeightCopier& operator=(const WeightCopier&) = delete;

  // Queues the job behind those already queued.
  void copy(CopyJob job);
  // Ends the thread after the job it is running; queued jobs are dropped (their `done` never
  // runs: the daemon is stopping).
  void stop();

 private:
  void loop();
  // Copies the job's spans and runs its device copies: "" or why not (kClientGone).
  std::string run(const CopyJob& job);

  const unsigned workers_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<CopyJob> jobs_;
  bool stopping_ = false;
  std::thread thread_;
  std::unique_ptr<WorkerPool> pool_;  // made by the copier thread on its first large copy
};

}  // namespace plexus::daemon::weights
