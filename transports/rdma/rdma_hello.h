// The RDMA setup message each side of a path sends on its authenticated socket before the
// queue pairs connect (rdma_path.cc): its queue pair number, first packet sequence number,
// GID, the receive ring the peer may write into (address, rkey, size), how many receives it
// keeps posted, and its path MTU. Fixed size, little-endian. decode_hello refuses, by name,
// every field that is unusable on its own before any of it reaches a verbs call;
// check_peer_hello then what needs the path's context (the GID must be the socket's peer
// address, the ring must hold the largest frame).
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"

namespace plexus::transports::rdma {

inline constexpr size_t kHelloBytes = 64;
// The most receives a peer may advertise.
inline constexpr uint32_t kMaxReceiveDepth = 65536;
// The largest receive ring a peer may advertise (64 GiB).
inline constexpr uint64_t kMaxRingBytes = uint64_t{1} << 36;

struct Hello {
  uint32_t qpn = 0;  // 24 bits
  uint32_t psn = 0;  // 24 bits
  ibv_gid gid{};
  uint64_t ring_address = 0;
  uint32_t ring_rkey = 0;
  uint64_t ring_bytes = 0;
  uint32_t receive_depth = 0;
  uint32_t mtu = 0;  // enum ibv_mtu
};

std::array<std::byte, kHelloBytes> encode_hello(const Hello& hello);
// The peer's setup message, or why it cannot be used (the path then fails with it).
common::Result<Hello> decode_hello(const std::byte* in);
// "" or why the peer's decoded `hello` cannot be used on this path: the queue pair goes where
// the authenticated socket goes, nowhere else, so its GID must be the IPv4 address of the
// socket's peer (`peer_ipv4`, network byte order; none: the socket has no IPv4 peer), and its
// ring must hold `largest_frame` (header and largest payload).
std::string check_peer_hello(const Hello& hello, std::optional<uint32_t> peer_ipv4,
                             uint64_t largest_frame);

}  // namespace plexus::transports::rdma
