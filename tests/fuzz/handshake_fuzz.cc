// Fuzz target: what a stranger may send to the peer port before it is trusted. The input
// is cut into length-framed Cap'n Proto messages and fed to an acceptor's handshake (with
// and without a cluster secret) and to a connector's. Nothing may crash, and no input
// without the secret may complete the handshake of a side that requires it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common/frame_codec.h"
#include "tests/fuzz/fuzz_seeds.h"
#include "transports/peer/peer_handshake.h"

namespace {

using plexus::transports::ClusterSecret;
using plexus::transports::PeerHandshake;
using plexus::transports::PeerIdentity;
using plexus::transports::PeerRole;

PeerIdentity me() {
  PeerIdentity id;
  id.instance_id = 0x1234;
  id.node_name = "fuzz";
  id.addresses = {"127.0.0.1:7355"};
  return id;
}

const ClusterSecret& secret() {
  static const ClusterSecret s = ClusterSecret::from_bytes(std::vector<uint8_t>{
      'f', 'u', 'z', 'z', '-', 's', 'e', 'c', 'r', 'e', 't', '-', '1', '2', '3', '4'});
  return s;
}

void feed(PeerHandshake& h, const uint8_t* data, size_t size) {
  plexus::common::FrameDecoder decoder(plexus::transports::kMaxHandshakeFrameBytes);
  decoder.append(reinterpret_cast<const std::byte*>(data), size);
  for (int frames = 0; frames < 16; ++frames) {
    auto words = decoder.next();
    if (!words.ok() || !*words) return;
    h.take_output();
    if (!h.on_frame(**words).empty()) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto open = PeerHandshake::acceptor(me(), nullptr);
  feed(open, data, size);
  auto guarded = PeerHandshake::acceptor(me(), &secret());
  feed(guarded, data, size);
  // The nonce is fresh, so no fixed input can carry a valid proof.
  if (guarded.done()) std::abort();
  auto connector = PeerHandshake::connector(me(), PeerRole::kData, &secret(), 0x99);
  feed(connector, data, size);
  if (connector.done()) std::abort();
  return 0;
}

std::vector<std::vector<uint8_t>> plexus_fuzz_seeds() {
  // A real connector's hello and (without a secret) its whole side of the exchange.
  std::vector<std::vector<uint8_t>> seeds;
  PeerIdentity other = me();
  other.instance_id = 0x99;
  other.node_name = "peer";
  auto c = PeerHandshake::connector(other, PeerRole::kControl, nullptr);
  auto a = PeerHandshake::acceptor(me(), nullptr);
  std::vector<std::byte> hello = c.take_output();
  seeds.emplace_back(reinterpret_cast<const uint8_t*>(hello.data()),
                     reinterpret_cast<const uint8_t*>(hello.data()) + hello.size());
  auto cs = PeerHandshake::connector(other, PeerRole::kData, &secret());
  std::vector<std::byte> secret_hello = cs.take_output();
  seeds.emplace_back(reinterpret_cast<const uint8_t*>(secret_hello.data()),
                     reinterpret_cast<const uint8_t*>(secret_hello.data()) + secret_hello.size());
  return seeds;
}
