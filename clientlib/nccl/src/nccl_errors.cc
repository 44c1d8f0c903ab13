#include "clientlib/nccl/src/nccl_errors.h"

#include <utility>

namespace plexus::nccl {
namespace {

thread_local std::string t_last_error;

}  // namespace

// What a caller of NCCL would do about each: ncclRemoteError for what another rank or node
// caused (a peer lost, a rendezvous that timed out waiting for ranks), ncclInvalidUsage for
// calls that disagree across ranks or use a communicator that is gone, ncclSystemError for
// this node's daemon and the OS.
ncclResult_t to_nccl(plexus_result_t result) {
  switch (result) {
    case PLEXUS_SUCCESS:
      return ncclSuccess;
    case PLEXUS_ERR_INVALID_ARGUMENT:
      return ncclInvalidArgument;
    case PLEXUS_ERR_SYSTEM:
      return ncclSystemError;
    case PLEXUS_ERR_DAEMON_UNAVAILABLE:
      return ncclSystemError;
    case PLEXUS_ERR_DAEMON_LOST:
      return ncclSystemError;
    case PLEXUS_ERR_TIMEOUT:
      return ncclRemoteError;
    case PLEXUS_ERR_PEER_LOST:
      return ncclRemoteError;
    case PLEXUS_ERR_MISMATCH:
      return ncclInvalidUsage;
    case PLEXUS_ERR_COMM_ABORTED:
      return ncclInvalidUsage;
    case PLEXUS_ERR_PROTOCOL:
      return ncclInternalError;
    case PLEXUS_ERR_NO_MEMORY:
      return ncclSystemError;
    case PLEXUS_ERR_INTERNAL:
      return ncclInternalError;
    case PLEXUS_ERR_VERSION:
      return ncclSystemError;
    case PLEXUS_ERR_REVOKED:
      return ncclInvalidUsage;
  }
  return ncclInternalError;
}

ncclResult_t fail(ncclResult_t result, std::string message) {
  t_last_error = std::move(message);
  return result;
}

ncclResult_t fail_plexus(plexus_result_t result, const std::string& call) {
  return fail(to_nccl(result), call + ": " + plexus_get_last_error());
}

const char* last_error() { return t_last_error.c_str(); }

}  // namespace plexus::nccl
