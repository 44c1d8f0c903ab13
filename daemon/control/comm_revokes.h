// Revokes of multi-node communicators between daemons. The daemon where a rank revoked one
// (plexus_comm_revoke), or that lost one of its nodes, sends a Revoke down a tree of the
// communicator's nodes rooted at itself (formed_tree.h); each node passes it on before it
// fails its own ranks' ops, so every member hears within one control hop per level, linked
// to the revoker or not (a kAbort on the data links reaches only linked nodes). The node
// whose loss made this one revoke is stepped over (its children are sent it directly), and
// one lost after it was sent it has its children sent it from here (TreeRelay). A node whose
// ranks all left the communicator still passes it on (its span is kept until it is pruned).
// One that has not formed it yet (its Formed still on the way) keeps the revoke a while and
// acts on it when it forms (formed()), so its subtree hears too. Control thread only; it owns
// the relay, sends through Hooks::send and fails this node's ops through Hooks::revoked.
#pragma once

#include <capnp/message.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/control/node_control.capnp.h"
#include "daemon/control/tree_relay.h"
#include "daemon/engine/comm.h"
#include "transports/peer/peer_handshake.h"

namespace plexus::daemon {

// A revoke as it goes down its tree: the communicator (its span lists the tree's nodes).
struct RevokeNotice {
  std::shared_ptr<const Comm> comm;
  std::string text;
  plexus_result_t code = PLEXUS_ERR_REVOKED;
  size_t origin = 0;  // index of the revoking node in the span
  uint32_t fanout = 0;
  size_t index_of(uint64_t instance) const;
  std::vector<size_t> children_of(uint64_t instance) const;
};

class CommRevokes {
 public:
  struct Hooks {
    // A control message to daemon `instance` at one of `addresses` (PeerServer::send_control).
    std::function<void(uint64_t instance, const std::vector<std::string>& addresses,
                       capnp::MessageBuilder& message)>
        send;
    // Another node revoked communicator `comm_id`: its ops here fail (Engine::revoke_remote).
    std::function<void(uint64_t comm_id, const std::string& text, plexus_result_t code)> revoked;
  };
  // `keep`: how long a revoke sent on is kept for a lost node's children.
  CommRevokes(uint64_t me, Hooks hooks, std::chrono::milliseconds keep);

  // This node revoked `comm` (its own ops already failed): the other nodes are told, with
  // node `lost` (0: none) stepped over.
  void revoke(std::shared_ptr<const Comm> comm, const std::string& text, plexus_result_t code,
              uint64_t lost = 0);
  // A Revoke from `peer`; `comm`: the communicator its token names here (null: none yet).
  void on_revoke(const transports::PeerIdentity& peer, node_control::Revoke::Reader revoke,
                 std::shared_ptr<const Comm> comm);
  // Multi-node communicator `comm` formed here: a revoke that came before it is acted on now.
  void formed(const std::shared_ptr<const Comm>& comm);
  // Node `instance`'s control connection is lost: what went to it goes to its children.
  void lost(uint64_t instance);
  // This node's data link to node `instance` is lost: the engine failed every communicator
  // with that node here, and each of `comms` with it in is revoked for the nodes not linked
  // to this one (which would otherwise hear at their next op, or never, for one waiting on
  // a recv from a live node). `me`: this node's name, for the sentence.
  void node_lost(uint64_t instance, const std::vector<std::shared_ptr<const Comm>>& comms,
                 const std::string& me);

 private:
  // The nodes `notice` goes to from here: `to` (indexes into its span), with node `lost`
  // stepped over (its children take its place).
  std::vector<size_t> targets(const RevokeNotice& notice, std::vector<size_t> to,
                              uint64_t lost) const;
  void send(const RevokeNotice& notice, const std::vector<size_t>& to);
  // Recorded before it is sent: a send that finds a node lost at once relays from the record.
  void pass_on(const RevokeNotice& notice, uint64_t lost);

  // A revoke as it came from a peer, before it is checked against the communicator's span.
  struct Received {
    uint64_t from = 0;  // the peer that sent it
    std::string from_name;
    uint64_t origin = 0;
    uint32_t fanout = 0;
    std::string text;
    plexus_result_t code = PLEXUS_ERR_REVOKED;
    std::chrono::steady_clock::time_point until{};  // kept for a communicator not formed yet
  };
  // Checks `r` against `comm`'s nodes, then passes it on and fails this node's ops; false if
  // it names no node of it.
  bool accept(const std::shared_ptr<const Comm>& comm, const Received& r);

  uint64_t me_;
  Hooks hooks_;
  std::chrono::milliseconds keep_;
  TreeRelay<RevokeNotice> relay_;
  // Revokes of communicators not formed here (yet), each kept for keep_; at most
  // kMaxEarlyRevokes, and kMaxEarlyRevokesPerPeer from one peer, so that a peer naming
  // made-up tokens holds little and crowds out nobody.
  std::multimap<CommToken, Received> early_;
  static constexpr size_t kMaxEarlyRevokes = 64;
  static constexpr size_t kMaxEarlyRevokesPerPeer = 4;
};

}  // namespace plexus::daemon
