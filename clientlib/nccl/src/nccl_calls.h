// How an NCCL call runs: now, or at the outermost ncclGroupEnd; stream-ordered when its
// buffers are on a GPU (the call returns at once, the stream waits for the result), else
// host-ordered (a blocking communicator returns when the result is in place, a
// non-blocking one returns ncclInProgress and ncclCommGetAsyncError follows it).
#pragma once

#include <nccl.h>

#include <functional>
#include <memory>

#include "clientlib/nccl/src/nccl_comm.h"
#include "plexus/plexus.h"

namespace plexus::nccl {

struct Call {
  std::shared_ptr<CommCore> core;
  const char* name = "";
  cudaStream_t stream = nullptr;
  bool device = false;      // a buffer is GPU memory
  void* scratch = nullptr;  // pool memory the op reads, freed when it is done
  // Submits the op on `comm` with libplexus, returning its request.
  std::function<plexus_result_t(plexus_comm_t comm, plexus_request_t* request)> issue;
};

// The checks every call makes first: a communicator that exists, is initialised, is not
// broken. Null with the result in *result otherwise.
std::shared_ptr<CommCore> usable(ncclComm_t comm, const char* call, ncclResult_t* result);
// True when `ptr` is GPU memory (the process has loaded the CUDA driver and says so).
bool on_device(const void* ptr);
// Runs the call, or keeps it for the open group.
ncclResult_t enqueue(Call call);
ncclResult_t group_start();
ncclResult_t group_end();
// True while the calling thread has a group open.
bool in_group();
// A communicator being created inside the open group: ncclGroupEnd waits for it (NCCL's
// way for one thread to create the communicators of several devices).
void group_add_init(std::shared_ptr<InitTask> task);

}  // namespace plexus::nccl
