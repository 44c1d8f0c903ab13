// The engine's side of multi-node communicators: the data links to peer daemons, frames
// from them routed to the running op (or held for a later one, or for a communicator this
// node has not formed yet), ops started in order and finished from the loop, send/recv
// between nodes, and failures told to every node so that nobody waits for a node that gave
// up. Engine thread only (but for NodeLinks' snapshots); it owns every field below, and
// asks the engine, through Hooks, only to end ops and to fail or advance a communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/engine/comm.h"
#include "daemon/engine/engine_config.h"
#include "daemon/engine/gpu_staging.h"
#include "daemon/engine/internode_state.h"
#include "daemon/engine/job_policies.h"
#include "daemon/engine/node_speeds.h"
#include "daemon/engine/op_watch.h"
#include "daemon/engine/session.h"
#include "daemon/engine/weight_relay.h"
#include "daemon/links/node_links.h"
#include "monitor/event_log.h"

namespace plexus::daemon {

class InternodeRunner {
 public:
  // Told on the engine thread about the data links to peer daemons.
  struct LinkEvents {
    std::function<void(uint64_t instance)> lost;  // the link is gone, with its last path
    // A path over local NIC `nic` to the peer's `remote` ("ip:port"; dialled for rail
    // `rail_key` or accepted, the latency class's or not) failed; the link stays
    // (NodeLinks::Handler::on_path_lost; `pathless`: it was the last path).
    std::function<void(uint64_t instance, const std::string& nic, const std::string& remote,
                       const std::string& rail_key, bool latency, bool pathless)>
        path_lost;
    std::function<void(const std::string& nic)> nic_up;  // a local NIC came back
    // A link to `instance` is needed and none is open: open a data connection to one of
    // `addresses` (the control thread's peer server); NodeLinks::open_failed if it cannot.
    std::function<void(uint64_t instance, const std::vector<std::string>& addresses)> wanted;
    // The link closed its paths while idle and stays, dormant: the control thread forgets
    // its rails (a connection is opened again through `wanted`); nothing failed.
    std::function<void(uint64_t instance)> retired;
    // A version of the weight relay `relay_id` came whole from another node (WeightRelay).
    std::function<void(uint64_t relay_id, std::shared_ptr<const weights::Version> version)>
        weights_arrived;
  };
  // What it asks of the engine.
  struct Hooks {
    // An op ends (Engine::complete: a GPU result goes back first).
    std::function<void(Session*, uint64_t user_data, plexus_result_t, const std::string&)> complete;
    // The communicator cannot go on (CommMatcher::fail, which calls comm_failed here).
    std::function<void(Comm&, plexus_result_t, const std::string& reason)> fail_comm;
    // The running op finished: the next may start (CommMatcher::run_ready).
    std::function<void(Comm&)> run_ready;
    // The engine's owning pointer to a session it serves, or null.
    std::function<std::shared_ptr<Session>(const Session*)> shared_session;
    // A whole message from another node for a rank here (CommMatcher::deliver_remote).
    std::function<void(Comm&, int destination, P2pMessage)> deliver_p2p;
    // A rank of another node left: recvs only it could satisfy fail
    // (CommMatcher::fail_orphaned_recvs).
    std::function<void(Comm&)> p2p_source_gone;
  };

  InternodeRunner(const EngineConfig& config, Hooks hooks, LinkEvents link_events, OpWatch& watch,
                  GpuStaging& gpu, monitor::EventLog& events);
  InternodeRunner(const InternodeRunner&) = delete;
  InternodeRunner& operator=(const InternodeRunner&) = delete;

  NodeLinks& links() { return links_; }
  JobPolicies& jobs() { return jobs_; }
  WeightRelay& weights() { return weights_; }

  // A communicator spanning nodes joins (before any of its ops), or every local rank left.
  void add(const std::shared_ptr<Comm>& comm);
  void retire(Comm& comm);
  // Starts `op`, the communicator's oldest collective, whose local parts have all arrived
  // and agree (one op between daemons at a time, in op order).
  void start_op(Comm& comm, PendingCollective& op);
  // A send to a rank of another node (recvs wait in Comm::p2p, whoever the source).
  void submit_p2p(Comm& comm, Contribution part);
  // Rank `rank` of this node left `comm` without breaking it: the other nodes are told.
  void send_departed(Comm& comm, int rank, const std::string& reason);
  // CommMatcher::fail marked `comm` broken (`first`: just now): its network part stops,
  // sends in flight fail, and (the first time) the other nodes are told why.
  void comm_failed(Comm& comm, bool first, const std::string& reason);
  // Fails `comm` from the engine loop (not inside a transport callback).
  void defer_failure(Comm& comm, const std::string& reason,
                     plexus_result_t status = PLEXUS_ERR_PEER_LOST);
  // The multi-node communicator comm_id, if this node is in it and has not retired it.
  Comm* find(uint64_t comm_id) const;
  // The daemon of node `node` of `comm`, with a link to it wanted now: paths open on first
  // use, so everything sent to a node goes through here (NodeLinks::want).
  uint64_t reach(const Comm& comm, int node);
  // A multi-node op of `comm` has finished its network rounds: looked at from the loop.
  void note_progress(const std::shared_ptr<Comm>& comm) { progress_.push_back(comm); }

  // From the engine loop: the links' I/O, then the communicators with work to look at.
  // Whether anything moved.
  bool poll();

 private:
  [[nodiscard]] std::string on_peer_frame(uint64_t peer,
                                          const transports::wire::DataFrameHeader& header,
                                          std::span<const std::byte> payload);
  // Large pieces of the running op's plain receives are read straight into its scratch.
  transports::Placement place_peer_frame(uint64_t peer,
                                         const transports::wire::DataFrameHeader& header);
  [[nodiscard]] std::string on_peer_frame_placed(uint64_t peer,
                                                 const transports::wire::DataFrameHeader& header);
  void on_peer_lost(uint64_t peer, const std::string& name, const std::string& reason);
  void run_progress();
  // Communicators whose hold for a speed change ended (NodeSpeeds).
  void resume_held();
  void finish_op(Comm& comm);
  void tell_peers_failed(Comm& comm, const std::string& reason);
  // `text`: as its node said it (relayed as is to the linked nodes that may not have heard).
  void remote_rank_departed(Comm& comm, int from, int rank, uint64_t collectives,
                            const std::string& text);
  // A node sent data for `comm`, which failed here, or linked to this node since: it is told
  // why, once.
  void tell_late_node(Comm& comm, int node);
  void on_peer_linked(uint64_t peer);
  // The queued collectives past comm.remote_limit (a departed rank never joined them) fail.
  void fail_unjoined(Comm& comm, const std::string& reason);
  // Drops the running collective; frames still being read into its ranks' buffers finish
  // into a sink (its clients are told it failed and may reuse those buffers at once).
  void stop_active_op(Comm& comm);
  // Send/recv between ranks on different nodes (internode_p2p.cc).
  std::string on_p2p_frame(Comm& comm, int node, const transports::wire::DataFrameHeader& h,
                           std::span<const std::byte> payload);
  // A message of the pair `key` is whole; then the pair's whole messages go, in order, to
  // matching.
  void complete_inbound(Comm& comm, uint64_t key, InboundMessage& in);
  void deliver_inbound(Comm& comm, uint64_t key);
  void fail_remote_p2p(Comm& comm);
  static int node_of(const Comm& comm, uint64_t instance);
  // Whether `node` of `comm` gets a notice (not this node, and a link to it, dormant or not:
  // reached, so a dormant one opens again).
  bool told(Comm& comm, size_t node);
  // Whether this node waits on node `peer` now: a running op's plan exchanges with it, or a
  // recv waits for one of its ranks (its link stays open while idle: LinksHandler::busy).
  bool waits_on(uint64_t peer) const;
  // `peer`'s addresses, from a communicator it is a member of (empty: none).
  std::vector<std::string> addresses_of(uint64_t peer) const;

  std::string name_;  // this node's, for messages
  Hooks hooks_;
  LinkEvents link_events_;
  OpWatch& watch_;
  GpuStaging& gpu_;
  monitor::EventLog& events_;
  NodeLinks links_;
  JobPolicies jobs_;     // the links' flows' policies
  NodeSpeeds speeds_;    // the nodes' agreed speeds
  WeightRelay weights_;  // versions of models between nodes, over links_
  std::unordered_map<uint64_t, std::shared_ptr<Comm>> comm_by_id_;  // multi-node comms
  std::vector<uint64_t> retired_ids_;  // recent comm ids whose stray frames are dropped
  // (comm id, peer) pairs told that this node left that communicator (bounded as above).
  std::vector<std::pair<uint64_t, uint64_t>> told_retired_;
  std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, HeldFrame>>> unknown_frames_;
  size_t unknown_bytes_ = 0;
  std::vector<std::shared_ptr<Comm>> progress_;  // comms with internode work to look at
  std::vector<std::weak_ptr<Comm>> resume_;      // comms that may start their next op again
};

}  // namespace plexus::daemon
