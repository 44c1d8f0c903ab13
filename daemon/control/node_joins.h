// The control thread's side of multi-node communicators: the peer listener, joins sent to
// the root daemon, the root's rendezvous across nodes, the topology it sends back, and the
// data connections every pair of nodes in a communicator needs before its ranks hear that
// it is ready. Control thread only; it owns every field below, and asks ControlServer,
// through Hooks, only to answer ranks and to form a communicator.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/algorithms/cost_model.h"
#include "daemon/control/comm_rendezvous.h"
#include "daemon/control/comm_revokes.h"
#include "daemon/control/control_config.h"
#include "daemon/control/formed_relay.h"
#include "daemon/control/join_message.h"
#include "daemon/control/node_rendezvous.h"
#include "daemon/engine/engine.h"
#include "daemon/peers/peer_server.h"

namespace plexus::daemon {

class NodeJoins {
 public:
  struct Hooks {
    // Answers a rank's request with an error (ControlServer::send_error).
    std::function<void(uint64_t session_id, uint32_t request_id, plexus_result_t,
                       const std::string& message)>
        send_error;
    // Every local joiner hears; the engine gets the communicator (ControlServer::form_comm).
    std::function<void(const CommToken&, int nranks, const std::vector<CommRendezvous::Joiner>&,
                       std::optional<NodeSpan>)>
        form_comm;
    // A deadline was added: the rendezvous timer is set again.
    std::function<void()> arm_timer;
    // The communicators formed here (CommService's const views; a finished one until it is
    // pruned).
    std::function<const std::vector<std::shared_ptr<const Comm>>&()> comms;
  };
  // The daemon that made a communicator's unique id: its root.
  struct RootRef {
    uint64_t instance = 0;
    std::vector<std::string> addresses;
  };

  // `rendezvous`: the control thread's joiners of this node, shared with ControlServer.
  NodeJoins(const ControlConfig& config, Engine& engine, CommRendezvous& rendezvous, Hooks hooks);

  // Draws this daemon's instance id and, with --peer-listen, starts listening for peer
  // daemons on `loop` (throws when it cannot).
  void start(uv_loop_t* loop);
  // On the control thread, as its loop ends: the peer connections close. stop(), after the
  // loop: the peer server goes.
  void close();
  void stop() { peers_.reset(); }

  uint64_t instance_id() const { return instance_id_; }
  // Sends a node message to `instance` over a control connection (opened to one of
  // `addresses` if none is); nothing without --peer-listen.
  bool send(uint64_t instance, const std::vector<std::string>& addresses,
            capnp::MessageBuilder& message) {
    if (!peers_) return false;
    peers_->send_control(instance, addresses, message);
    return true;
  }
  // Who hears a peer's weightsSubscribe (the weight service).
  std::function<void(const transports::PeerIdentity& peer, uint64_t relay_id, uint64_t have)>
      on_weights_subscribe;
  // This daemon as peers see it; null without --peer-listen.
  const transports::PeerIdentity* identity() const {
    return peers_ ? &peers_->identity() : nullptr;
  }

  using ShrinkOf = daemon::ShrinkOf;  // join_message.h
  // A rank joins a communicator whose unique id names root `root` (this daemon or another),
  // or, with `shrink`, the successor whose root the parent's span names.
  void join(const Session& session, uint32_t request_id, const CommToken& token, int nranks,
            int rank, uint32_t timeout_ms, const RootRef& root, const std::string& algorithm,
            const ShrinkOf* shrink = nullptr);
  // Fails joins whose time ran out; the joiners CommRendezvous expired are forgotten.
  void expire(std::chrono::steady_clock::time_point now);
  void forget_abandoned();
  std::optional<std::chrono::steady_clock::time_point> next_deadline() const;

  // A local rank of multi-node communicator `token` was refused with `code` (this node is
  // draining): its root fails the communicator for every node at once, naming why, rather
  // than their ranks waiting out their timeout.
  void refuse_join(const CommToken& token, const RootRef& root, plexus_result_t code,
                   const std::string& message);
  // A rank here revoked multi-node communicator `comm` (the engine failed its ops here): the
  // other nodes are told down a tree (CommRevokes).
  void revoke(std::shared_ptr<const Comm> comm, const std::string& text);
  // From the engine, on the control thread: the data link to `instance` is gone (the engine
  // failed every communicator with that node, and this daemon revokes each for the nodes
  // not linked to it); a path of it over local NIC `nic` failed (the link stays); a local
  // NIC came back.
  void data_link_lost(uint64_t instance);
  // The engine's link to `instance` closed its paths while idle (dormant): its rails are
  // forgotten, a later want dials again, and its daemon found gone (its control connection
  // refused) still fails it; found, that is, when a control message or the link's next use
  // meets it (an idle control connection closes too).
  void data_link_retired(uint64_t instance);
  // From the engine: a link to `instance` is needed and none is open (paths open on first
  // use): a data connection is opened to one of `addresses`.
  void path_wanted(uint64_t instance, const std::vector<std::string>& addresses);
  // `rail_key`: the rail this side dialled the path for ("" when the peer dialled it);
  // `pathless`: it was the link's last path (PeerServer::rail_lost).
  void data_path_lost(uint64_t instance, const std::string& nic, const std::string& remote,
                      const std::string& rail_key, bool pathless);
  void nic_up(const std::string& nic);

 private:
  void root_join(const NodeInfo& node, const CommToken& token, int nranks, std::vector<int> ranks,
                 uint32_t timeout_ms, const std::string& algorithm, const ShrinkOf* shrink);
  // At a shrink's root, once it waits: a control connection to each node it waits for
  // that has none.
  void probe(const NodeRendezvous::Successor& successor, const NodeSpan& span);
  // At the root: the topology goes down the tree (formed_tree.h) and to this node's ranks.
  void deliver_formed(const CommToken& token, const NodeRendezvous::Formed& formed,
                      const algo::LinkCost& cost);
  // Sends the topology to this node's children in its tree, and keeps it a while
  // (FormedRelay: a child lost before it passed it on has its children sent it from here).
  void forward_formed(const CommToken& token, const TopologyMessage& topology);
  // Sends the topology to the nodes at `to` (indexes into its nodes).
  void send_formed(const CommToken& token, const TopologyMessage& topology,
                   const std::vector<size_t>& to);
  void deliver_join_failed(uint64_t node, const CommToken& token, plexus_result_t code,
                           const std::string& message);
  // A JoinFailed to daemon `node`, over a control connection to one of `addresses`.
  void send_join_failed(uint64_t node, const std::vector<std::string>& addresses,
                        const CommToken& token, plexus_result_t code, const std::string& message);
  void on_formed(const CommToken& token, NodeRendezvous::Formed formed, const algo::LinkCost& cost);
  void fail_local_join(const CommToken& token, plexus_result_t code, const std::string& message);
  // At the root: a node refused its part of `token`.
  void root_refused(const CommToken& token, plexus_result_t code, const std::string& message);
  void on_peer_control(const transports::PeerIdentity& peer, kj::Array<capnp::word> words);
  void on_peer_control_lost(uint64_t instance, const std::string& name, const std::string& reason,
                            bool gone);
  void on_data_link(const transports::PeerIdentity& peer, transports::PathOpener open,
                    const std::string& nic, bool backup, bool latency, const std::string& rail_key);
  void on_data_failed(uint64_t instance, const std::string& reason);
  // Node `instance` is gone: rendezvous here with it in, or waiting for it, fail; and this
  // node's joins that wait for it as their root, with `why`.
  void drop_from_rendezvous(uint64_t instance);
  // Rendezvous that failed: logged, and each node to tell is told.
  void report_failures(const std::vector<NodeRendezvous::Failure>& failures);
  void drop_root(uint64_t instance, const std::string& why);
  // The communicator `token` here (`finished_too`: also one whose ranks here all left).
  std::shared_ptr<const Comm> find_comm(const CommToken& token, bool finished_too = false) const;
  NodeInfo my_node_info() const;
  // Whether the control connection to `instance` must stay open however quiet: this node's
  // ranks wait for it as their root, or a rendezvous here waits with it in.
  bool control_busy(uint64_t instance) const;
  algo::LinkCost comm_cost(const NodeRendezvous::Formed& formed) const;

  ControlConfig config_;
  Engine& engine_;
  CommRendezvous& rendezvous_;
  Hooks hooks_;
  uint64_t instance_id_ = 0;
  std::unique_ptr<transports::ClusterSecret> secret_;
  std::unique_ptr<PeerServer> peers_;
  NodeRendezvous node_rendezvous_;  // communicators whose root is this daemon
  struct MultiJoin {                // this node's ranks wait for their root
    RootRef root;
    int nranks = 0;
  };
  std::map<CommToken, MultiJoin> multi_joins_;
  std::set<uint64_t> data_links_;         // peers the engine has a path to (closed at once if gone)
  std::set<uint64_t> dormant_links_;      // peers whose link closed while idle (lost if gone)
  FormedRelay relay_;                     // topologies passed on lately, and tokens formed
  std::unique_ptr<CommRevokes> revokes_;  // with peers_
};

}  // namespace plexus::daemon
