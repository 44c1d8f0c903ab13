#include "transports/rdma/rdma_hello.h"

#include <cstring>

#include "transports/rdma/remote_ring.h"
#include "transports/rdma/wire_bytes.h"

namespace plexus::transports::rdma {
namespace {

constexpr uint32_t kHelloMagic = 0x44525850;  // "PXRD"
constexpr uint32_t kHelloVersion = 1;

}  // namespace

std::array<std::byte, kHelloBytes> encode_hello(const Hello& h) {
  std::array<std::byte, kHelloBytes> out{};
  put_le<uint32_t>(out.data(), 0, kHelloMagic);
  put_le<uint32_t>(out.data(), 4, kHelloVersion);
  put_le<uint32_t>(out.data(), 8, h.qpn);
  put_le<uint32_t>(out.data(), 12, h.psn);
  std::memcpy(out.data() + 16, h.gid.raw, 16);
  put_le<uint64_t>(out.data(), 32, h.ring_address);
  put_le<uint32_t>(out.data(), 40, h.ring_rkey);
  put_le<uint32_t>(out.data(), 44, h.receive_depth);
  put_le<uint64_t>(out.data(), 48, h.ring_bytes);
  put_le<uint32_t>(out.data(), 56, h.mtu);
  return out;
}

std::string decode_hello(const std::byte* in, Hello* h) {
  if (get_le<uint32_t>(in, 0) != kHelloMagic) return "the peer's RDMA setup has a bad magic number";
  if (get_le<uint32_t>(in, 4) != kHelloVersion) {
    return "the peer speaks RDMA setup version " + std::to_string(get_le<uint32_t>(in, 4)) +
           ", this daemon " + std::to_string(kHelloVersion);
  }
  h->qpn = get_le<uint32_t>(in, 8) & 0xffffff;
  h->psn = get_le<uint32_t>(in, 12) & 0xffffff;
  std::memcpy(h->gid.raw, in + 16, 16);
  h->ring_address = get_le<uint64_t>(in, 32);
  h->ring_rkey = get_le<uint32_t>(in, 40);
  h->receive_depth = get_le<uint32_t>(in, 44);
  h->ring_bytes = get_le<uint64_t>(in, 48);
  h->mtu = get_le<uint32_t>(in, 56);
  if (h->ring_bytes < kRingAlign * 2 || h->ring_bytes % kRingAlign != 0 ||
      h->ring_bytes > kMaxRingBytes) {
    return "the peer's receive ring of " + std::to_string(h->ring_bytes) + " bytes is unusable";
  }
  if (h->receive_depth < 2 || h->receive_depth > kMaxReceiveDepth) {
    return "the peer advertises " + std::to_string(h->receive_depth) + " receives (2 to " +
           std::to_string(kMaxReceiveDepth) + " make sense)";
  }
  if (h->mtu < IBV_MTU_256 || h->mtu > IBV_MTU_4096) {
    return "the peer's path MTU (" + std::to_string(h->mtu) + ") is unknown";
  }
  return {};
}

}  // namespace plexus::transports::rdma
