#include "clientlib/src/unique_id.h"

#include <netinet/in.h>
#include <sys/random.h>

#include <capnp/serialize.h>

#include <cerrno>
#include <cstring>

#include "clientlib/control/control_channel.h"
#include "common/frame_codec.h"
#include "common/socket_address.h"
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

}  // namespace

std::string make_unique_id(plexus_unique_id_t* id) {
  UniqueIdLayout layout{};
  layout.magic = kUniqueIdMagic;
  layout.version = kUniqueIdVersion;
  if (getrandom(layout.token, sizeof(layout.token), 0) != sizeof(layout.token)) {
    return std::string("getrandom failed: ") + std::strerror(errno);
  }
  fill_root(&layout);
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &layout, sizeof(layout));
  return {};
}

std::string read_unique_id(const plexus_unique_id_t& id, UniqueIdParts* out) {
  UniqueIdLayout layout;
  std::memcpy(&layout, id.internal, sizeof(layout));
  if (layout.magic != kUniqueIdMagic || layout.version != kUniqueIdVersion ||
      layout.address_count > kUniqueIdAddresses) {
    return "the id was not made by plexus_get_unique_id (or plexus_weights_key) of this "
           "libplexus version";
  }
  std::memcpy(out->token, layout.token, sizeof(out->token));
  out->root_instance = layout.root_instance;
  out->root_addresses.clear();
  for (size_t i = 0; i < layout.address_count; ++i) {
    std::string text = unpack_address(layout.addresses[i]);
    if (text.empty()) return "the unique id holds a corrupt root address";
    out->root_addresses.push_back(std::move(text));
  }
  return {};
}

void write_unique_id(const UniqueIdParts& parts, plexus_unique_id_t* id) {
  UniqueIdLayout layout{};
  layout.magic = kUniqueIdMagic;
  layout.version = kUniqueIdVersion;
  std::memcpy(layout.token, parts.token, sizeof(layout.token));
  layout.root_instance = parts.root_instance;
  for (const std::string& address : parts.root_addresses) {
    if (layout.address_count == kUniqueIdAddresses) break;
    if (pack_address(address, &layout.addresses[layout.address_count])) ++layout.address_count;
  }
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &layout, sizeof(layout));
}

}  // namespace plexus::client
