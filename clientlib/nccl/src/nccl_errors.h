// Plexus's results as ncclResult_t, and the thread's last error (ncclGetLastError).
#pragma once

#include <nccl.h>

#include <exception>
#include <new>
#include <string>

#include "plexus/plexus.h"

// An entry point of libnccl.so.2 (exports.map keeps everything else local).
#define NCCL_API extern "C" __attribute__((visibility("default")))

namespace plexus::nccl {

// The nearest ncclResult_t (the table is in nccl_errors.cc).
ncclResult_t to_nccl(plexus_result_t result);
// Records `message` as the calling thread's last error and returns `result`.
ncclResult_t fail(ncclResult_t result, std::string message);
// A failed libplexus call made by `call`: its result mapped, libplexus's sentence recorded.
ncclResult_t fail_plexus(plexus_result_t result, const std::string& call);
const char* last_error();

// Runs an entry point's body so that no C++ exception crosses the C API (a thread that
// cannot be started, memory that runs out): they become results and the last error.
template <typename Fn>
ncclResult_t guarded(const char* call, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return fail(ncclSystemError, std::string(call) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(ncclSystemError, std::string(call) + ": " + e.what());
  }
}

}  // namespace plexus::nccl
