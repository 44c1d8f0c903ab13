// The C API's communicators: unique ids (a random token and where the ranks meet), joining
// one, leaving it, its size and this rank.

#include <capnp/serialize.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "clientlib/control/control_channel.h"
#include "clientlib/src/api_common.h"
#include "clientlib/src/client_context.h"
#include "clientlib/src/last_error.h"
#include "clientlib/src/unique_id.h"
#include "plexus/plexus.h"
#include "shm/framing.h"

namespace plexus::client {
namespace {

namespace control = shm::control;

plexus_result_t comm_init(plexus_comm_t* comm, int nranks, plexus_unique_id_t id, int rank,
                          int timeout_ms) {
  if (comm == nullptr)
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_init_rank: comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_init_rank: rank " + std::to_string(rank) +
                                                 " of " + std::to_string(nranks) +
                                                 " is not a valid position");
  }
  UniqueIdParts layout;
  if (std::string why = read_unique_id(id, &layout); !why.empty()) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_init_rank: " + why);
  }
  const std::vector<std::string>& root_addresses = layout.root_addresses;
  const char* algorithm = std::getenv("PLEXUS_ALGO");
  return guarded([&]() -> plexus_result_t {
    ClientContext& ctx = ClientContext::get();
    capnp::MallocMessageBuilder message;
    auto init = message.initRoot<control::ClientMessage>().initCommInit();
    init.setToken(
        kj::arrayPtr(reinterpret_cast<const kj::byte*>(layout.token), sizeof(layout.token)));
    init.setNranks(static_cast<uint32_t>(nranks));
    init.setRank(static_cast<uint32_t>(rank));
    init.setTimeoutMs(static_cast<uint32_t>(timeout_ms));
    init.setRootInstance(layout.root_instance);
    auto addresses = init.initRootAddresses(static_cast<unsigned>(root_addresses.size()));
    for (unsigned i = 0; i < addresses.size(); ++i) addresses.set(i, root_addresses[i]);
    init.setAlgorithm(algorithm != nullptr ? algorithm : "");
    Reply reply = ctx.control().call(message);
    capnp::FlatArrayMessageReader reader(reply.words, common::untrusted_reader_options());
    auto root = reader.getRoot<control::DaemonMessage>();
    if (root.isError()) {
      return fail(static_cast<plexus_result_t>(root.getError().getCode()),
                  std::string("plexus_comm_init_rank (rank ") + std::to_string(rank) +
                      "): " + root.getError().getMessage().cStr());
    }
    if (!root.isCommInitReply()) {
      return fail(PLEXUS_ERR_PROTOCOL, "plexus_comm_init_rank: unexpected reply from plexusd");
    }
    auto state = std::make_shared<CommState>();
    state->handle = root.getCommInitReply().getComm();
    state->nranks = nranks;
    state->rank = rank;
    *comm = new plexus_comm{std::move(state)};
    return PLEXUS_SUCCESS;
  });
}

plexus_result_t comm_leave(plexus_comm_t comm, bool abort) {
  const char* call = abort ? "plexus_comm_abort" : "plexus_comm_destroy";
  if (comm == nullptr)
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, std::string(call) + ": comm is NULL");
  plexus_result_t result = guarded([&]() -> plexus_result_t {
    ClientContext& ctx = ClientContext::get();
    if (!abort) ctx.quiesce(*comm->state);
    comm->state->closed.store(true);
    capnp::MallocMessageBuilder message;
    auto leave = message.initRoot<control::ClientMessage>().initCommLeave();
    leave.setComm(comm->state->handle);
    leave.setAbort(abort);
    Reply reply = ctx.control().call(message);
    ctx.progress();  // the daemon posted the aborted ops' completions before replying
    return PLEXUS_SUCCESS;
  });
  delete comm;
  return result;
}

}  // namespace
}  // namespace plexus::client

using namespace plexus::client;

extern "C" {

plexus_result_t plexus_get_unique_id(plexus_unique_id_t* id) {
  if (id == nullptr) return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_get_unique_id: id is NULL");
  if (std::string why = make_unique_id(id); !why.empty()) {
    return fail(PLEXUS_ERR_SYSTEM, "plexus_get_unique_id: " + why);
  }
  return PLEXUS_SUCCESS;
}

plexus_result_t plexus_comm_init_rank(plexus_comm_t* comm, int nranks, plexus_unique_id_t id,
                                      int rank) {
  return comm_init(comm, nranks, id, rank, init_timeout_ms());
}

plexus_result_t plexus_comm_init_rank_timeout(plexus_comm_t* comm, int nranks,
                                              plexus_unique_id_t id, int rank, int timeout_ms) {
  if (timeout_ms <= 0) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_init_rank_timeout: timeout_ms " +
                                                 std::to_string(timeout_ms) + " must be positive");
  }
  return comm_init(comm, nranks, id, rank, timeout_ms);
}

plexus_result_t plexus_comm_grow_id(plexus_comm_t comm, plexus_unique_id_t* id) {
  if (comm == nullptr || id == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_grow_id: NULL argument");
  }
  return guarded([&]() -> plexus_result_t {
    ClientContext& ctx = ClientContext::get();
    capnp::MallocMessageBuilder message;
    auto ask = message.initRoot<control::ClientMessage>().initCommGrowId();
    ask.setComm(comm->state->handle);
    ask.setSequence(comm->state->growths.load());
    Reply reply = ctx.control().call(message);
    capnp::FlatArrayMessageReader reader(reply.words, plexus::common::untrusted_reader_options());
    auto root = reader.getRoot<control::DaemonMessage>();
    if (root.isError()) {
      return fail(static_cast<plexus_result_t>(root.getError().getCode()),
                  std::string("plexus_comm_grow_id: ") + root.getError().getMessage().cStr());
    }
    if (!root.isGrowIdReply() || root.getGrowIdReply().getToken().size() != 16) {
      return fail(PLEXUS_ERR_PROTOCOL, "plexus_comm_grow_id: unexpected reply from plexusd");
    }
    auto grown = root.getGrowIdReply();
    UniqueIdParts parts;
    std::memcpy(parts.token, grown.getToken().begin(), sizeof(parts.token));
    parts.root_instance = grown.getRootInstance();
    for (auto address : grown.getRootAddresses()) parts.root_addresses.push_back(address);
    write_unique_id(parts, id);
    return PLEXUS_SUCCESS;
  });
}

plexus_result_t plexus_comm_destroy(plexus_comm_t comm) { return comm_leave(comm, false); }
plexus_result_t plexus_comm_abort(plexus_comm_t comm) { return comm_leave(comm, true); }

plexus_result_t plexus_comm_count(plexus_comm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_count: NULL argument");
  }
  *count = comm->state->nranks;
  return PLEXUS_SUCCESS;
}

plexus_result_t plexus_comm_user_rank(plexus_comm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_comm_user_rank: NULL argument");
  }
  *rank = comm->state->rank;
  return PLEXUS_SUCCESS;
}

}  // extern "C"
