// NCCL's collectives, point-to-point calls and groups, as libplexus ops (nccl_calls.h says
// how they are ordered).
#include <nccl.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "clientlib/nccl/src/nccl_calls.h"
#include "clientlib/nccl/src/nccl_errors.h"
#include "clientlib/nccl/src/nccl_types.h"
#include "plexus/plexus.h"

namespace plexus::nccl {
namespace {

// What each entry point checks before it builds its call.
struct Prepared {
  std::shared_ptr<CommCore> core;
  plexus_dtype_t dtype = PLEXUS_FLOAT32;
  ncclResult_t result = ncclSuccess;
};

Prepared prepare(ncclComm_t comm, ncclDataType_t type, const char* call) {
  Prepared p;
  p.core = usable(comm, call, &p.result);
  if (p.core == nullptr) return p;
  std::optional<plexus_dtype_t> dtype = to_plexus(type);
  if (!dtype) {
    p.core = nullptr;
    p.result = fail(
        ncclInvalidArgument,
        std::string(call) + ": datatype " + std::to_string(static_cast<int>(type)) +
            (type == ncclFloat8e4m3 || type == ncclFloat8e5m2 ? " (fp8) is not supported by Plexus"
                                                              : " is not an NCCL datatype"));
    return p;
  }
  p.dtype = *dtype;
  return p;
}

// The reduction a call asks for in Plexus's terms. A pre-multiplied sum (host buffers
// only) becomes a sum over a copy of the input in the pool: *scratch owns the copy, and
// *prepare scales the input into it when the op is submitted (after any stream wait, so
// that it reads what the stream's earlier work wrote).
ncclResult_t resolve_op(CommCore& core, ncclRedOp_t op, plexus_dtype_t dtype, bool device,
                        size_t input_count, const void** input, void** scratch,
                        std::function<void()>* prepare, plexus_redop_t* out, const char* call) {
  if (std::optional<plexus_redop_t> builtin = builtin_op(op)) {
    *out = *builtin;
    return ncclSuccess;
  }
  PreMulSum premul;
  {
    std::lock_guard lock(core.mutex);
    auto it = core.premul.find(static_cast<int>(op));
    if (it == core.premul.end()) {
      return fail(ncclInvalidArgument, std::string(call) + ": op " + std::to_string(op) +
                                           " is neither a built-in operator nor one made by "
                                           "ncclRedOpCreatePreMulSum on this communicator");
    }
    premul = it->second;
  }
  if (to_plexus(premul.type) != dtype) {
    return fail(ncclInvalidArgument, std::string(call) +
                                         ": the pre-multiplied sum was made for datatype " +
                                         std::to_string(premul.type) + ", not this call's");
  }
  if (device || (premul.scalar_at != nullptr && on_device(premul.scalar_at))) {
    return fail(ncclInvalidUsage, std::string(call) +
                                      ": pre-multiplied sums on GPU buffers or with a scalar in "
                                      "GPU memory are not supported by Plexus (it runs no kernel "
                                      "in this process); scale the input first and use ncclSum");
  }
  const size_t bytes = input_count * plexus_dtype_size(dtype);
  void* copy = nullptr;
  if (plexus_result_t r = plexus_alloc(&copy, bytes == 0 ? 1 : bytes); r != PLEXUS_SUCCESS) {
    return fail_plexus(r, call);
  }
  *prepare = [premul, source = *input, copy, input_count, dtype] {
    const void* scalar = premul.scalar_at != nullptr ? premul.scalar_at : premul.scalar;
    if (input_count > 0) scale(source, copy, input_count, dtype, scalar);
  };
  *input = copy;
  *scratch = copy;
  *out = PLEXUS_SUM;
  return ncclSuccess;
}

// A call on `p`'s communicator, device-ordered when either buffer is on a GPU; its issue
// is the caller's.
Call begin_call(const Prepared& p, const char* name, cudaStream_t stream, const void* sendbuff,
                const void* recvbuff) {
  Call call;
  call.core = p.core;
  call.name = name;
  call.stream = stream;
  call.device = on_device(sendbuff) || on_device(recvbuff);
  return call;
}

ncclResult_t reduction(const char* name, const void* sendbuff, void* recvbuff, size_t in_count,
                       ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                       std::function<plexus_result_t(const void*, plexus_redop_t, plexus_dtype_t,
                                                     plexus_comm_t, plexus_request_t*)>
                           submit) {
  return guarded(name, [&]() -> ncclResult_t {
    Prepared p = prepare(comm, type, name);
    if (p.core == nullptr) return p.result;
    Call call = begin_call(p, name, stream, sendbuff, recvbuff);
    const void* input = sendbuff;
    plexus_redop_t redop = PLEXUS_SUM;
    std::function<void()> prepare;
    if (ncclResult_t r = resolve_op(*p.core, op, p.dtype, call.device, in_count, &input,
                                    &call.scratch, &prepare, &redop, name);
        r != ncclSuccess) {
      return r;
    }
    call.issue = [input, redop, dtype = p.dtype, prepare = std::move(prepare),
                  submit = std::move(submit)](plexus_comm_t c, plexus_request_t* request) {
      if (prepare) prepare();
      return submit(input, redop, dtype, c, request);
    };
    return enqueue(std::move(call));
  });
}

ncclResult_t movement(
    const char* name, const void* sendbuff, const void* recvbuff, ncclDataType_t type,
    ncclComm_t comm, cudaStream_t stream,
    std::function<plexus_result_t(plexus_dtype_t, plexus_comm_t, plexus_request_t*)> submit) {
  return guarded(name, [&]() -> ncclResult_t {
    Prepared p = prepare(comm, type, name);
    if (p.core == nullptr) return p.result;
    Call call = begin_call(p, name, stream, sendbuff, recvbuff);
    call.issue = [dtype = p.dtype, submit = std::move(submit)](plexus_comm_t c,
                                                               plexus_request_t* request) {
      return submit(dtype, c, request);
    };
    return enqueue(std::move(call));
  });
}

}  // namespace
}  // namespace plexus::nccl

using namespace plexus::nccl;  // NOLINT: the C entry points below

NCCL_API ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                    cudaStream_t stream) {
  return reduction(
      "ncclAllReduce", sendbuff, recvbuff, count, datatype, op, comm, stream,
      [=](const void* in, plexus_redop_t o, plexus_dtype_t t, plexus_comm_t c,
          plexus_request_t* req) { return plexus_allreduce(in, recvbuff, count, t, o, c, req); });
}

NCCL_API ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                                 cudaStream_t stream) {
  return reduction("ncclReduce", sendbuff, recvbuff, count, datatype, op, comm, stream,
                   [=](const void* in, plexus_redop_t o, plexus_dtype_t t, plexus_comm_t c,
                       plexus_request_t* req) {
                     return plexus_reduce(in, recvbuff, count, t, o, root, c, req);
                   });
}

NCCL_API ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                        cudaStream_t stream) {
  int nranks = 0;
  if (comm != nullptr && comm->core != nullptr) nranks = comm->core->nranks;
  return reduction("ncclReduceScatter", sendbuff, recvbuff, recvcount * static_cast<size_t>(nranks),
                   datatype, op, comm, stream,
                   [=](const void* in, plexus_redop_t o, plexus_dtype_t t, plexus_comm_t c,
                       plexus_request_t* req) {
                     return plexus_reducescatter(in, recvbuff, recvcount, t, o, c, req);
                   });
}

NCCL_API ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, int root, ncclComm_t comm,
                                    cudaStream_t stream) {
  return movement("ncclBroadcast", sendbuff, recvbuff, datatype, comm, stream,
                  [=](plexus_dtype_t t, plexus_comm_t c, plexus_request_t* req) {
                    return plexus_broadcast(sendbuff, recvbuff, count, t, root, c, req);
                  });
}

NCCL_API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                ncclComm_t comm, cudaStream_t stream) {
  return movement("ncclBcast", buff, buff, datatype, comm, stream,
                  [=](plexus_dtype_t t, plexus_comm_t c, plexus_request_t* req) {
                    return plexus_broadcast(buff, buff, count, t, root, c, req);
                  });
}

NCCL_API ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return movement("ncclAllGather", sendbuff, recvbuff, datatype, comm, stream,
                  [=](plexus_dtype_t t, plexus_comm_t c, plexus_request_t* req) {
                    return plexus_allgather(sendbuff, recvbuff, sendcount, t, c, req);
                  });
}

NCCL_API ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return movement("ncclAlltoAll", sendbuff, recvbuff, datatype, comm, stream,
                  [=](plexus_dtype_t t, plexus_comm_t c, plexus_request_t* req) {
                    return plexus_alltoall(sendbuff, recvbuff, count, t, c, req);
                  });
}

NCCL_API ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                               int peer, ncclComm_t comm, cudaStream_t stream) {
  return movement("ncclSend", sendbuff, nullptr, datatype, comm, stream,
                  [=](plexus_dtype_t t, plexus_comm_t c, plexus_request_t* req) {
                    return plexus_send(sendbuff, count, t, peer, c, req);
                  });
}

NCCL_API ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                               ncclComm_t comm, cudaStream_t stream) {
  return movement("ncclRecv", nullptr, recvbuff, datatype, comm, stream,
                  [=](plexus_dtype_t t, plexus_comm_t c, plexus_request_t* req) {
                    return plexus_recv(recvbuff, count, t, peer, c, req);
                  });
}

// Gather and scatter: a group of sends and receives (root to or from every rank, itself
// included), so they order and fail as point-to-point calls do. `gather`: every rank sends
// its block to the root, which receives block r from rank r; else the root sends block r to
// rank r, which receives it.
namespace {
ncclResult_t rooted(const char* name, bool gather, const void* sendbuff, void* recvbuff,
                    size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                    cudaStream_t stream) {
  Prepared p = prepare(comm, datatype, name);
  if (p.core == nullptr) return p.result;
  if (root < 0 || root >= p.core->nranks) {
    return fail(ncclInvalidArgument, std::string(name) + ": root " + std::to_string(root) +
                                         " is not a rank of " + std::to_string(p.core->nranks));
  }
  const size_t block = count * plexus_dtype_size(p.dtype);
  const bool is_root = p.core->rank == root;
  group_start();
  ncclResult_t first = ncclSuccess;
  if (gather) first = ncclSend(sendbuff, count, datatype, root, comm, stream);
  for (int r = 0; first == ncclSuccess && is_root && r < p.core->nranks; ++r) {
    const size_t offset = block * static_cast<size_t>(r);
    first = gather
                ? ncclRecv(static_cast<char*>(recvbuff) + offset, count, datatype, r, comm, stream)
                : ncclSend(static_cast<const char*>(sendbuff) + offset, count, datatype, r, comm,
                           stream);
  }
  if (!gather && first == ncclSuccess) {
    first = ncclRecv(recvbuff, count, datatype, root, comm, stream);
  }
  const ncclResult_t ended = group_end();
  return first != ncclSuccess ? first : ended;
}
}  // namespace

NCCL_API ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream) {
  return rooted("ncclGather", true, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

NCCL_API ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream) {
  return rooted("ncclScatter", false, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

NCCL_API ncclResult_t ncclGroupStart(void) { return group_start(); }

NCCL_API ncclResult_t ncclGroupEnd(void) { return group_end(); }

NCCL_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* /*simInfo*/) {
  return fail(ncclInvalidUsage,
              "ncclGroupSimulateEnd is not supported by Plexus: its cost model is the daemon's "
              "(plexusctl shows what each op did)");
}

NCCL_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar,
                                               ncclDataType_t datatype,
                                               ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* name = "ncclRedOpCreatePreMulSum";
  if (op == nullptr || scalar == nullptr) {
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op or scalar is NULL");
  }
  ncclResult_t result = ncclSuccess;
  std::shared_ptr<CommCore> core = usable(comm, name, &result);
  if (core == nullptr) return result;
  std::optional<plexus_dtype_t> dtype = to_plexus(datatype);
  if (!dtype) {
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: datatype " +
                                         std::to_string(datatype) + " is not supported");
  }
  PreMulSum premul;
  premul.type = datatype;
  if (residence == ncclScalarHostImmediate) {
    std::memcpy(premul.scalar, scalar, plexus_dtype_size(*dtype));
  } else if (residence == ncclScalarDevice) {
    premul.scalar_at = scalar;
  } else {
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: residence " +
                                         std::to_string(residence) + " is not an NCCL value");
  }
  std::lock_guard lock(core->mutex);
  if (core->next_op >= ncclMaxRedOp) {
    return fail(ncclInvalidUsage, "ncclRedOpCreatePreMulSum: no operator numbers left");
  }
  const int id = core->next_op++;
  core->premul[id] = premul;
  *op = static_cast<ncclRedOp_t>(id);
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  if (comm == nullptr || comm->core == nullptr) {
    return fail(ncclInvalidArgument, "ncclRedOpDestroy: comm is NULL");
  }
  std::lock_guard lock(comm->core->mutex);
  if (comm->core->premul.erase(static_cast<int>(op)) == 0) {
    return fail(ncclInvalidArgument, "ncclRedOpDestroy: op " + std::to_string(op) +
                                         " was not made by ncclRedOpCreatePreMulSum on this "
                                         "communicator (or was destroyed already)");
  }
  return ncclSuccess;
}
