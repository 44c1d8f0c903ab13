// The opening exchange of every connection between two daemons, as a state machine with
// no I/O: frames in, frames out. The side that connects sends its hello; the side that
// accepts answers with its own and, when it holds the cluster secret, a proof; the
// connector proves itself in turn; the acceptor says accepted. Each proof is an
// HMAC-SHA256 over both fresh nonces, both instance ids, the role and the direction, so a
// recorded proof is worthless on another connection or reflected back. Until done() no
// other frame is accepted on the connection.
#pragma once

#include <capnp/common.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "transports/peer/cluster_secret.h"

namespace plexus::transports {

// 2: RDMA offers, in the proof; 3: numbered control messages; 4: the latency class's data
// connections, in the proof; 5: data connections open on first use, from either side
// (Refused.crossed); 6: idle links close by agreement (data frame version 4, kRetire*); 7:
// idle control connections close with a bye (ControlSequence::kByeSeq); 8: the topology goes
// down a tree (Formed.root and Formed.fanout, passed on by members); 9: revokes down a tree,
// shrinks (Join.parent, Join.excluded), probes, the code in a kAbort; 10: a send's tag in its
// end marker; 11: the weight relay (its data family, node messages weightsSubscribe); 12: a
// relayed version refused (kWeightsRefusedStep).
inline constexpr uint32_t kPeerProtocolVersion = 12;
inline constexpr size_t kMaxHandshakeFrameBytes = 64 * 1024;

enum class PeerRole : uint8_t { kControl = 0, kData = 1 };

struct NicInfo {
  std::string name;
  std::string address;
  uint32_t speed_mbps = 0;
};

struct PeerIdentity {
  uint64_t instance_id = 0;
  std::string node_name;
  std::vector<std::string> addresses;  // "ip:port" where it accepts peers
  std::vector<NicInfo> nics;
};

class PeerHandshake {
 public:
  using Clock = std::chrono::steady_clock;

  // The connecting side. `expected_peer` (0: any) is the instance it means to reach.
  // `offer_rdma`: this side could carry a data connection over RDMA; the connection does if
  // both sides offer (rdma_agreed), and the offers are part of the proof, so that no one on
  // the way can turn them off.
  // `require_rdma` (plexusd --transport rdma): a data connection that would not be RDMA
  // is refused in the handshake, so both sides learn why before either opens a path.
  // `latency_class`: a data connection that carries the latency class's frames (the
  // acceptor learns it here, and it is part of the proof).
  static PeerHandshake connector(PeerIdentity me, PeerRole role, const ClusterSecret* secret,
                                 uint64_t expected_peer = 0, bool offer_rdma = false,
                                 bool require_rdma = false, bool latency_class = false);
  static PeerHandshake acceptor(PeerIdentity me, const ClusterSecret* secret,
                                bool offer_rdma = false, bool require_rdma = false);
  // The same, with the offer decided only once the connector's hello says the connection
  // carries data (a control connection offers nothing): `offer_rdma` is asked then, once.
  static PeerHandshake acceptor(PeerIdentity me, const ClusterSecret* secret,
                                std::function<bool()> offer_rdma, bool require_rdma);

  // Length-framed bytes to write now (drained by the call).
  std::vector<std::byte> take_output();
  // One received frame (the Cap'n Proto words after the length). Returns "" or why the
  // connection must close; a refusal for the peer is then already in the output when
  // telling it helps.
  std::string on_frame(kj::ArrayPtr<const capnp::word> words);

  // Acceptor: a data connection from a peer for which `crosses(peer instance)` holds is
  // refused as crossed (Refused.crossed): both sides dialled each other at once, and only
  // the connection the lower instance id dialled is kept.
  void refuse_crossing(std::function<bool(uint64_t peer_instance)> crosses) {
    crosses_ = std::move(crosses);
  }
  // The acceptor refused this connection as crossed (on the connector: its own comes
  // instead): a normal event, not a fault.
  bool crossed() const { return crossed_; }

  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kFailed; }
  PeerRole role() const { return role_; }
  bool rdma_agreed() const { return role_ == PeerRole::kData && offer_rdma_ && peer_offers_rdma_; }
  bool latency_class() const { return role_ == PeerRole::kData && latency_class_; }
  const PeerIdentity& peer() const { return peer_; }
  // Connector only: hello sent to hello received, a first estimate of the path latency.
  Clock::duration round_trip() const { return round_trip_; }

 private:
  enum class State { kAwaitHello, kAwaitProof, kAwaitAccepted, kDone, kFailed };
  using Nonce = std::array<uint8_t, 32>;

  PeerHandshake(bool is_connector, PeerIdentity me, PeerRole role, const ClusterSecret* secret,
                uint64_t expected_peer);
  void send_hello();
  void send_proof();
  void send_accepted();
  std::string refuse(const std::string& reason);  // tells the peer, returns the reason
  std::string fail(const std::string& reason);    // peer is not told
  Mac proof_of(bool by_connector) const;
  template <typename Builder>
  void send(Builder&& build);

  bool is_connector_;
  PeerIdentity me_;
  PeerRole role_;
  const ClusterSecret* secret_;
  uint64_t expected_peer_;
  State state_ = State::kAwaitHello;
  Nonce my_nonce_{};
  Nonce peer_nonce_{};
  PeerIdentity peer_;
  bool peer_authenticated_ = false;
  bool offer_rdma_ = false;
  std::function<bool()> offer_rdma_for_data_;  // acceptor: asked when the role is known
  bool require_rdma_ = false;
  bool peer_offers_rdma_ = false;
  bool latency_class_ = false;
  std::function<bool(uint64_t)> crosses_;
  bool crossed_ = false;
  std::vector<std::byte> output_;
  Clock::time_point hello_sent_{};
  Clock::duration round_trip_{};
};

}  // namespace plexus::transports
