// NCCL's communicator calls: creation (blocking and not), splitting, queries, errors,
// finalize, destroy and abort.
#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "clientlib/nccl/src/nccl_calls.h"
#include "clientlib/nccl/src/nccl_comm.h"
#include "clientlib/nccl/src/nccl_cuda.h"
#include "clientlib/nccl/src/nccl_errors.h"
#include "plexus/plexus.h"

namespace plexus::nccl {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;

// What Plexus takes from a ncclConfig_t: only fields inside the caller's `size`, so a
// program built against an older (shorter) ncclConfig_t is read correctly.
struct Settings {
  bool blocking = true;
  std::string name;
};

template <typename Field>
bool has_field(const ncclConfig_t* config, const Field* field) {
  const auto end = reinterpret_cast<const char*>(field) + sizeof(Field);
  return end <= reinterpret_cast<const char*>(config) + config->size;
}

ncclResult_t read_config(const ncclConfig_t* config, const char* call, Settings* out) {
  if (config == nullptr) return ncclSuccess;
  if (config->magic != kConfigMagic || config->size < offsetof(ncclConfig_t, blocking)) {
    return fail(ncclInvalidArgument,
                std::string(call) + ": config was not set up with NCCL_CONFIG_INITIALIZER (magic " +
                    std::to_string(config->magic) + ", size " + std::to_string(config->size) + ")");
  }
  if (has_field(config, &config->blocking) && config->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1) {
      return fail(ncclInvalidArgument, std::string(call) + ": config.blocking is " +
                                           std::to_string(config->blocking) + ", not 0 or 1");
    }
    out->blocking = config->blocking == 1;
  }
  if (has_field(config, &config->commName) && config->commName != nullptr) {
    out->name = config->commName;
  }
  return ncclSuccess;
}

std::shared_ptr<CommCore> make_core(int nranks, int rank, const Settings& settings) {
  auto core = std::make_shared<CommCore>();
  core->nranks = nranks;
  core->rank = rank;
  core->blocking = settings.blocking;
  core->name = settings.name;
  int device = 0;
  if (current_device(&device)) core->device = device;
  return core;
}

plexus_unique_id_t as_plexus(const ncclUniqueId& id) {
  static_assert(sizeof(plexus_unique_id_t) == sizeof(ncclUniqueId));
  plexus_unique_id_t out;
  std::memcpy(&out, &id, sizeof(out));
  return out;
}

ncclResult_t init_rank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                       const ncclConfig_t* config, const char* call) {
  if (comm == nullptr) return fail(ncclInvalidArgument, std::string(call) + ": comm is NULL");
  *comm = nullptr;
  Settings settings;
  if (ncclResult_t r = read_config(config, call, &settings); r != ncclSuccess) return r;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument, std::string(call) + ": rank " + std::to_string(rank) + " of " +
                                         std::to_string(nranks) + " is not a valid position");
  }
  std::shared_ptr<CommCore> core = make_core(nranks, rank, settings);
  const bool grouped = in_group();
  if (settings.blocking && !grouped) {
    plexus_comm_t made = nullptr;
    if (plexus_result_t r = plexus_comm_init_rank(&made, nranks, as_plexus(id), rank);
        r != PLEXUS_SUCCESS) {
      return fail_plexus(r, call);
    }
    core->plexus = made;
    *comm = new ncclComm{std::move(core)};
    return ncclSuccess;
  }
  // Non-blocking, or inside a group: the handle now, the rendezvous on a thread;
  // ncclCommGetAsyncError says ncclInProgress until it is done, and ncclGroupEnd waits for
  // it (so one thread can create the communicators of several ranks in one group).
  auto task = std::make_shared<InitTask>();
  core->init = task;
  std::thread([task, nranks, id, rank, name = std::string(call)] {
    plexus_comm_t made = nullptr;
    const plexus_result_t r = plexus_comm_init_rank(&made, nranks, as_plexus(id), rank);
    std::lock_guard lock(task->mutex);
    task->done = true;
    task->result = to_nccl(r);
    if (r != PLEXUS_SUCCESS) task->message = name + ": " + plexus_get_last_error();
    if (task->abandoned) {
      if (made != nullptr) plexus_comm_abort(made);
    } else {
      task->comm = made;
    }
    task->done_cv.notify_all();
  }).detach();
  *comm = new ncclComm{std::move(core)};
  // A blocking communicator made in a group is ready at ncclGroupEnd; a non-blocking one is
  // followed with ncclCommGetAsyncError as NCCL's is.
  if (grouped && settings.blocking) group_add_init(std::move(task));
  return grouped && settings.blocking ? ncclSuccess : ncclInProgress;
}

// The communicator's state for ncclCommGetAsyncError: an initialisation or host-ordered
// call still running, the sticky error, or success.
ncclResult_t async_state(CommCore& core) {
  std::shared_ptr<InitTask> task;
  {
    std::lock_guard lock(core.mutex);
    task = core.plexus == nullptr ? core.init : nullptr;
  }
  if (task != nullptr) {
    std::lock_guard task_lock(task->mutex);
    if (!task->done) return ncclInProgress;
    if (task->result != ncclSuccess) return fail(task->result, task->message);
  }
  ncclResult_t r = ncclSuccess;
  if (core.ready(&r, "ncclCommGetAsyncError") == nullptr) return r;
  std::lock_guard lock(core.mutex);
  const bool in_flight = core.reap_locked();
  if (core.error != ncclSuccess) return fail(core.error, core.error_message);
  return in_flight ? ncclInProgress : ncclSuccess;
}

// ncclCommDestroy and ncclCommAbort: leave, free the handle.
ncclResult_t leave(ncclComm_t comm, bool abort) {
  const char* call = abort ? "ncclCommAbort" : "ncclCommDestroy";
  if (comm == nullptr) return ncclSuccess;  // NCCL accepts NULL here
  std::shared_ptr<CommCore> core = std::move(comm->core);
  delete comm;
  if (core == nullptr) return ncclSuccess;
  plexus_comm_t plexus = nullptr;
  {
    std::lock_guard lock(core->mutex);
    plexus = core->plexus;
  }
  if (plexus == nullptr && core->init != nullptr) {
    std::lock_guard task_lock(core->init->mutex);
    if (!core->init->done && abort) {
      core->init->abandoned = true;  // the init thread aborts what it makes
      return ncclSuccess;
    }
  }
  ncclResult_t result = ncclSuccess;
  if (plexus == nullptr) plexus = core->ready(&result, call);
  if (plexus == nullptr) return abort ? ncclSuccess : result;
  // A call on another thread may be between ready() and submitting: wait for it, then
  // make ready() fail for every later one.
  std::unique_lock use(core->use_mutex);
  {
    std::lock_guard lock(core->mutex);
    core->plexus = nullptr;
    core->init = nullptr;
  }
  if (abort) {
    const plexus_result_t r = plexus_comm_abort(plexus);
    core->drain(call);  // every request completes (aborted) once the daemon replied
    return r == PLEXUS_SUCCESS ? ncclSuccess : fail_plexus(r, call);
  }
  use.unlock();  // destroy waits for this rank's requests: nothing may hold the lock then
  const ncclResult_t drained = core->drain(call);
  if (plexus_result_t r = plexus_comm_destroy(plexus); r != PLEXUS_SUCCESS) {
    return fail_plexus(r, call);
  }
  (void)drained;  // destroy frees resources whatever earlier calls did, as NCCL's does
  return ncclSuccess;
}

// The queries: one field of the communicator, or ncclInvalidArgument naming the call.
ncclResult_t read_field(const ncclComm_t comm, int* out, int CommCore::*field, const char* call) {
  if (comm == nullptr || comm->core == nullptr || out == nullptr) {
    return fail(ncclInvalidArgument, std::string(call) + ": comm or its output is NULL");
  }
  *out = (*comm->core).*field;
  return ncclSuccess;
}

// ncclCommSplit over the parent, host-ordered: every rank's (color, key) gathered, each
// color's first rank (by key, then parent rank) makes the new unique id, and the ids
// gathered so that each rank joins its color's.
ncclResult_t split(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                   const ncclConfig_t* config) {
  const char* call = "ncclCommSplit";
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
  *newcomm = nullptr;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    return fail(ncclInvalidArgument, "ncclCommSplit: color " + std::to_string(color) +
                                         " is negative and not NCCL_SPLIT_NOCOLOR");
  }
  ncclResult_t result = ncclSuccess;
  std::shared_ptr<CommCore> core = usable(comm, call, &result);
  if (core == nullptr) return result;
  if (core->ready(&result, call) == nullptr) return result;
  if (ncclResult_t r = core->drain(call); r != ncclSuccess) return r;
  // Each gather over the parent, host-ordered: submitted under the use lock, waited for
  // outside it (so that ncclCommAbort from another thread can break a split that hangs).
  auto gather = [&](const void* send, void* recv, size_t count, plexus_dtype_t dtype) {
    plexus_request_t request = nullptr;
    {
      std::shared_lock use(core->use_mutex);
      ncclResult_t ignored = ncclSuccess;
      plexus_comm_t parent = core->ready(&ignored, call);
      if (parent == nullptr) return PLEXUS_ERR_COMM_ABORTED;
      plexus_result_t r = plexus_comm_set_stream(parent, nullptr);
      if (r == PLEXUS_SUCCESS) r = plexus_allgather(send, recv, count, dtype, parent, &request);
      if (r != PLEXUS_SUCCESS) return r;
    }
    return plexus_wait(&request);
  };
  Settings settings;
  settings.blocking = core->blocking;  // inherited unless the config says otherwise
  if (ncclResult_t r = read_config(config, call, &settings); r != ncclSuccess) return r;

  const int n = core->nranks;
  struct Entry {
    int32_t color;
    int32_t key;
  };
  void* pairs_memory = nullptr;
  void* ids_memory = nullptr;
  auto free_all = [&] {
    if (pairs_memory != nullptr) plexus_free(pairs_memory);
    if (ids_memory != nullptr) plexus_free(ids_memory);
  };
  plexus_result_t r = plexus_alloc(&pairs_memory, sizeof(Entry) * (static_cast<size_t>(n) + 1));
  if (r == PLEXUS_SUCCESS) r = plexus_alloc(&ids_memory, sizeof(ncclUniqueId) * (n + 1));
  if (r != PLEXUS_SUCCESS) {
    free_all();
    return fail_plexus(r, call);
  }
  auto* pairs = static_cast<Entry*>(pairs_memory);
  auto* ids = static_cast<ncclUniqueId*>(ids_memory);
  pairs[n] = {color, key};
  r = gather(&pairs[n], pairs, 2, PLEXUS_INT32);
  // Members of my color in their new order.
  std::vector<int> members;
  if (r == PLEXUS_SUCCESS && color != NCCL_SPLIT_NOCOLOR) {
    for (int i = 0; i < n; ++i) {
      if (pairs[i].color == color) members.push_back(i);
    }
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return pairs[a].key < pairs[b].key; });
  }
  std::memset(&ids[n], 0, sizeof(ncclUniqueId));
  if (r == PLEXUS_SUCCESS && !members.empty() && members.front() == core->rank) {
    plexus_unique_id_t made;
    r = plexus_get_unique_id(&made);
    std::memcpy(&ids[n], &made, sizeof(made));
  }
  if (r == PLEXUS_SUCCESS) {
    r = gather(&ids[n], ids, sizeof(ncclUniqueId), PLEXUS_UINT8);
  }
  if (r != PLEXUS_SUCCESS) {
    free_all();
    return fail_plexus(r, call);
  }
  if (color == NCCL_SPLIT_NOCOLOR) {
    free_all();
    return ncclSuccess;
  }
  const ncclUniqueId id = ids[members.front()];
  const int new_rank =
      static_cast<int>(std::find(members.begin(), members.end(), core->rank) - members.begin());
  free_all();
  ncclConfig_t effective = NCCL_CONFIG_INITIALIZER;
  effective.blocking = settings.blocking ? 1 : 0;
  effective.commName = settings.name.empty() ? nullptr : settings.name.c_str();
  const ncclResult_t made =
      init_rank(newcomm, static_cast<int>(members.size()), id, new_rank, &effective, call);
  if (*newcomm != nullptr) (*newcomm)->core->device = core->device;
  return made;
}

// The communicator of a revoke or a shrink: one that failed is what they are for, so its
// sticky error does not refuse them (usable() would).
std::shared_ptr<CommCore> failed_or_not(ncclComm_t comm, const char* call, ncclResult_t* result) {
  if (comm == nullptr || comm->core == nullptr) {
    *result = fail(ncclInvalidArgument, std::string(call) + ": comm is NULL");
    return nullptr;
  }
  return comm->core;
}

// Runs `use` on `comm`'s libplexus communicator (one that failed too) under the use lock, so
// that an abort from another thread waits for it.
template <typename Use>
ncclResult_t with_plexus(ncclComm_t comm, const char* call, Use&& use) {
  ncclResult_t result = ncclSuccess;
  std::shared_ptr<CommCore> core = failed_or_not(comm, call, &result);
  if (core == nullptr) return result;
  std::shared_lock lock(core->use_mutex);
  plexus_comm_t plexus = core->ready(&result, call);
  if (plexus == nullptr) return result;
  const plexus_result_t r = use(plexus);
  return r == PLEXUS_SUCCESS ? ncclSuccess : fail_plexus(r, call);
}

// A communicator made from `comm` by `make` (a shrink or a growth on the daemon side), as a
// new ncclComm with the parent's device and `config`'s settings (the parent's otherwise).
// Blocking whatever the config says: it is ready when this returns.
template <typename Make>
ncclResult_t successor(ncclComm_t comm, const ncclConfig_t* config, ncclComm_t* newcomm,
                       const char* call, Make&& make) {
  ncclResult_t result = ncclSuccess;
  std::shared_ptr<CommCore> core = failed_or_not(comm, call, &result);
  if (core == nullptr) return result;
  Settings settings;
  settings.blocking = core->blocking;
  if (ncclResult_t r = read_config(config, call, &settings); r != ncclSuccess) return r;
  plexus_comm_t made = nullptr;
  if (ncclResult_t r =
          with_plexus(comm, call, [&](plexus_comm_t parent) { return make(parent, &made); });
      r != ncclSuccess) {
    return r;
  }
  int nranks = 0;
  int rank = 0;
  plexus_comm_count(made, &nranks);
  plexus_comm_user_rank(made, &rank);
  std::shared_ptr<CommCore> next = make_core(nranks, rank, settings);
  next->plexus = made;
  next->device = core->device;
  *newcomm = new ncclComm{std::move(next)};
  return ncclSuccess;
}

// ncclCommShrink: plexus_comm_shrink, whose daemons agree on the members (no unique id and
// no gather over the parent, which may have lost a rank).
ncclResult_t shrink(ncclComm_t comm, const int* exclude, int count, ncclComm_t* newcomm,
                    const ncclConfig_t* config, int flags) {
  const char* call = "ncclCommShrink";
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommShrink: newcomm is NULL");
  *newcomm = nullptr;
  if (flags != NCCL_SHRINK_DEFAULT && flags != NCCL_SHRINK_ABORT) {
    return fail(ncclInvalidArgument, "ncclCommShrink: shrinkFlags " + std::to_string(flags) +
                                         " is not NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT");
  }
  // Default: plexus_comm_shrink waits for this rank's operations (they may fail: the parent
  // lost a rank), at most PLEXUS_INIT_TIMEOUT_MS; the parent's destroy reaps them.
  return successor(comm, config, newcomm, call, [&](plexus_comm_t parent, plexus_comm_t* made) {
    return plexus_comm_shrink(
        parent, exclude, count,
        flags == NCCL_SHRINK_ABORT ? PLEXUS_SHRINK_ABORT : PLEXUS_SHRINK_DEFAULT, made);
  });
}

// ncclCommGrow for a member: plexus_comm_grow, which keeps its rank. A new rank (comm NULL)
// joins with the id as ncclCommInitRankConfig does.
ncclResult_t grow(ncclComm_t comm, int nranks, const ncclUniqueId* id, int rank,
                  ncclComm_t* newcomm, const ncclConfig_t* config) {
  const char* call = "ncclCommGrow";
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommGrow: newcomm is NULL");
  *newcomm = nullptr;
  if (comm == nullptr) {
    if (id == nullptr) {
      return fail(ncclInvalidArgument, "ncclCommGrow: a new rank (comm NULL) needs the uniqueId");
    }
    return init_rank(newcomm, nranks, *id, rank, config, call);
  }
  return successor(comm, config, newcomm, call, [&](plexus_comm_t parent, plexus_comm_t* made) {
    return plexus_comm_grow(parent, nranks, made);
  });
}

}  // namespace
}  // namespace plexus::nccl

using namespace plexus::nccl;  // NOLINT: the C entry points below

NCCL_API ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  plexus_unique_id_t id;
  if (plexus_result_t r = plexus_get_unique_id(&id); r != PLEXUS_SUCCESS) {
    return fail_plexus(r, "ncclGetUniqueId");
  }
  std::memcpy(uniqueId, &id, sizeof(id));
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                             int rank, ncclConfig_t* config) {
  return guarded("ncclCommInitRankConfig", [&] {
    return init_rank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
  });
}

NCCL_API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                       int rank) {
  return guarded("ncclCommInitRank", [&] {
    return init_rank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank");
  });
}

NCCL_API ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                               ncclUniqueId* commIds, ncclConfig_t* config) {
  // Every rank holds all nId ids; Plexus's rendezvous needs one, so all ranks use the first.
  if (nId < 1 || commIds == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommInitRankScalable: nId is " + std::to_string(nId) +
                                         " or commIds is NULL; at least one id is needed");
  }
  return guarded("ncclCommInitRankScalable", [&] {
    return init_rank(newcomm, nranks, commIds[0], myrank, config, "ncclCommInitRankScalable");
  });
}

NCCL_API ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1) {
    return fail(ncclInvalidArgument, "ncclCommInitAll: comms is NULL or ndev " +
                                         std::to_string(ndev) + " is not positive");
  }
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) return r;
  // Each rank's initialisation waits for all the others: as one group, whose end waits for
  // them all (each runs on its own thread meanwhile).
  for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
  group_start();
  ncclResult_t made = guarded("ncclCommInitAll", [&]() -> ncclResult_t {
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < ndev && r == ncclSuccess; ++i) {
      r = init_rank(&comms[i], ndev, id, i, nullptr, "ncclCommInitAll");
    }
    return r;
  });
  const ncclResult_t ended = group_end();  // always: the thread's group must not stay open
  const ncclResult_t first = made != ncclSuccess ? made : ended;
  if (first != ncclSuccess) {
    const std::string why = last_error();
    for (int j = 0; j < ndev; ++j) {
      if (comms[j] != nullptr) ncclCommAbort(comms[j]);
      comms[j] = nullptr;
    }
    return fail(first, why);
  }
  for (int i = 0; i < ndev; ++i) comms[i]->core->device = devlist != nullptr ? devlist[i] : i;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                    ncclConfig_t* config) {
  return guarded("ncclCommSplit", [&] { return split(comm, color, key, newcomm, config); });
}

NCCL_API ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                     ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return guarded("ncclCommShrink", [&] {
    return shrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  });
}

NCCL_API ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  const char* call = "ncclCommGetUniqueId";
  if (uniqueId == nullptr)
    return fail(ncclInvalidArgument, "ncclCommGetUniqueId: uniqueId is NULL");
  return guarded(call, [&] {
    return with_plexus(comm, call, [&](plexus_comm_t plexus) {
      plexus_unique_id_t id;
      const plexus_result_t r = plexus_comm_grow_id(plexus, &id);
      if (r == PLEXUS_SUCCESS) std::memcpy(uniqueId, &id, sizeof(id));
      return r;
    });
  });
}

NCCL_API ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId,
                                   int rank, ncclComm_t* newcomm, ncclConfig_t* config) {
  return guarded("ncclCommGrow",
                 [&] { return grow(comm, nRanks, uniqueId, rank, newcomm, config); });
}

NCCL_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  const char* call = "ncclCommRevoke";
  if (revokeFlags != NCCL_REVOKE_DEFAULT) {
    return fail(ncclInvalidArgument, "ncclCommRevoke: revokeFlags " + std::to_string(revokeFlags) +
                                         " is not NCCL_REVOKE_DEFAULT");
  }
  return guarded(call, [&] {
    return with_plexus(comm, call, [](plexus_comm_t plexus) {
      return plexus_comm_revoke(plexus, "ncclCommRevoke");
    });
  });
}

// NCCL 2.29's memory offload: this rank's operations finish first, then plexusd releases the
// communicator's memory once every rank of it on the node has suspended it.
NCCL_API ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  const char* call = "ncclCommSuspend";
  if (flags != NCCL_SUSPEND_MEM) {
    return fail(ncclInvalidArgument,
                "ncclCommSuspend: flags " + std::to_string(flags) + " is not NCCL_SUSPEND_MEM");
  }
  return guarded(call, [&] {
    ncclResult_t result = ncclSuccess;
    std::shared_ptr<CommCore> core = usable(comm, call, &result);
    if (core == nullptr) return result;
    if (ncclResult_t r = core->drain(call); r != ncclSuccess) return r;
    return with_plexus(comm, call, [](plexus_comm_t plexus) {
      return plexus_comm_suspend(plexus, PLEXUS_SUSPEND_MEM, nullptr);
    });
  });
}

NCCL_API ncclResult_t ncclCommResume(ncclComm_t comm) {
  const char* call = "ncclCommResume";
  return guarded(call, [&] {
    return with_plexus(comm, call, [](plexus_comm_t plexus) { return plexus_comm_resume(plexus); });
  });
}

NCCL_API ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  ncclResult_t result = ncclSuccess;
  std::shared_ptr<CommCore> core = usable(comm, "ncclCommFinalize", &result);
  if (core == nullptr) return result;
  if (core->ready(&result, "ncclCommFinalize") == nullptr) return result;
  return core->drain("ncclCommFinalize");
}

NCCL_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return guarded("ncclCommDestroy", [&] { return leave(comm, false); });
}

NCCL_API ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return guarded("ncclCommAbort", [&] { return leave(comm, true); });
}

NCCL_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr || comm->core == nullptr || asyncError == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm or asyncError is NULL");
  }
  *asyncError = async_state(*comm->core);
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return read_field(comm, count, &CommCore::nranks, "ncclCommCount");
}

NCCL_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return read_field(comm, device, &CommCore::device, "ncclCommCuDevice");
}

NCCL_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return read_field(comm, rank, &CommCore::rank, "ncclCommUserRank");
}

NCCL_API const char* ncclGetLastError(ncclComm_t /*comm*/) { return last_error(); }
