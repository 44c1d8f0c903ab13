// CommCore: waiting for initialisation, and the outstanding requests.
#include "clientlib/nccl/src/nccl_comm.h"

#include <utility>

#include "clientlib/nccl/src/nccl_errors.h"

namespace plexus::nccl {

plexus_comm_t CommCore::ready(ncclResult_t* result, const char* call) {
  std::shared_ptr<InitTask> task;
  {
    std::lock_guard lock(mutex);
    if (plexus != nullptr) {
      *result = ncclSuccess;
      return plexus;
    }
    task = init;
  }
  if (task == nullptr) {
    *result = fail(ncclInvalidUsage, std::string(call) + ": the communicator was aborted");
    return nullptr;
  }
  std::unique_lock task_lock(task->mutex);
  task->done_cv.wait(task_lock, [&] { return task->done; });
  if (task->result != ncclSuccess) {
    *result =
        fail(task->result,
             std::string(call) + ": the communicator's initialisation failed: " + task->message);
    return nullptr;
  }
  std::lock_guard lock(mutex);
  plexus = task->comm;
  *result = ncclSuccess;
  return plexus;
}

bool CommCore::reap_locked() {
  bool host_in_flight = false;
  for (auto it = outstanding.begin(); it != outstanding.end();) {
    int done = 0;
    const plexus_result_t r = plexus_test(&it->request, &done);
    if (done == 0) {
      host_in_flight = host_in_flight || it->host_ordered;
      ++it;
      continue;
    }
    if (r != PLEXUS_SUCCESS && error == ncclSuccess) {
      error = to_nccl(r);
      error_message = std::string(it->call) + " (rank " + std::to_string(rank) + " of " +
                      std::to_string(nranks) + "): " + plexus_get_last_error();
    }
    if (it->scratch != nullptr) plexus_free(it->scratch);
    it = outstanding.erase(it);
  }
  return host_in_flight;
}

ncclResult_t CommCore::drain(const char* call) {
  std::deque<Outstanding> ops;
  {
    std::lock_guard lock(mutex);
    ops.swap(outstanding);
  }
  ncclResult_t first = ncclSuccess;
  for (Outstanding& op : ops) {
    const plexus_result_t r = plexus_wait(&op.request);
    if (r != PLEXUS_SUCCESS && first == ncclSuccess) {
      first = fail_plexus(r, std::string(call) + ": an earlier " + op.call + " failed");
    }
    if (op.scratch != nullptr) plexus_free(op.scratch);
  }
  return first;
}

void CommCore::remember(Outstanding op) {
  std::lock_guard lock(mutex);
  outstanding.push_back(std::move(op));
}

}  // namespace plexus::nccl
