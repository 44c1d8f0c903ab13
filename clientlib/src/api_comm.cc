// The C API's communicators: unique ids (a random token and where the ranks meet), joining
// one, leaving it, its size and this rank.
#include <netinet/in.h>
#include <sys/random.h>

#include <capnp/serialize.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "clientlib/control/control_channel.h"
#include "clientlib/src/api_common.h"
#include "clientlib/src/client_context.h"
#include "clientlib/src/last_error.h"
#include "common/socket_address.h"
#include "plexus/plexus.h"
#include "shm/framing.h"

namespace plexus::client {
namespace {

namespace control = shm::control;

constexpr uint32_t kUniqueIdMagic = 0x504c5855;  // "PLXU"

constexpr uint32_t kUniqueIdVersion = 2;
constexpr size_t kUniqueIdAddresses = 4;

// An IPv4 or IPv6 address and port, packed.
struct PackedAddress {
  uint8_t family;  // 4 or 6
  uint8_t reserved;
  uint16_t port;  // network byte order
  uint8_t bytes[16];
};

// Layout of plexus_unique_id_t's bytes: the communicator's random token, and the daemon
// where its ranks meet (the one that made the id; root_instance 0: none was reachable).
struct UniqueIdLayout {
  uint32_t magic;
  uint32_t version;
  uint8_t token[16];
  uint64_t root_instance;
  uint8_t address_count;
  uint8_t reserved[7];
  PackedAddress addresses[kUniqueIdAddresses];
};
static_assert(sizeof(UniqueIdLayout) <= PLEXUS_UNIQUE_ID_BYTES);

bool pack_address(const std::string& text, PackedAddress* out) {
  std::memset(out, 0, sizeof(*out));
  sockaddr_storage address{};
  socklen_t len = 0;
  if (!common::parse_address(text, &address, &len)) return false;
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    out->family = 4;
    out->port = in->sin_port;
    std::memcpy(out->bytes, &in->sin_addr, sizeof(in->sin_addr));
  } else {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    out->family = 6;
    out->port = in6->sin6_port;
    std::memcpy(out->bytes, &in6->sin6_addr, sizeof(in6->sin6_addr));
  }
  return true;
}

std::string unpack_address(const PackedAddress& a) {
  sockaddr_storage address{};
  if (a.family == 4) {
    auto* in = reinterpret_cast<sockaddr_in*>(&address);
    in->sin_family = AF_INET;
    in->sin_port = a.port;
    std::memcpy(&in->sin_addr, a.bytes, sizeof(in->sin_addr));
  } else if (a.family == 6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = a.port;
    std::memcpy(&in6->sin6_addr, a.bytes, sizeof(in6->sin6_addr));
  } else {
    return {};
  }
  return common::address_text(reinterpret_cast<const sockaddr*>(&address));
}

// Asks the local daemon (without opening a session) for its instance id and peer
// addresses. No daemon: the id names no root, and only ranks of one node can use it.
void fill_root(UniqueIdLayout* layout) {
  try {
    ControlChannel channel(shm::default_socket_path(), 0);
    capnp::MallocMessageBuilder message;
    auto hello = message.initRoot<control::ClientMessage>().initHello();
    hello.setProtocolVersion(shm::kProtocolVersion);
    hello.setRole(control::Role::ADMIN);
    hello.setProcessName("plexus_get_unique_id");
    Reply reply = channel.call(message);
    capnp::FlatArrayMessageReader reader(reply.words, common::untrusted_reader_options());
    auto root = reader.getRoot<control::DaemonMessage>();
    if (!root.isHelloReply()) return;
    layout->root_instance = root.getHelloReply().getInstanceId();
    for (auto address : root.getHelloReply().getPeerAddresses()) {
      if (layout->address_count == kUniqueIdAddresses) break;
      if (pack_address(address.cStr(), &layout->addresses[layout->address_count])) {
        ++layout->address_count;
      }
    }
  } catch (const std::exception&) {
    layout->root_instance = 0;
    layout->address_count = 0;
  }
}

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
  UniqueIdLayout layout;
  std::memcpy(&layout, id.internal, sizeof(layout));
  if (layout.magic != kUniqueIdMagic || layout.version != kUniqueIdVersion ||
      layout.address_count > kUniqueIdAddresses) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                "plexus_comm_init_rank: the unique id was not made by plexus_get_unique_id of "
                "this libplexus version");
  }
  std::vector<std::string> root_addresses;
  for (size_t i = 0; i < layout.address_count; ++i) {
    std::string text = unpack_address(layout.addresses[i]);
    if (text.empty()) {
      return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                  "plexus_comm_init_rank: the unique id holds a corrupt root address");
    }
    root_addresses.push_back(std::move(text));
  }
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
  UniqueIdLayout layout{};
  layout.magic = kUniqueIdMagic;
  layout.version = kUniqueIdVersion;
  if (getrandom(layout.token, sizeof(layout.token), 0) != sizeof(layout.token)) {
    return fail(PLEXUS_ERR_SYSTEM, std::string("getrandom failed: ") + std::strerror(errno));
  }
  fill_root(&layout);
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &layout, sizeof(layout));
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
    UniqueIdLayout layout{};
    layout.magic = kUniqueIdMagic;
    layout.version = kUniqueIdVersion;
    std::memcpy(layout.token, grown.getToken().begin(), sizeof(layout.token));
    layout.root_instance = grown.getRootInstance();
    for (auto address : grown.getRootAddresses()) {
      if (layout.address_count == kUniqueIdAddresses) break;
      if (pack_address(address.cStr(), &layout.addresses[layout.address_count])) {
        ++layout.address_count;
      }
    }
    std::memset(id->internal, 0, sizeof(id->internal));
    std::memcpy(id->internal, &layout, sizeof(layout));
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
