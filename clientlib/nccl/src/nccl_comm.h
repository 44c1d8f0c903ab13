// The communicator behind ncclComm_t: a libplexus communicator, the NCCL-visible facts
// about it (size, rank, device, blocking), its non-blocking initialisation, the requests
// still outstanding for ncclCommGetAsyncError, and its pre-multiplied-sum operators.
#pragma once

#include <nccl.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "clientlib/nccl/src/nccl_types.h"
#include "plexus/plexus.h"

namespace plexus::nccl {

// A non-blocking ncclCommInitRankConfig running on its own thread. Shared between that
// thread and the communicator, so that ncclCommAbort can leave without waiting for it: a
// task abandoned before it is done destroys what it made.
struct InitTask {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  bool abandoned = false;
  ncclResult_t result = ncclInProgress;
  std::string message;
  plexus_comm_t comm = nullptr;
};

// An op submitted and not yet seen complete.
struct Outstanding {
  plexus_request_t request = nullptr;
  void* scratch = nullptr;    // a pre-multiplied copy of the input in the pool, freed at the end
  bool host_ordered = false;  // a non-blocking comm's host call: in progress until done
  const char* call = "";
};

struct CommCore {
  int nranks = 0;
  int rank = 0;
  int device = 0;
  bool blocking = true;
  std::string name;

  // Held shared from ready() until an op is submitted, and exclusively by ncclCommAbort and
  // ncclCommDestroy around freeing the libplexus communicator: an abort from another thread
  // (a watchdog) cannot free it under a call that is submitting.
  std::shared_mutex use_mutex;

  // The libplexus communicator once initialised; see ready().
  std::mutex mutex;  // guards everything below
  std::shared_ptr<InitTask> init;
  plexus_comm_t plexus = nullptr;
  ncclResult_t error = ncclSuccess;  // sticky: the communicator is broken
  std::string error_message;
  std::deque<Outstanding> outstanding;
  std::map<int, PreMulSum> premul;
  int next_op = ncclNumOps;

  // The libplexus communicator, waiting for a non-blocking initialisation to finish; null
  // (and the result, recorded as the last error) when it failed.
  plexus_comm_t ready(ncclResult_t* result, const char* call);
  // Takes the outstanding requests that have completed, recording the first failure as the
  // communicator's error. Returns true when host-ordered ones are still in flight. Under
  // `mutex`.
  bool reap_locked();
  // Waits for every outstanding request; returns the first failure.
  ncclResult_t drain(const char* call);
  void remember(Outstanding op);
};

}  // namespace plexus::nccl

struct ncclComm {
  std::shared_ptr<plexus::nccl::CommCore> core;
};
