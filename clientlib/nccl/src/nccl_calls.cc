#include "clientlib/nccl/src/nccl_calls.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "clientlib/nccl/src/nccl_cuda.h"
#include "clientlib/nccl/src/nccl_errors.h"
#include "clientlib/src/gpu_pointer.h"

namespace plexus::nccl {
namespace {

struct Group {
  int depth = 0;
  std::vector<Call> calls;
  std::vector<std::shared_ptr<InitTask>> inits;
};
thread_local Group t_group;

void release(Call& call) {
  if (call.scratch != nullptr) plexus_free(std::exchange(call.scratch, nullptr));
}

// One call with GPU buffers: queued on its stream (CU_STREAM_LEGACY for NULL, as CUDA
// reads it), returning at once. Its request is kept for ncclCommGetAsyncError.
ncclResult_t run_on_stream(Call& call) {
  ncclResult_t result = ncclSuccess;
  std::shared_lock use(call.core->use_mutex);
  plexus_comm_t comm = call.core->ready(&result, call.name);
  if (comm == nullptr) return result;
  void* stream = call.stream != nullptr ? static_cast<void*>(call.stream) : legacy_stream();
  plexus_result_t r = plexus_comm_set_stream(comm, stream);
  plexus_request_t request = nullptr;
  if (r == PLEXUS_SUCCESS) r = call.issue(comm, &request);
  if (r != PLEXUS_SUCCESS) return fail_plexus(r, call.name);
  call.core->remember({request, nullptr, false, call.name});
  return ncclSuccess;
}

// Calls run in host order, as one libplexus group when there are several: each starts
// after its stream's queued work (a host buffer passed with a stream), and a blocking
// communicator's calls are waited for here.
ncclResult_t run_on_host(std::vector<Call>& calls) {
  std::vector<void*> synced;
  for (Call& call : calls) {
    // Device buffers on stream NULL are ordered on the legacy default stream, as CUDA reads
    // it; host buffers with stream NULL need no wait.
    void* stream = call.stream != nullptr ? static_cast<void*>(call.stream)
                                          : (call.device ? legacy_stream() : nullptr);
    if (stream == nullptr || !driver_loaded()) continue;
    if (std::find(synced.begin(), synced.end(), stream) != synced.end()) continue;
    if (std::string e = stream_synchronize(stream); !e.empty()) {
      for (Call& c : calls) release(c);
      return fail(ncclUnhandledCudaError, std::string(call.name) + ": " + e);
    }
    synced.push_back(stream);
  }
  ncclResult_t first = ncclSuccess;
  std::vector<plexus_request_t> requests(calls.size(), nullptr);
  std::vector<std::shared_lock<std::shared_mutex>> uses;
  const bool grouped = calls.size() > 1;
  if (grouped) plexus_group_start();
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& call = calls[i];
    // Inside libplexus's group nothing may escape: the group must be ended below.
    const ncclResult_t result = guarded(call.name, [&]() -> ncclResult_t {
      // Once per communicator (a group may hold several calls on one).
      bool held = false;
      for (size_t j = 0; j < i; ++j) held = held || calls[j].core == call.core;
      if (!held) uses.emplace_back(call.core->use_mutex);
      ncclResult_t ready = ncclSuccess;
      plexus_comm_t comm = call.core->ready(&ready, call.name);
      if (comm == nullptr) return ready;
      plexus_result_t r = plexus_comm_set_stream(comm, nullptr);
      if (r == PLEXUS_SUCCESS) r = call.issue(comm, &requests[i]);
      return r == PLEXUS_SUCCESS ? ncclSuccess : fail_plexus(r, call.name);
    });
    if (result != ncclSuccess) {
      requests[i] = nullptr;
      if (first == ncclSuccess) first = result;
    }
  }
  if (grouped) {
    if (plexus_result_t r = plexus_group_end(); r != PLEXUS_SUCCESS && first == ncclSuccess) {
      first = fail_plexus(r, "ncclGroupEnd");
    }
  }
  // A non-blocking communicator's requests are remembered before the locks go, so that an
  // abort or destroy that follows drains them too.
  bool in_progress = false;
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& call = calls[i];
    if (requests[i] == nullptr || call.core->blocking) continue;
    call.core->remember({requests[i], std::exchange(call.scratch, nullptr), true, call.name});
    requests[i] = nullptr;
    in_progress = true;
  }
  uses.clear();  // submitted: an abort may free the communicators now
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& call = calls[i];
    if (requests[i] == nullptr) {
      release(call);
      continue;
    }
    const plexus_result_t r = plexus_wait(&requests[i]);
    release(call);
    if (r != PLEXUS_SUCCESS && first == ncclSuccess) {
      first = fail_plexus(r, std::string(call.name) + " (rank " + std::to_string(call.core->rank) +
                                 " of " + std::to_string(call.core->nranks) + ")");
      // A peer lost, a daemon gone: the communicator cannot go on (as NCCL's async error).
      if (first == ncclRemoteError || first == ncclSystemError) {
        std::lock_guard lock(call.core->mutex);
        if (call.core->error == ncclSuccess) {
          call.core->error = first;
          call.core->error_message = last_error();
        }
      }
    }
  }
  if (first != ncclSuccess) return first;
  return in_progress ? ncclInProgress : ncclSuccess;
}

ncclResult_t run(std::vector<Call>& calls) {
  if (calls.size() == 1 && calls[0].device) return run_on_stream(calls[0]);
  return run_on_host(calls);
}

}  // namespace

std::shared_ptr<CommCore> usable(ncclComm_t comm, const char* call, ncclResult_t* result) {
  if (comm == nullptr || comm->core == nullptr) {
    *result = fail(ncclInvalidArgument, std::string(call) + ": comm is NULL");
    return nullptr;
  }
  std::shared_ptr<CommCore> core = comm->core;
  std::lock_guard lock(core->mutex);
  core->reap_locked();
  if (core->error != ncclSuccess) {
    *result = fail(core->error,
                   std::string(call) + ": the communicator failed earlier: " + core->error_message);
    return nullptr;
  }
  *result = ncclSuccess;
  return core;
}

bool on_device(const void* ptr) {
  if (ptr == nullptr || !driver_loaded()) return false;
  const auto pointer = client::query_gpu_pointer(ptr);
  return !pointer.ok() || pointer->has_value();
}

ncclResult_t enqueue(Call call) {
  return guarded(call.name, [&]() -> ncclResult_t {
    if (t_group.depth > 0) {
      t_group.calls.push_back(std::move(call));
      return ncclSuccess;
    }
    std::vector<Call> calls;
    calls.push_back(std::move(call));
    return run(calls);
  });
}

ncclResult_t group_start() {
  ++t_group.depth;
  return ncclSuccess;
}

ncclResult_t group_end() {
  if (t_group.depth == 0) {
    return fail(ncclInvalidUsage, "ncclGroupEnd: no group is open (ncclGroupStart was not called)");
  }
  if (--t_group.depth > 0) return ncclSuccess;
  std::vector<Call> calls = std::move(t_group.calls);
  std::vector<std::shared_ptr<InitTask>> inits = std::move(t_group.inits);
  t_group.calls.clear();
  t_group.inits.clear();
  ncclResult_t first = ncclSuccess;
  for (const std::shared_ptr<InitTask>& task : inits) {
    std::unique_lock lock(task->mutex);
    task->done_cv.wait(lock, [&] { return task->done; });
    if (task->result != ncclSuccess && first == ncclSuccess) {
      first = fail(task->result, task->message);
    }
  }
  if (calls.empty()) return first;
  const ncclResult_t ran = guarded("ncclGroupEnd", [&] { return run(calls); });
  return first != ncclSuccess ? first : ran;
}

bool in_group() { return t_group.depth > 0; }

void group_add_init(std::shared_ptr<InitTask> task) { t_group.inits.push_back(std::move(task)); }

}  // namespace plexus::nccl
