// ProcessGroupPlexus after a lost rank or node: revoke, shrink to the survivors' group and
// grow it again (plexus_comm_revoke, _shrink, _grow). Each new group owns a communicator the
// daemons made without a Store or a rendezvous of torch's. And a group parked between an RL
// job's phases: suspend and resume (plexus_comm_suspend, _resume).
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "python/plexus_torch/gil.h"
#include "python/plexus_torch/process_group_plexus.h"

namespace plexus::torch_backend {

// Held through the call: the watchdog aborts (and frees) the communicator under the same
// lock, so it waits for a shrink or a growth rather than freeing what they use.
plexus_comm_t ProcessGroupPlexus::live_comm(const std::unique_lock<std::mutex>& held,
                                            const char* what) const {
  TORCH_CHECK(held.owns_lock() && comm_ != nullptr, "ProcessGroupPlexus: ", what,
              ": the group was aborted after a work timed out");
  return comm_;
}

void ProcessGroupPlexus::revoke(const std::string& reason) {
  std::unique_lock lock(comm_mutex_);
  TORCH_CHECK(plexus_comm_revoke(live_comm(lock, "revoke"), reason.c_str()) == PLEXUS_SUCCESS,
              "ProcessGroupPlexus: revoke: ", plexus_get_last_error());
}

c10::intrusive_ptr<ProcessGroupPlexus> ProcessGroupPlexus::shrink_group(
    const std::vector<int64_t>& exclude, bool abort) {
  std::vector<int> ranks;
  for (int64_t r : exclude) {
    TORCH_CHECK(r >= 0 && r < getSize(), "ProcessGroupPlexus: shrink: rank ", r,
                " is not in this group of ", getSize());
    ranks.push_back(static_cast<int>(r));
  }
  std::unique_lock lock(comm_mutex_);
  plexus_comm_t comm = live_comm(lock, "shrink");
  plexus_comm_t next = nullptr;
  TORCH_CHECK(plexus_comm_shrink(comm, ranks.data(), static_cast<int>(ranks.size()),
                                 abort ? PLEXUS_SHRINK_ABORT : PLEXUS_SHRINK_DEFAULT,
                                 &next) == PLEXUS_SUCCESS,
              "ProcessGroupPlexus: shrink (rank ", getRank(), "): ", plexus_get_last_error());
  int rank = 0;
  int size = 0;
  plexus_comm_user_rank(next, &rank);
  plexus_comm_count(next, &size);
  return c10::make_intrusive<ProcessGroupPlexus>(next, rank, size, timeout_);
}

#if PLEXUS_TORCH_SHRINK
c10::intrusive_ptr<c10d::Backend> ProcessGroupPlexus::shrink(
    const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
    const c10::intrusive_ptr<Options>& /*opts_override*/) {
  TORCH_CHECK(shrink_flags == PLEXUS_SHRINK_DEFAULT || shrink_flags == PLEXUS_SHRINK_ABORT,
              "ProcessGroupPlexus: shrink (rank ", getRank(), "): shrink_flags ", shrink_flags,
              " is neither SHRINK_DEFAULT (0) nor SHRINK_ABORT (1)");
  // Called from Python (torch's shrink_group) with the GIL held: let other threads run
  // while the daemons agree.
  return without_gil(
      [&] { return shrink_group(ranks_to_exclude, shrink_flags == PLEXUS_SHRINK_ABORT); });
}
#endif

uint64_t ProcessGroupPlexus::suspend_comm() {
  uint64_t released = 0;
  std::unique_lock lock(comm_mutex_);
  TORCH_CHECK(plexus_comm_suspend(live_comm(lock, "suspend"), PLEXUS_SUSPEND_MEM, &released) ==
                  PLEXUS_SUCCESS,
              "ProcessGroupPlexus: suspend (rank ", getRank(), "): ", plexus_get_last_error());
  return released;
}

void ProcessGroupPlexus::resume_comm() {
  std::unique_lock lock(comm_mutex_);
  TORCH_CHECK(plexus_comm_resume(live_comm(lock, "resume")) == PLEXUS_SUCCESS,
              "ProcessGroupPlexus: resume (rank ", getRank(), "): ", plexus_get_last_error());
}

#if PLEXUS_TORCH_SUSPEND
void ProcessGroupPlexus::suspend() { suspend_comm(); }
void ProcessGroupPlexus::resume() { resume_comm(); }
#endif

c10::intrusive_ptr<ProcessGroupPlexus> ProcessGroupPlexus::grow(int size) {
  std::unique_lock lock(comm_mutex_);
  plexus_comm_t comm = live_comm(lock, "grow");
  plexus_comm_t next = nullptr;
  TORCH_CHECK(plexus_comm_grow(comm, size, &next) == PLEXUS_SUCCESS,
              "ProcessGroupPlexus: grow (rank ", getRank(), "): ", plexus_get_last_error());
  return c10::make_intrusive<ProcessGroupPlexus>(next, getRank(), size, timeout_);
}

std::string ProcessGroupPlexus::grow_id() {
  plexus_unique_id_t id;
  std::unique_lock lock(comm_mutex_);
  TORCH_CHECK(plexus_comm_grow_id(live_comm(lock, "grow_id"), &id) == PLEXUS_SUCCESS,
              "ProcessGroupPlexus: grow_id: ", plexus_get_last_error());
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
}

c10::intrusive_ptr<ProcessGroupPlexus> ProcessGroupPlexus::join_growth(
    const std::string& id, int rank, int size, std::chrono::milliseconds timeout) {
  plexus_unique_id_t unique;
  TORCH_CHECK(id.size() == sizeof(unique), "ProcessGroupPlexus: a growth's id has ", sizeof(unique),
              " bytes, got ", id.size(), " (from grow_id?)");
  std::memcpy(&unique, id.data(), sizeof(unique));
  plexus_comm_t comm = nullptr;
  const auto timeout_ms = std::min<int64_t>(timeout.count(), std::numeric_limits<int>::max());
  TORCH_CHECK(plexus_comm_init_rank_timeout(&comm, size, unique, rank,
                                            static_cast<int>(timeout_ms)) == PLEXUS_SUCCESS,
              "ProcessGroupPlexus: rank ", rank, " of ", size,
              " could not join the growth: ", plexus_get_last_error());
  return c10::make_intrusive<ProcessGroupPlexus>(comm, rank, size, timeout);
}

}  // namespace plexus::torch_backend
