// The C API's calls that need no communicator: result strings, dtype sizes, the shared
// pool's memory, and forgetting a GPU allocation.
#include <string>

#include "clientlib/src/api_common.h"
#include "clientlib/src/client_context.h"
#include "clientlib/src/last_error.h"
#include "plexus/plexus.h"
#include "shm/dtype.h"

using namespace plexus::client;

extern "C" {

const char* plexus_result_string(plexus_result_t result) {
  switch (result) {
    case PLEXUS_SUCCESS:
      return "success";
    case PLEXUS_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case PLEXUS_ERR_SYSTEM:
      return "system error";
    case PLEXUS_ERR_DAEMON_UNAVAILABLE:
      return "plexusd unavailable";
    case PLEXUS_ERR_DAEMON_LOST:
      return "plexusd lost";
    case PLEXUS_ERR_TIMEOUT:
      return "timeout";
    case PLEXUS_ERR_PEER_LOST:
      return "peer lost";
    case PLEXUS_ERR_MISMATCH:
      return "mismatched calls across ranks";
    case PLEXUS_ERR_COMM_ABORTED:
      return "communicator aborted";
    case PLEXUS_ERR_PROTOCOL:
      return "protocol error";
    case PLEXUS_ERR_NO_MEMORY:
      return "out of memory";
    case PLEXUS_ERR_INTERNAL:
      return "internal error";
    case PLEXUS_ERR_VERSION:
      return "version mismatch";
    case PLEXUS_ERR_REVOKED:
      return "communicator revoked";
  }
  return "unknown result";
}

size_t plexus_dtype_size(plexus_dtype_t dtype) { return plexus::shm::dtype_size(dtype); }

plexus_result_t plexus_alloc(void** ptr, size_t bytes) {
  if (ptr == nullptr) return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_alloc: ptr is NULL");
  *ptr = nullptr;
  return guarded([&]() -> plexus_result_t {
    auto& pool = ClientContext::get().pool();
    *ptr = pool.allocate(bytes);
    if (*ptr == nullptr) {
      return fail(PLEXUS_ERR_NO_MEMORY,
                  "plexus_alloc: the shared pool (" + std::to_string(pool.size()) + " bytes, " +
                      std::to_string(pool.free_bytes()) + " free) cannot hold " +
                      std::to_string(bytes) + " more bytes; raise PLEXUS_POOL_SIZE");
    }
    return PLEXUS_SUCCESS;
  });
}

plexus_result_t plexus_free(void* ptr) {
  if (ptr == nullptr) return PLEXUS_SUCCESS;
  // A buffer the parent allocated before fork(): the child's private copy, gone with it.
  if (ClientContext::inherited_from_parent(ptr)) return PLEXUS_SUCCESS;
  return guarded([&]() -> plexus_result_t {
    if (!ClientContext::get().pool().deallocate(ptr)) {
      return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_free: pointer was not from plexus_alloc");
    }
    return PLEXUS_SUCCESS;
  });
}

plexus_result_t plexus_pool_size(size_t* bytes) {
  if (bytes == nullptr) return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_pool_size: bytes is NULL");
  return guarded([&]() -> plexus_result_t {
    *bytes = ClientContext::get().pool().size();
    return PLEXUS_SUCCESS;
  });
}

plexus_result_t plexus_gpu_forget(const void* ptr) {
  return guarded([&]() -> plexus_result_t {
    ClientContext& ctx = ClientContext::get();
    if (!ctx.gpu().forget(ctx.control(), ptr)) {
      return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                  "plexus_gpu_forget: the pointer is in no GPU allocation registered with plexusd");
    }
    return PLEXUS_SUCCESS;
  });
}

}  // extern "C"
