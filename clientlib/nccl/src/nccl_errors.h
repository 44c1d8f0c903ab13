// Plexus's results as ncclResult_t, and the thread's last error (ncclGetLastError).
#pragma once

#include <nccl.h>

#include <string>

#include "plexus/plexus.h"

namespace plexus::nccl {

// The nearest ncclResult_t (the table is in nccl_errors.cc).
ncclResult_t to_nccl(plexus_result_t result);
// Records `message` as the calling thread's last error and returns `result`.
ncclResult_t fail(ncclResult_t result, std::string message);
// A failed libplexus call made by `call`: its result mapped, libplexus's sentence recorded.
ncclResult_t fail_plexus(plexus_result_t result, const std::string& call);
const char* last_error();

}  // namespace plexus::nccl
