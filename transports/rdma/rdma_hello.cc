#include "transports/rdma/rdma_hello.h"

#include <cstring>

#include "transports/rdma/remote_ring.h"
#include "transports/rdma/verbs_port.h"
#include "transports/wire/little_endian.h"

namespace plexus::transports::rdma {
namespace {

constexpr uint32_t kHelloMagic = 0x44525850;  // "PXRD"
constexpr uint32_t kHelloVersion = 1;

}  // namespace

std::array<std::byte, kHelloBytes> encode_hello(const Hello& h) {
  std::array<std::byte, kHelloBytes> out{};
  wire::put_le<uint32_t>(out.data(), kHelloMagic);
  wire::put_le<uint32_t>(out.data() + 4, kHelloVersion);
  wire::put_le<uint32_t>(out.data() + 8, h.qpn);
  wire::put_le<uint32_t>(out.data() + 12, h.psn);
  std::memcpy(out.data() + 16, h.gid.raw, 16);
  wire::put_le<uint64_t>(out.data() + 32, h.ring_address);
  wire::put_le<uint32_t>(out.data() + 40, h.ring_rkey);
  wire::put_le<uint32_t>(out.data() + 44, h.receive_depth);
  wire::put_le<uint64_t>(out.data() + 48, h.ring_bytes);
  wire::put_le<uint32_t>(out.data() + 56, h.mtu);
  return out;
}

common::Result<Hello> decode_hello(const std::byte* in) {
  Hello hello;
  if (wire::get_le<uint32_t>(in) != kHelloMagic)
    return common::fail("the peer's RDMA setup has a bad magic number");
  if (wire::get_le<uint32_t>(in + 4) != kHelloVersion) {
    return common::fail("the peer speaks RDMA setup version " +
                        std::to_string(wire::get_le<uint32_t>(in + 4)) + ", this daemon " +
                        std::to_string(kHelloVersion));
  }
  hello.qpn = wire::get_le<uint32_t>(in + 8) & 0xffffff;
  hello.psn = wire::get_le<uint32_t>(in + 12) & 0xffffff;
  std::memcpy(hello.gid.raw, in + 16, 16);
  hello.ring_address = wire::get_le<uint64_t>(in + 32);
  hello.ring_rkey = wire::get_le<uint32_t>(in + 40);
  hello.receive_depth = wire::get_le<uint32_t>(in + 44);
  hello.ring_bytes = wire::get_le<uint64_t>(in + 48);
  hello.mtu = wire::get_le<uint32_t>(in + 56);
  if (hello.ring_bytes < kRingAlign * 2 || hello.ring_bytes % kRingAlign != 0 ||
      hello.ring_bytes > kMaxRingBytes) {
    return common::fail("the peer's receive ring of " + std::to_string(hello.ring_bytes) +
                        " bytes is unusable");
  }
  if (hello.receive_depth < 2 || hello.receive_depth > kMaxReceiveDepth) {
    return common::fail("the peer advertises " + std::to_string(hello.receive_depth) +
                        " receives (2 to " + std::to_string(kMaxReceiveDepth) + " make sense)");
  }
  if (hello.mtu < IBV_MTU_256 || hello.mtu > IBV_MTU_4096) {
    return common::fail("the peer's path MTU (" + std::to_string(hello.mtu) + ") is unknown");
  }
  return hello;
}

std::string check_peer_hello(const Hello& hello, std::optional<uint32_t> peer_ipv4,
                             uint64_t largest_frame) {
  if (!peer_ipv4) return "the path's socket has no IPv4 peer";
  ibv_gid expected{};
  expected.raw[10] = 0xff;
  expected.raw[11] = 0xff;
  std::memcpy(expected.raw + 12, &*peer_ipv4, 4);
  if (std::memcmp(expected.raw, hello.gid.raw, sizeof expected.raw) != 0) {
    return "the peer's RDMA GID " + gid_text(hello.gid) + " is not its address " +
           gid_text(expected);
  }
  if (hello.ring_bytes < largest_frame) {
    return "the peer's receive ring (" + std::to_string(hello.ring_bytes) +
           " bytes) cannot hold the largest frame";
  }
  return {};
}

}  // namespace plexus::transports::rdma
