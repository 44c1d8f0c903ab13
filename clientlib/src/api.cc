// The C API: argument checks, pool staging for foreign buffers, groups, requests.
#include <arpa/inet.h>
#include <sys/random.h>

#include <capnp/serialize.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "clientlib/control/control_channel.h"
#include "clientlib/src/api_common.h"
#include "clientlib/src/client_context.h"
#include "clientlib/src/gpu_stream.h"
#include "clientlib/src/last_error.h"
#include "plexus/plexus.h"
#include "shm/dtype.h"
#include "shm/entry_validation.h"

namespace plexus::client {
namespace {

namespace control = shm::control;

struct GroupState {
  int depth = 0;
  std::vector<std::pair<plexus_request*, shm::SubmissionEntry>> entries;
};
thread_local GroupState t_group;

plexus_result_t check_comm(plexus_comm_t comm, const char* call) {
  if (comm == nullptr || !comm->state) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, std::string(call) + ": comm is NULL");
  }
  if (comm->state->closed.load()) {
    return fail(PLEXUS_ERR_COMM_ABORTED,
                std::string(call) + ": the communicator was destroyed or aborted");
  }
  CommState& state = *comm->state;
  std::lock_guard lock(state.async_mutex);
  if (state.async_status != PLEXUS_SUCCESS) {
    const plexus_result_t status = state.async_status;
    state.async_status = PLEXUS_SUCCESS;
    return fail(status, std::string(call) + ": an earlier stream-ordered call failed: " +
                            std::exchange(state.async_message, {}));
  }
  return PLEXUS_SUCCESS;
}

// The stream-ordered part of a call (plexus_comm_set_stream): the stream writes the slot's
// ticket to its ready flag once the work before the call is done, the entry goes to the
// daemon now, and the stream waits for the done flag before the work after it. Returns
// with the op queued; takes ownership of req.
plexus_result_t submit_on_stream(ClientContext& ctx, void* stream, shm::SubmissionEntry entry,
                                 plexus_request* req, plexus_request_t* request, const char* call) {
  auto refuse = [&](plexus_result_t status, const std::string& why) {
    if (req->staging != nullptr) ctx.pool().deallocate(req->staging);
    delete req;
    return fail(status, std::string(call) + ": " + why);
  };
  if (req->staging != nullptr) {
    return refuse(PLEXUS_ERR_INVALID_ARGUMENT,
                  "a stream-ordered call takes GPU buffers or plexus_alloc memory, not other "
                  "host memory (it would be copied before the stream got to the call)");
  }
  if (t_group.depth > 0) {
    return refuse(PLEXUS_ERR_INVALID_ARGUMENT,
                  "stream-ordered calls cannot be grouped yet (plexus_group_start)");
  }
  if (std::string e = check_stream_not_capturing(stream); !e.empty()) {
    return refuse(PLEXUS_ERR_INVALID_ARGUMENT, e);
  }
  StreamSlot slot;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    common::Result<std::optional<StreamSlot>> acquired = ctx.stream_flags().acquire();
    if (!acquired) return refuse(PLEXUS_ERR_SYSTEM, acquired.error());
    if (*acquired) {
      slot = **acquired;
      break;
    }
    if (std::chrono::steady_clock::now() > give_up) {
      return refuse(PLEXUS_ERR_TIMEOUT, "all " + std::to_string(StreamFlagSlots::kSlots) +
                                            " stream flags are in use (that many stream-ordered "
                                            "calls are in flight) and none ended for 60 s");
    }
    if (!ctx.progress()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  // Both stream operations are queued before the entry goes to the daemon, so that one the
  // driver refuses leaves nothing running (done was reset below this ticket by acquire, so
  // the wait holds until the daemon writes it).
  std::string e = stream_write_value(stream, slot.ready_device, slot.ticket);
  if (e.empty()) e = stream_wait_value(stream, slot.done_device, slot.ticket);
  if (!e.empty()) {
    ctx.stream_flags().release(slot.index, slot.ticket);
    return refuse(PLEXUS_ERR_SYSTEM, e);
  }
  entry.flags = shm::kEntryStreamOrdered;
  entry.stream_ticket = slot.ticket;
  entry.stream_flags = slot.pool_offset;
  req->stream_slot = slot.index;
  req->stream_ticket = slot.ticket;
  req->detached = request == nullptr;
  ctx.watch_daemon_for_streams();
  ctx.submit(req, entry);
  // Past this point req may already be complete (and, detached, freed).
  if (request != nullptr) *request = req;
  return PLEXUS_SUCCESS;
}

// Where a user buffer lives for the daemon: in the pool (zero copy) or staged.
struct BufferPlan {
  const void* send = nullptr;
  size_t send_bytes = 0;
  void* recv = nullptr;
  size_t recv_bytes = 0;
  bool in_place = false;  // send and recv overlap as the collective's in-place form
};

// Fills entry's offsets, staging non-pool buffers through one pool allocation whose
// result part is copied out on completion. In place, the staging area mirrors the
// span covering both buffers, so the daemon sees the same in-place layout.
plexus_result_t place_buffers(ClientContext& ctx, const BufferPlan& plan, const char* call,
                              shm::SubmissionEntry* entry, plexus_request* req) {
  shm::ClientPool& pool = ctx.pool();
  if (plan.send_bytes > 0 && plan.send == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, std::string(call) + ": sendbuff is NULL");
  }
  if (plan.recv_bytes > 0 && plan.recv == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, std::string(call) + ": recvbuff is NULL");
  }
  const bool send_in_pool = plan.send_bytes == 0 || pool.contains(plan.send, plan.send_bytes);
  const bool recv_in_pool = plan.recv_bytes == 0 || pool.contains(plan.recv, plan.recv_bytes);
  std::optional<GpuSpan> send_gpu;
  std::optional<GpuSpan> recv_gpu;
  if (!send_in_pool) {
    auto located = ctx.gpu().locate(ctx.control(), plan.send, plan.send_bytes);
    if (!located) {
      return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                  std::string(call) + ": sendbuff: " + located.error());
    }
    send_gpu = *located;
  }
  if (!recv_in_pool) {
    auto located = ctx.gpu().locate(ctx.control(), plan.recv, plan.recv_bytes);
    if (!located) {
      return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                  std::string(call) + ": recvbuff: " + located.error());
    }
    recv_gpu = *located;
  }
  if (send_gpu || recv_gpu) {
    // Device buffers go to the daemon as they are; a host buffer beside one must be in
    // the pool (staging it would serialise a host copy behind the GPU op).
    if ((!send_in_pool && !send_gpu) || (!recv_in_pool && !recv_gpu)) {
      return fail(
          PLEXUS_ERR_INVALID_ARGUMENT,
          std::string(call) + ": one buffer is GPU memory and the other is host memory " +
              "outside the pool: use plexus_alloc for the host one, or GPU memory for both");
    }
    if (send_gpu) {
      entry->send_region = send_gpu->region;
      entry->send_offset = send_gpu->offset;
    } else {
      entry->send_offset = plan.send_bytes ? pool.offset_of(plan.send) : 0;
    }
    if (recv_gpu) {
      entry->recv_region = recv_gpu->region;
      entry->recv_offset = recv_gpu->offset;
    } else {
      entry->recv_offset = plan.recv_bytes ? pool.offset_of(plan.recv) : 0;
    }
    return PLEXUS_SUCCESS;
  }
  if (send_in_pool && recv_in_pool) {
    entry->send_offset = plan.send_bytes ? pool.offset_of(plan.send) : 0;
    entry->recv_offset = plan.recv_bytes ? pool.offset_of(plan.recv) : 0;
    return PLEXUS_SUCCESS;
  }
  const auto* send = static_cast<const std::byte*>(plan.send);
  auto* recv = static_cast<std::byte*>(plan.recv);
  size_t stage_bytes = plan.send_bytes + plan.recv_bytes;
  const std::byte* outer = nullptr;
  if (plan.in_place) {
    outer = std::min<const std::byte*>(send, recv);
    stage_bytes = static_cast<size_t>(
        std::max<const std::byte*>(send + plan.send_bytes, recv + plan.recv_bytes) - outer);
  }
  auto* staging = static_cast<std::byte*>(pool.allocate(stage_bytes));
  if (staging == nullptr) {
    return fail(PLEXUS_ERR_NO_MEMORY,
                std::string(call) + ": the shared pool has no room to stage " +
                    std::to_string(stage_bytes) +
                    " bytes of a buffer outside it (raise PLEXUS_POOL_SIZE or use plexus_alloc)");
  }
  size_t send_at = 0;
  size_t recv_at = plan.send_bytes;
  if (plan.in_place) {
    std::memcpy(staging, outer, stage_bytes);
    send_at = static_cast<size_t>(send - outer);
    recv_at = static_cast<size_t>(recv - outer);
  } else if (plan.send_bytes > 0) {
    std::memcpy(staging, send, plan.send_bytes);
  }
  entry->send_offset = pool.offset_of(staging + send_at);
  entry->recv_offset = pool.offset_of(staging + recv_at);
  req->staging = staging;
  req->user_recv = plan.recv;
  req->copy_out_bytes = plan.recv_bytes;
  req->copy_out_offset = recv_at;
  return PLEXUS_SUCCESS;
}

// Releases what a completed request holds and returns its result.
plexus_result_t finish(plexus_request* req) {
  plexus_result_t status = req->status;
  std::string message = std::move(req->message);
  if (req->staging != nullptr) {
    if (status == PLEXUS_SUCCESS && req->copy_out_bytes > 0) {
      std::memcpy(req->user_recv, static_cast<std::byte*>(req->staging) + req->copy_out_offset,
                  req->copy_out_bytes);
    }
    ClientContext::get().pool().deallocate(req->staging);
  }
  delete req;
  if (status != PLEXUS_SUCCESS) return fail(status, std::move(message));
  return PLEXUS_SUCCESS;
}

static_assert(PLEXUS_ANY_SOURCE == shm::kAnySource);

// A send's or recv's tag, and for a recv from any source where its sender's rank goes.
struct P2pOptions {
  int tag = 0;
  int* source = nullptr;
};

plexus_result_t enqueue(shm::Opcode opcode, const BufferPlan& plan, size_t count,
                        plexus_dtype_t dtype, plexus_redop_t op, int peer, plexus_comm_t comm,
                        plexus_request_t* request, const char* call, P2pOptions p2p = {}) {
  if (plexus_result_t r = check_comm(comm, call); r != PLEXUS_SUCCESS) return r;
  if (comm->state->suspended.load()) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                std::string(call) + ": rank " + std::to_string(comm->state->rank) +
                    " suspended the communicator: plexus_comm_resume first");
  }
  if (!shm::is_valid_dtype(dtype)) {
    return fail(
        PLEXUS_ERR_INVALID_ARGUMENT,
        std::string(call) + ": dtype " + std::to_string(dtype) + " is not a plexus_dtype_t");
  }
  if (!shm::is_valid_redop(op)) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                std::string(call) + ": op " + std::to_string(op) + " is not a plexus_redop_t");
  }
  return guarded([&]() -> plexus_result_t {
    ClientContext& ctx = ClientContext::get();
    auto* req = new plexus_request;
    req->comm = comm->state;
    req->bytes = plan.send_bytes + plan.recv_bytes;
    shm::SubmissionEntry entry{};
    entry.opcode = static_cast<uint8_t>(opcode);
    entry.dtype = static_cast<uint8_t>(dtype);
    entry.redop = static_cast<uint8_t>(op);
    entry.comm = comm->state->handle;
    entry.count = count;
    entry.peer = peer;
    entry.send_region = entry.recv_region = shm::kHostPoolRegion;
    if (count > 0) {
      if (plexus_result_t r = place_buffers(ctx, plan, call, &entry, req); r != PLEXUS_SUCCESS) {
        delete req;
        return r;
      }
    }
    if (shm::is_point_to_point(opcode)) {
      shm::set_p2p_tag(entry, p2p.tag);
      if (opcode == shm::Opcode::kRecv && peer == PLEXUS_ANY_SOURCE)
        entry.flags |= shm::kEntryAnySource;
      req->source_out = p2p.source;
    }
    if (void* stream = comm->state->stream; stream != nullptr) {
      ctx.progress();  // completions of earlier stream-ordered calls nobody waits for
      return submit_on_stream(ctx, stream, entry, req, request, call);
    }
    if (t_group.depth > 0) {
      req->owned_by_group = request == nullptr;
      t_group.entries.emplace_back(req, entry);
      if (request != nullptr) *request = req;
      return PLEXUS_SUCCESS;
    }
    ctx.submit(req, entry);
    if (request != nullptr) {
      *request = req;
      return PLEXUS_SUCCESS;
    }
    ctx.wait(req);
    return finish(req);
  });
}

size_t bytes_of(size_t count, plexus_dtype_t dtype, size_t blocks = 1) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, shm::dtype_size(dtype), &bytes) ||
      __builtin_mul_overflow(bytes, blocks, &bytes)) {
    return SIZE_MAX;
  }
  return bytes;
}

plexus_result_t check_bytes(size_t bytes, size_t count, const char* call) {
  if (bytes == SIZE_MAX) {
    return fail(
        PLEXUS_ERR_INVALID_ARGUMENT,
        std::string(call) + ": count " + std::to_string(count) + " overflows the byte size");
  }
  return PLEXUS_SUCCESS;
}

}  // namespace
}  // namespace plexus::client

using namespace plexus::client;
using plexus::shm::Opcode;

extern "C" {

plexus_result_t plexus_comm_set_stream(plexus_comm_t comm, void* cuda_stream) {
  if (plexus_result_t r = check_comm(comm, "plexus_comm_set_stream"); r != PLEXUS_SUCCESS) return r;
  if (cuda_stream != nullptr) {
    if (std::string e = check_stream_not_capturing(cuda_stream); !e.empty()) {
      return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_set_stream: " + e);
    }
  }
  comm->state->stream = cuda_stream;
  return PLEXUS_SUCCESS;
}

plexus_result_t plexus_allreduce(const void* sendbuff, void* recvbuff, size_t count,
                                 plexus_dtype_t dtype, plexus_redop_t op, plexus_comm_t comm,
                                 plexus_request_t* request) {
  const size_t bytes = bytes_of(count, dtype);
  if (auto r = check_bytes(bytes, count, "plexus_allreduce"); r != PLEXUS_SUCCESS) return r;
  BufferPlan plan{sendbuff, bytes, recvbuff, bytes, sendbuff == recvbuff};
  return enqueue(Opcode::kAllReduce, plan, count, dtype, op, 0, comm, request, "plexus_allreduce");
}

plexus_result_t plexus_broadcast(const void* sendbuff, void* recvbuff, size_t count,
                                 plexus_dtype_t dtype, int root, plexus_comm_t comm,
                                 plexus_request_t* request) {
  const size_t bytes = bytes_of(count, dtype);
  if (auto r = check_bytes(bytes, count, "plexus_broadcast"); r != PLEXUS_SUCCESS) return r;
  const bool is_root = comm != nullptr && comm->state && comm->state->rank == root;
  BufferPlan plan{sendbuff, is_root ? bytes : 0, recvbuff, bytes, is_root && sendbuff == recvbuff};
  return enqueue(Opcode::kBroadcast, plan, count, dtype, PLEXUS_SUM, root, comm, request,
                 "plexus_broadcast");
}

plexus_result_t plexus_reduce(const void* sendbuff, void* recvbuff, size_t count,
                              plexus_dtype_t dtype, plexus_redop_t op, int root, plexus_comm_t comm,
                              plexus_request_t* request) {
  const size_t bytes = bytes_of(count, dtype);
  if (auto r = check_bytes(bytes, count, "plexus_reduce"); r != PLEXUS_SUCCESS) return r;
  const bool is_root = comm != nullptr && comm->state && comm->state->rank == root;
  BufferPlan plan{sendbuff, bytes, recvbuff, is_root ? bytes : 0, is_root && sendbuff == recvbuff};
  return enqueue(Opcode::kReduce, plan, count, dtype, op, root, comm, request, "plexus_reduce");
}

plexus_result_t plexus_allgather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 plexus_dtype_t dtype, plexus_comm_t comm,
                                 plexus_request_t* request) {
  if (auto r = check_comm(comm, "plexus_allgather"); r != PLEXUS_SUCCESS) return r;
  const size_t n = static_cast<size_t>(comm->state->nranks);
  const size_t block = bytes_of(sendcount, dtype);
  const size_t all = bytes_of(sendcount, dtype, n);
  if (auto r = check_bytes(all, sendcount, "plexus_allgather"); r != PLEXUS_SUCCESS) return r;
  const size_t offset = block * static_cast<size_t>(comm->state->rank);
  const bool in_place =
      static_cast<const std::byte*>(sendbuff) == static_cast<const std::byte*>(recvbuff) + offset;
  BufferPlan plan{sendbuff, block, recvbuff, all, in_place};
  return enqueue(Opcode::kAllGather, plan, sendcount, dtype, PLEXUS_SUM, 0, comm, request,
                 "plexus_allgather");
}

plexus_result_t plexus_reducescatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     plexus_dtype_t dtype, plexus_redop_t op, plexus_comm_t comm,
                                     plexus_request_t* request) {
  if (auto r = check_comm(comm, "plexus_reducescatter"); r != PLEXUS_SUCCESS) return r;
  const size_t n = static_cast<size_t>(comm->state->nranks);
  const size_t block = bytes_of(recvcount, dtype);
  const size_t all = bytes_of(recvcount, dtype, n);
  if (auto r = check_bytes(all, recvcount, "plexus_reducescatter"); r != PLEXUS_SUCCESS) return r;
  const size_t offset = block * static_cast<size_t>(comm->state->rank);
  const bool in_place =
      static_cast<const std::byte*>(recvbuff) == static_cast<const std::byte*>(sendbuff) + offset;
  BufferPlan plan{sendbuff, all, recvbuff, block, in_place};
  return enqueue(Opcode::kReduceScatter, plan, recvcount, dtype, op, 0, comm, request,
                 "plexus_reducescatter");
}

plexus_result_t plexus_alltoall(const void* sendbuff, void* recvbuff, size_t count,
                                plexus_dtype_t dtype, plexus_comm_t comm,
                                plexus_request_t* request) {
  if (auto r = check_comm(comm, "plexus_alltoall"); r != PLEXUS_SUCCESS) return r;
  const size_t all = bytes_of(count, dtype, static_cast<size_t>(comm->state->nranks));
  if (auto r = check_bytes(all, count, "plexus_alltoall"); r != PLEXUS_SUCCESS) return r;
  BufferPlan plan{sendbuff, all, recvbuff, all, sendbuff == recvbuff};
  return enqueue(Opcode::kAllToAll, plan, count, dtype, PLEXUS_SUM, 0, comm, request,
                 "plexus_alltoall");
}

plexus_result_t plexus_send(const void* sendbuff, size_t count, plexus_dtype_t dtype, int peer,
                            plexus_comm_t comm, plexus_request_t* request) {
  return plexus_send_tagged(sendbuff, count, dtype, peer, 0, comm, request);
}

plexus_result_t plexus_recv(void* recvbuff, size_t count, plexus_dtype_t dtype, int peer,
                            plexus_comm_t comm, plexus_request_t* request) {
  if (peer == PLEXUS_ANY_SOURCE) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                "plexus_recv: PLEXUS_ANY_SOURCE needs plexus_recv_tagged, which says the source");
  }
  return plexus_recv_tagged(recvbuff, count, dtype, peer, 0, nullptr, comm, request);
}

plexus_result_t plexus_send_tagged(const void* sendbuff, size_t count, plexus_dtype_t dtype,
                                   int peer, int tag, plexus_comm_t comm,
                                   plexus_request_t* request) {
  const size_t bytes = bytes_of(count, dtype);
  if (auto r = check_bytes(bytes, count, "plexus_send"); r != PLEXUS_SUCCESS) return r;
  BufferPlan plan{sendbuff, bytes, nullptr, 0, false};
  return enqueue(Opcode::kSend, plan, count, dtype, PLEXUS_SUM, peer, comm, request, "plexus_send",
                 {tag, nullptr});
}

plexus_result_t plexus_recv_tagged(void* recvbuff, size_t count, plexus_dtype_t dtype, int peer,
                                   int tag, int* source, plexus_comm_t comm,
                                   plexus_request_t* request) {
  const size_t bytes = bytes_of(count, dtype);
  if (auto r = check_bytes(bytes, count, "plexus_recv"); r != PLEXUS_SUCCESS) return r;
  if (peer == PLEXUS_ANY_SOURCE && source == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                "plexus_recv_tagged: a recv from PLEXUS_ANY_SOURCE needs `source` to say who sent");
  }
  // Stream-ordered without a request, nobody waits for it: `source` would be written after
  // the caller may have let it go.
  if (peer == PLEXUS_ANY_SOURCE && request == nullptr && comm != nullptr && comm->state &&
      comm->state->stream != nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                "plexus_recv_tagged: a stream-ordered recv from PLEXUS_ANY_SOURCE needs a request "
                "(its source is written when it completes)");
  }
  if (source != nullptr) *source = peer;
  BufferPlan plan{nullptr, 0, recvbuff, bytes, false};
  return enqueue(Opcode::kRecv, plan, count, dtype, PLEXUS_SUM, peer, comm, request, "plexus_recv",
                 {tag, peer == PLEXUS_ANY_SOURCE ? source : nullptr});
}

plexus_result_t plexus_group_start(void) {
  ++t_group.depth;
  return PLEXUS_SUCCESS;
}

plexus_result_t plexus_group_end(void) {
  if (t_group.depth == 0) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_group_end without plexus_group_start");
  }
  if (--t_group.depth > 0) return PLEXUS_SUCCESS;
  auto entries = std::move(t_group.entries);
  t_group.entries.clear();
  if (entries.empty()) return PLEXUS_SUCCESS;
  return guarded([&]() -> plexus_result_t {
    ClientContext& ctx = ClientContext::get();
    ctx.submit_batch(entries);
    // Ops submitted without a request handle complete here.
    plexus_result_t first_error = PLEXUS_SUCCESS;
    std::string first_message;
    for (auto& [req, entry] : entries) {
      if (!req->owned_by_group) continue;
      ctx.wait(req);
      plexus_result_t result = finish(req);
      if (result != PLEXUS_SUCCESS && first_error == PLEXUS_SUCCESS) {
        first_error = result;
        first_message = plexus_get_last_error();
      }
    }
    if (first_error != PLEXUS_SUCCESS) return fail(first_error, first_message);
    return PLEXUS_SUCCESS;
  });
}

plexus_result_t plexus_wait(plexus_request_t* request) {
  if (request == nullptr || *request == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_wait: request is NULL");
  }
  plexus_request* req = *request;
  *request = nullptr;
  return guarded([&]() -> plexus_result_t {
    ClientContext::get().wait(req);
    return finish(req);
  });
}

plexus_result_t plexus_test(plexus_request_t* request, int* done) {
  if (request == nullptr || *request == nullptr || done == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_test: NULL argument");
  }
  plexus_request* req = *request;
  return guarded([&]() -> plexus_result_t {
    ClientContext::get().progress();
    *done = req->done.load(std::memory_order_acquire) ? 1 : 0;
    if (*done == 0) return PLEXUS_SUCCESS;
    *request = nullptr;
    return finish(req);
  });
}

}  // extern "C"
