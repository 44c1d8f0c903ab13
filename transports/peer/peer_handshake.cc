// The peer handshake: hello, proofs, accepted; every field from the peer is checked.
#include "transports/peer/peer_handshake.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <sys/random.h>

#include <cstring>
#include <stdexcept>

#include "common/frame_codec.h"
#include "transports/wire/peer.capnp.h"

namespace plexus::transports {
namespace {

namespace peer = wire::peer;

constexpr size_t kMaxNameBytes = 255;
constexpr size_t kMaxAddresses = 16;
constexpr size_t kMaxAddressBytes = 64;

void fill_random(uint8_t* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::getrandom(out + got, n - got, 0);
    if (r < 0) throw std::runtime_error("getrandom failed");
    got += static_cast<size_t>(r);
  }
}

void put_u64(std::vector<std::byte>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}

bool printable(kj::StringPtr text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

PeerHandshake::PeerHandshake(bool is_connector, PeerIdentity me, PeerRole role,
                             const ClusterSecret* secret, uint64_t expected_peer)
    : is_connector_(is_connector),
      me_(std::move(me)),
      role_(role),
      secret_(secret),
      expected_peer_(expected_peer) {
  fill_random(my_nonce_.data(), my_nonce_.size());
}

PeerHandshake PeerHandshake::connector(PeerIdentity me, PeerRole role, const ClusterSecret* secret,
                                       uint64_t expected_peer, bool offer_rdma, bool require_rdma,
                                       bool latency_class) {
  PeerHandshake h(true, std::move(me), role, secret, expected_peer);
  h.offer_rdma_ = offer_rdma;
  h.require_rdma_ = require_rdma;
  h.latency_class_ = latency_class;
  h.send_hello();
  h.hello_sent_ = Clock::now();
  return h;
}

PeerHandshake PeerHandshake::acceptor(PeerIdentity me, const ClusterSecret* secret, bool offer_rdma,
                                      bool require_rdma) {
  PeerHandshake h(false, std::move(me), PeerRole::kControl, secret, 0);
  h.offer_rdma_ = offer_rdma;
  h.require_rdma_ = require_rdma;
  return h;
}

PeerHandshake PeerHandshake::acceptor(PeerIdentity me, const ClusterSecret* secret,
                                      std::function<bool()> offer_rdma, bool require_rdma) {
  PeerHandshake h = acceptor(std::move(me), secret, false, require_rdma);
  h.offer_rdma_for_data_ = std::move(offer_rdma);
  return h;
}

std::vector<std::byte> PeerHandshake::take_output() {
  std::vector<std::byte> out;
  out.swap(output_);
  return out;
}

template <typename Build>
void PeerHandshake::send(Build&& build) {
  capnp::MallocMessageBuilder message;
  build(message.initRoot<peer::HandshakeMessage>());
  std::vector<std::byte> frame = common::encode_frame(message);
  output_.insert(output_.end(), frame.begin(), frame.end());
}

void PeerHandshake::send_hello() {
  send([&](peer::HandshakeMessage::Builder root) {
    auto hello = root.initHello();
    hello.setProtocolVersion(kPeerProtocolVersion);
    hello.setInstanceId(me_.instance_id);
    hello.setNodeName(me_.node_name);
    hello.setRole(role_ == PeerRole::kData ? peer::ConnectionRole::DATA
                                           : peer::ConnectionRole::CONTROL);
    auto addresses = hello.initAddresses(static_cast<unsigned>(me_.addresses.size()));
    for (unsigned i = 0; i < addresses.size(); ++i) addresses.set(i, me_.addresses[i]);
    auto nics = hello.initNics(static_cast<unsigned>(me_.nics.size()));
    for (unsigned i = 0; i < nics.size(); ++i) {
      nics[i].setName(me_.nics[i].name);
      nics[i].setAddress(me_.nics[i].address);
      nics[i].setSpeedMbps(me_.nics[i].speed_mbps);
    }
    hello.setNonce(kj::arrayPtr(my_nonce_.data(), my_nonce_.size()));
    hello.setAuthenticated(secret_ != nullptr);
    hello.setRdma(offer_rdma_);
    hello.setLatency(latency_class_);
  });
}

Mac PeerHandshake::proof_of(bool by_connector) const {
  // Direction label, role, connector's nonce, acceptor's nonce, connector id, acceptor id,
  // the connector's RDMA offer, the acceptor's, the connection's class.
  std::vector<std::byte> input;
  const char* label = by_connector ? "plexus peer v1 connector" : "plexus peer v1 acceptor";
  for (const char* p = label; *p != '\0'; ++p) input.push_back(static_cast<std::byte>(*p));
  input.push_back(static_cast<std::byte>(role_));
  const Nonce& connector_nonce = is_connector_ ? my_nonce_ : peer_nonce_;
  const Nonce& acceptor_nonce = is_connector_ ? peer_nonce_ : my_nonce_;
  for (uint8_t b : connector_nonce) input.push_back(static_cast<std::byte>(b));
  for (uint8_t b : acceptor_nonce) input.push_back(static_cast<std::byte>(b));
  put_u64(input, is_connector_ ? me_.instance_id : peer_.instance_id);
  put_u64(input, is_connector_ ? peer_.instance_id : me_.instance_id);
  const bool connector_offers = is_connector_ ? offer_rdma_ : peer_offers_rdma_;
  const bool acceptor_offers = is_connector_ ? peer_offers_rdma_ : offer_rdma_;
  input.push_back(static_cast<std::byte>(connector_offers ? 1 : 0));
  input.push_back(static_cast<std::byte>(acceptor_offers ? 1 : 0));
  input.push_back(static_cast<std::byte>(latency_class_ ? 1 : 0));
  return secret_->mac(input);
}

void PeerHandshake::send_proof() {
  send([&](peer::HandshakeMessage::Builder root) {
    auto proof = root.initProof();
    if (secret_ != nullptr) {
      const Mac mac = proof_of(is_connector_);
      proof.setMac(kj::arrayPtr(mac.data(), mac.size()));
    }
  });
}

void PeerHandshake::send_accepted() {
  send([](peer::HandshakeMessage::Builder root) { root.setAccepted(); });
}

std::string PeerHandshake::refuse(const std::string& reason) {
  send([&](peer::HandshakeMessage::Builder root) { root.initRefused().setReason(reason); });
  state_ = State::kFailed;
  return reason;
}

std::string PeerHandshake::fail(const std::string& reason) {
  state_ = State::kFailed;
  return reason;
}

std::string PeerHandshake::on_frame(kj::ArrayPtr<const capnp::word> words) {
  if (state_ == State::kDone || state_ == State::kFailed) {
    return fail("a handshake frame after the handshake ended");
  }
  try {
    capnp::FlatArrayMessageReader reader(words, common::untrusted_reader_options());
    auto message = reader.getRoot<peer::HandshakeMessage>();
    switch (message.which()) {
      case peer::HandshakeMessage::REFUSED: {
        std::string reason = message.getRefused().getReason().cStr();
        if (reason.size() > 512) reason.resize(512);
        crossed_ = is_connector_ && role_ == PeerRole::kData && message.getRefused().getCrossed();
        return fail("the peer refused the connection: " + reason);
      }
      case peer::HandshakeMessage::HELLO: {
        if (state_ != State::kAwaitHello) return refuse("a second hello");
        auto hello = message.getHello();
        if (hello.getProtocolVersion() != kPeerProtocolVersion) {
          return refuse("peer protocol version " + std::to_string(hello.getProtocolVersion()) +
                        " is not " + std::to_string(kPeerProtocolVersion) +
                        " (run the same plexusd version on every node)");
        }
        if (hello.getInstanceId() == 0) return refuse("hello with instance id 0");
        if (hello.getInstanceId() == me_.instance_id) {
          return refuse("the peer has this daemon's own instance id (connected to itself?)");
        }
        if (hello.getNonce().size() != peer_nonce_.size()) {
          return refuse("hello nonce has " + std::to_string(hello.getNonce().size()) +
                        " bytes, not 32");
        }
        auto name = hello.getNodeName();
        if (name.size() == 0 || name.size() > kMaxNameBytes || !printable(name)) {
          return refuse("hello node name is empty, longer than 255 bytes or not printable");
        }
        if (hello.getAddresses().size() > kMaxAddresses || hello.getNics().size() > kMaxAddresses) {
          return refuse("hello lists more than 16 addresses or NICs");
        }
        const PeerRole role =
            hello.getRole() == peer::ConnectionRole::DATA ? PeerRole::kData : PeerRole::kControl;
        if (is_connector_ && role != role_) return refuse("the acceptor changed the role");
        if (is_connector_ && hello.getLatency() != latency_class_) {
          return refuse("the acceptor changed the connection's class");
        }
        role_ = role;
        if (!is_connector_ && offer_rdma_for_data_) {
          offer_rdma_ = role_ == PeerRole::kData && offer_rdma_for_data_();
          offer_rdma_for_data_ = nullptr;
        }
        latency_class_ = hello.getLatency();
        peer_.instance_id = hello.getInstanceId();
        peer_.node_name = name.cStr();
        for (auto address : hello.getAddresses()) {
          if (address.size() > kMaxAddressBytes || !printable(address)) {
            return refuse("hello address is longer than 64 bytes or not printable");
          }
          peer_.addresses.emplace_back(address.cStr());
        }
        for (auto nic : hello.getNics()) {
          if (nic.getName().size() > kMaxNameBytes || nic.getAddress().size() > kMaxAddressBytes ||
              !printable(nic.getName()) || !printable(nic.getAddress())) {
            return refuse("hello NIC name or address is too long or not printable");
          }
          peer_.nics.push_back({nic.getName().cStr(), nic.getAddress().cStr(), nic.getSpeedMbps()});
        }
        std::memcpy(peer_nonce_.data(), hello.getNonce().begin(), peer_nonce_.size());
        peer_authenticated_ = hello.getAuthenticated();
        peer_offers_rdma_ = hello.getRdma();
        if (require_rdma_ && role_ == PeerRole::kData && !(offer_rdma_ && peer_offers_rdma_)) {
          return refuse(
              "--transport rdma on node " + me_.node_name + ": this data connection with node " +
              peer_.node_name + " cannot use RDMA (" +
              (!offer_rdma_ ? std::string("no verbs port holds this node's address for it, "
                                          "or its RDMA paths hold all of "
                                          "--rdma-pinned-max-bytes: its log says which")
                            : "node " + peer_.node_name +
                                  " does not offer it: no verbs port on its NIC, its RDMA "
                                  "paths hold all of its --rdma-pinned-max-bytes, or "
                                  "--transport tcp") +
              ")");
        }
        const std::string who = "node " + peer_.node_name;
        if (secret_ != nullptr && !peer_authenticated_) {
          return refuse(who + " has no cluster secret, and this daemon requires one");
        }
        if (secret_ == nullptr && peer_authenticated_) {
          return refuse(who + " requires a cluster secret, and this daemon has none");
        }
        if (is_connector_) {
          round_trip_ = Clock::now() - hello_sent_;
          if (expected_peer_ != 0 && peer_.instance_id != expected_peer_) {
            return refuse(who +
                          " is not the daemon this connection was meant for (it was "
                          "restarted or the address belongs to another node)");
          }
          if (secret_ != nullptr) {
            state_ = State::kAwaitProof;
          } else {
            send_proof();
            state_ = State::kAwaitAccepted;
          }
        } else {
          send_hello();
          if (secret_ != nullptr) send_proof();
          state_ = State::kAwaitProof;
        }
        return {};
      }
      case peer::HandshakeMessage::PROOF: {
        if (state_ != State::kAwaitProof) return refuse("a proof out of order");
        auto mac = message.getProof().getMac();
        if (secret_ != nullptr) {
          const Mac expected = proof_of(!is_connector_);
          if (!macs_equal({mac.begin(), mac.size()}, expected)) {
            return refuse("node " + peer_.node_name +
                          " failed to prove it holds the cluster secret");
          }
        } else if (mac.size() != 0) {
          return refuse("a proof although neither side holds a cluster secret");
        }
        if (is_connector_) {
          send_proof();
          state_ = State::kAwaitAccepted;
        } else if (role_ == PeerRole::kData && crosses_ && crosses_(peer_.instance_id)) {
          send([](peer::HandshakeMessage::Builder root) {
            auto refused = root.initRefused();
            refused.setReason("this node is opening the data connection between the two itself");
            refused.setCrossed(true);
          });
          crossed_ = true;
          return fail("node " + peer_.node_name + " dialled while this node dialled it");
        } else {
          send_accepted();
          state_ = State::kDone;
        }
        return {};
      }
      case peer::HandshakeMessage::ACCEPTED:
        if (!is_connector_ || state_ != State::kAwaitAccepted)
          return refuse("accepted out of order");
        state_ = State::kDone;
        return {};
      default:
        return refuse("an unknown handshake message");
    }
  } catch (const kj::Exception& e) {
    return refuse(std::string("a malformed handshake message: ") + e.getDescription().cStr());
  }
}

}  // namespace plexus::transports
