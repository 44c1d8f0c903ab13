// The C API's recovery of communicators: revoking one on every rank, shrinking one to a
// successor without a unique id (the daemons agree on its members), and growing one again.
#include <capnp/serialize.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "clientlib/src/api_common.h"
#include "common/frame_codec.h"
#include "shm/control.capnp.h"

namespace plexus::client {
namespace {

namespace control = shm::control;

// Tells the daemon that this rank parks the communicator (or takes it up again).
plexus_result_t suspend_or_resume(CommState& state, bool suspend, uint64_t* released) {
  const char* call = suspend ? "plexus_comm_suspend" : "plexus_comm_resume";
  return guarded([&]() -> plexus_result_t {
    capnp::MallocMessageBuilder message;
    auto request = message.initRoot<control::ClientMessage>().initCommSuspend();
    request.setComm(state.handle);
    request.setSuspend(suspend);
    Reply reply = ClientContext::get().control().call(message);
    capnp::FlatArrayMessageReader reader(reply.words, plexus::common::untrusted_reader_options());
    auto root = reader.getRoot<control::DaemonMessage>();
    if (!root.isCommSuspendReply()) return refused(call, root);
    state.suspended.store(suspend);
    if (released != nullptr) *released = root.getCommSuspendReply();
    return PLEXUS_SUCCESS;
  });
}

}  // namespace
}  // namespace plexus::client

using namespace plexus::client;

extern "C" {

plexus_result_t plexus_comm_revoke(plexus_comm_t comm, const char* reason) {
  if (comm == nullptr) return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_revoke: comm is NULL");
  return guarded([&]() -> plexus_result_t {
    ClientContext& ctx = ClientContext::get();
    capnp::MallocMessageBuilder message;
    auto revoke = message.initRoot<control::ClientMessage>().initCommRevoke();
    revoke.setComm(comm->state->handle);
    std::string words = reason != nullptr ? reason : "";
    if (words.size() > 256) words.resize(256);
    revoke.setReason(words);
    Reply reply = ctx.control().call(message);
    ctx.progress();  // the daemon posted the failed ops' completions before replying
    capnp::FlatArrayMessageReader reader(reply.words, plexus::common::untrusted_reader_options());
    auto root = reader.getRoot<control::DaemonMessage>();
    if (!root.isCommRevokeReply()) return refused("plexus_comm_revoke", root);
    return PLEXUS_SUCCESS;
  });
}

plexus_result_t plexus_comm_shrink(plexus_comm_t comm, const int* exclude, int exclude_count,
                                   int flags, plexus_comm_t* newcomm) {
  if (newcomm == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_shrink: newcomm is NULL");
  }
  *newcomm = nullptr;
  if (comm == nullptr) return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_shrink: comm is NULL");
  if ((flags & ~PLEXUS_SHRINK_ABORT) != 0) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_shrink: flags " + std::to_string(flags) +
                                                 " are not PLEXUS_SHRINK_DEFAULT or _ABORT");
  }
  const CommState& parent = *comm->state;
  if (exclude_count < 0 || exclude_count >= parent.nranks ||
      (exclude_count > 0 && exclude == nullptr)) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                "plexus_comm_shrink: " + std::to_string(exclude_count) + " ranks to exclude of " +
                    std::to_string(parent.nranks) +
                    " (need 0 <= count < nranks, and a list when count > 0)");
  }
  // Ascending: the daemon checks the rest (in range, distinct, not this rank) and says what
  // is wrong.
  std::vector<int> excluded(exclude, exclude + exclude_count);
  std::sort(excluded.begin(), excluded.end());
  return guarded([&]() -> plexus_result_t {
    ClientContext& ctx = ClientContext::get();
    // Default: this rank's ops are done first, so the daemon sees them all before the shrink
    // (the ring and the socket are two channels). Abort: the daemon revokes the parent.
    if ((flags & PLEXUS_SHRINK_ABORT) == 0 &&
        !ctx.quiesce(*comm->state, std::chrono::milliseconds(init_timeout_ms()))) {
      return fail(PLEXUS_ERR_TIMEOUT,
                  "plexus_comm_shrink: rank " + std::to_string(parent.rank) + " still has " +
                      std::to_string(comm->state->outstanding.load()) +
                      " op(s) on the communicator after " + std::to_string(init_timeout_ms()) +
                      " ms (PLEXUS_SHRINK_ABORT ends them)");
    }
    capnp::MallocMessageBuilder message;
    auto shrink = message.initRoot<control::ClientMessage>().initCommShrink();
    shrink.setComm(parent.handle);
    auto list = shrink.initExclude(static_cast<unsigned>(excluded.size()));
    for (unsigned i = 0; i < list.size(); ++i) list.set(i, static_cast<uint32_t>(excluded[i]));
    shrink.setAbort((flags & PLEXUS_SHRINK_ABORT) != 0);
    shrink.setTimeoutMs(static_cast<uint32_t>(init_timeout_ms()));
    Reply reply = ctx.control().call(message);
    ctx.progress();
    capnp::FlatArrayMessageReader reader(reply.words, plexus::common::untrusted_reader_options());
    auto root = reader.getRoot<control::DaemonMessage>();
    if (!root.isCommInitReply()) return refused("plexus_comm_shrink", root);
    const int nranks = parent.nranks - static_cast<int>(excluded.size());
    const int rank = parent.rank - static_cast<int>(std::lower_bound(excluded.begin(),
                                                                     excluded.end(), parent.rank) -
                                                    excluded.begin());
    auto state = std::make_shared<CommState>();
    state->handle = root.getCommInitReply().getComm();
    state->nranks = nranks;
    state->rank = rank;
    *newcomm = new plexus_comm{std::move(state)};
    return PLEXUS_SUCCESS;
  });
}

plexus_result_t plexus_comm_grow(plexus_comm_t comm, int nranks, plexus_comm_t* newcomm) {
  if (newcomm == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_grow: newcomm is NULL");
  }
  *newcomm = nullptr;
  if (comm == nullptr) return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_grow: comm is NULL");
  CommState& parent = *comm->state;
  if (nranks <= parent.nranks) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                "plexus_comm_grow: " + std::to_string(nranks) + " ranks is no growth of " +
                    std::to_string(parent.nranks) + " (new ranks join with plexus_comm_init_rank)");
  }
  return guarded([&]() -> plexus_result_t {
    ClientContext& ctx = ClientContext::get();
    capnp::MallocMessageBuilder message;
    auto grow = message.initRoot<control::ClientMessage>().initCommGrow();
    grow.setComm(parent.handle);
    grow.setNranks(static_cast<uint32_t>(nranks));
    grow.setSequence(parent.growths.load());
    grow.setTimeoutMs(static_cast<uint32_t>(init_timeout_ms()));
    Reply reply = ctx.control().call(message);
    capnp::FlatArrayMessageReader reader(reply.words, plexus::common::untrusted_reader_options());
    auto root = reader.getRoot<control::DaemonMessage>();
    if (!root.isCommInitReply()) return refused("plexus_comm_grow", root);
    parent.growths.fetch_add(1);
    auto state = std::make_shared<CommState>();
    state->handle = root.getCommInitReply().getComm();
    state->nranks = nranks;
    state->rank = parent.rank;
    *newcomm = new plexus_comm{std::move(state)};
    return PLEXUS_SUCCESS;
  });
}

plexus_result_t plexus_comm_suspend(plexus_comm_t comm, int flags, uint64_t* released) {
  if (released != nullptr) *released = 0;
  if (comm == nullptr)
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_suspend: comm is NULL");
  if (flags != PLEXUS_SUSPEND_MEM) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_suspend: flags " + std::to_string(flags) +
                                                 " is not PLEXUS_SUSPEND_MEM");
  }
  const int outstanding = comm->state->outstanding.load();
  if (outstanding > 0) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                "plexus_comm_suspend: rank " + std::to_string(comm->state->rank) + " has " +
                    std::to_string(outstanding) + " op(s) on the communicator still in flight");
  }
  return suspend_or_resume(*comm->state, true, released);
}

plexus_result_t plexus_comm_resume(plexus_comm_t comm) {
  if (comm == nullptr) return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_resume: comm is NULL");
  return suspend_or_resume(*comm->state, false, nullptr);
}

}  // extern "C"
