// The control thread's side of multi-node communicators (node_joins.h).
#include "daemon/control/node_joins.h"

#include <sys/random.h>
#include <unistd.h>

#include <capnp/serialize.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "common/frame_codec.h"
#include "daemon/control/comm_successor.h"
#include "daemon/control/formed_message.h"
#include "daemon/control/formed_tree.h"
#include "daemon/control/join_failure.h"
#include "daemon/control/node_control.capnp.h"

namespace plexus::daemon {
namespace {

namespace nc = node_control;
using Clock = std::chrono::steady_clock;

// Ranks' requested timeouts are capped; a missing root is noticed a little after the
// root itself would have timed the communicator out, so its sentence arrives first.
constexpr auto kRootGrace = std::chrono::seconds(2);

kj::ArrayPtr<const kj::byte> bytes_of(const CommToken& token) {
  return kj::arrayPtr(token.data(), token.size());
}

uint64_t comm_id_of(const CommToken& token) {
  uint64_t id = 0;
  std::memcpy(&id, token.data(), sizeof(id));
  return id;
}

}  // namespace

NodeJoins::NodeJoins(const ControlConfig& config, Engine& engine, CommRendezvous& rendezvous,
                     Hooks hooks)
    : config_(config), engine_(engine), rendezvous_(rendezvous), hooks_(std::move(hooks)) {}

void NodeJoins::start(uv_loop_t* loop) {
  while (instance_id_ == 0) {
    if (::getrandom(&instance_id_, sizeof(instance_id_), 0) != sizeof(instance_id_)) {
      throw std::runtime_error("getrandom failed");
    }
  }
  if (config_.peer_listen.empty()) return;
  if (!config_.cluster_secret_file.empty()) {
    secret_ = std::make_unique<transports::ClusterSecret>(
        transports::ClusterSecret::load(config_.cluster_secret_file));
  } else {
    spdlog::warn(
        "accepting peer daemons without a cluster secret (--cluster-secret-file): any "
        "host that reaches {} can join this daemon's communicators",
        config_.peer_listen);
  }
  transports::PeerIdentity me;
  me.instance_id = instance_id_;
  me.node_name = config_.node_name;
  PeerServer::Callbacks callbacks;
  callbacks.on_control = [this](const transports::PeerIdentity& peer, kj::Array<capnp::word> w) {
    on_peer_control(peer, std::move(w));
  };
  callbacks.on_control_lost = [this](uint64_t id, const std::string& name,
                                     const std::string& reason,
                                     bool gone) { on_peer_control_lost(id, name, reason, gone); };
  callbacks.on_data_link = [this](const transports::PeerIdentity& peer, transports::PathOpener open,
                                  const std::string& nic, bool backup, bool latency,
                                  const std::string& rail_key) {
    on_data_link(peer, std::move(open), nic, backup, latency, rail_key);
  };
  callbacks.on_data_failed = [this](uint64_t id, const std::string& reason) {
    on_data_failed(id, reason);
  };
  callbacks.control_busy = [this](uint64_t id) { return control_busy(id); };
  peers_ = std::make_unique<PeerServer>(loop, std::move(me), secret_.get(), config_.peers,
                                        std::move(callbacks));
  peers_->listen(config_.peer_listen);
  revokes_ = std::make_unique<CommRevokes>(
      instance_id_,
      CommRevokes::Hooks{
          .send =
              [this](uint64_t instance, const std::vector<std::string>& addresses,
                     capnp::MessageBuilder& message) {
                peers_->send_control(instance, addresses, message);
              },
          .revoked =
              [this](uint64_t comm_id, const std::string& text, plexus_result_t code) {
                engine_.post(
                    [comm_id, text, code](Engine& e) { e.revoke_remote(comm_id, text, code); });
              }},
      config_.connect_timeout);
}

std::shared_ptr<const Comm> NodeJoins::find_comm(const CommToken& token, bool finished_too) const {
  for (const auto& comm : hooks_.comms()) {
    if (comm->token() == token && (finished_too || !comm->finished.load())) return comm;
  }
  return nullptr;
}

void NodeJoins::revoke(std::shared_ptr<const Comm> comm, const std::string& text) {
  if (revokes_) revokes_->revoke(std::move(comm), text, PLEXUS_ERR_REVOKED);
}

void NodeJoins::close() {
  if (peers_) peers_->close();
}

bool NodeJoins::control_busy(uint64_t instance) const {
  for (const auto& [token, join] : multi_joins_) {
    if (join.root.instance == instance) return true;
  }
  return node_rendezvous_.involves(instance);
}

NodeInfo NodeJoins::my_node_info() const {
  const auto& me = peers_->identity();
  return NodeInfo{me.instance_id, me.node_name, me.addresses};
}

void NodeJoins::join(const Session& session, uint32_t request_id, const CommToken& token,
                     int nranks, int rank, uint32_t timeout_ms, const RootRef& root,
                     const std::string& algorithm, const ShrinkOf* shrink) {
  const uint64_t id = session.id();
  if (peers_ == nullptr) {
    hooks_.send_error(
        id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
        "communicator " + token_prefix(token) +
            " was created on another node's plexusd, and this plexusd does not accept "
            "peer daemons (start it with --peer-listen on every node)");
    return;
  }
  if (root.instance != instance_id_ && root.addresses.empty()) {
    hooks_.send_error(
        id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
        "communicator " + token_prefix(token) +
            "'s unique id was made on a node whose plexusd accepts no peer daemons (start "
            "plexusd with --peer-listen on every node)");
    return;
  }
  if (algorithm.size() > 32 || (!algorithm.empty() && !algo::parse_algorithm(algorithm))) {
    hooks_.send_error(
        id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
        "PLEXUS_ALGO='" + algorithm.substr(0, 32) +
            "' is not an algorithm (ring, rhd, rd, bruck, binomial, chain, pairwise)");
    return;
  }
  CommRendezvous::Joiner joiner{id,
                                session.creds().pid,
                                request_id,
                                rank,
                                Clock::now() + std::chrono::milliseconds(timeout_ms) + kRootGrace,
                                root.instance};
  auto result = rendezvous_.join(token, nranks, joiner, /*form_when_complete=*/false);
  if (result.outcome == CommRendezvous::JoinResult::kRejected) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT, result.error);
    return;
  }
  multi_joins_.try_emplace(token, MultiJoin{root, nranks});
  if (root.instance == instance_id_) {
    root_join(my_node_info(), token, nranks, {rank}, timeout_ms, algorithm, shrink);
  } else {
    capnp::MallocMessageBuilder message;
    write_join(message.initRoot<nc::NodeMessage>().initJoin(),
               JoinMessage{token,
                           nranks,
                           {rank},
                           timeout_ms,
                           algorithm,
                           shrink != nullptr ? std::optional<ShrinkOf>(*shrink) : std::nullopt});
    peers_->send_control(root.instance, root.addresses, message);
  }
  hooks_.arm_timer();
}

void NodeJoins::root_join(const NodeInfo& node, const CommToken& token, int nranks,
                          std::vector<int> ranks, uint32_t timeout_ms, const std::string& algorithm,
                          const ShrinkOf* shrink) {
  std::optional<NodeRendezvous::Successor> made;
  const NodeRendezvous::Successor* successor = nullptr;
  std::shared_ptr<const Comm> parent;
  // One refused already is refused again, whatever became of its parent here meanwhile.
  if (shrink != nullptr && !node_rendezvous_.refused(token)) {
    // The first join works the successor out from the parent; later ones of the same list
    // (which the token follows from) find it waiting.
    successor = node_rendezvous_.pending_successor(token);
    if (successor == nullptr || successor->parent != shrink->parent ||
        successor->excluded != shrink->excluded) {
      parent = find_comm(shrink->parent);
      auto here = successor_for(parent.get(), shrink->parent, shrink->excluded, token, nranks,
                                config_.node_name);
      if (!here.ok()) {
        deliver_join_failed(node.instance_id, token, PLEXUS_ERR_INVALID_ARGUMENT, here.error());
        return;
      }
      made = here.take();
      successor = &*made;
    }
  }
  const bool first = !node_rendezvous_.waiting(token);
  NodeRendezvous::Join join{node, std::move(ranks),
                            Clock::now() + std::chrono::milliseconds(timeout_ms), algorithm};
  auto result = node_rendezvous_.join(token, nranks, join, successor);
  switch (result.outcome) {
    case NodeRendezvous::Result::kWaiting:
      if (made && first) probe(*made, *parent->span());
      hooks_.arm_timer();
      return;
    case NodeRendezvous::Result::kRejected:
      spdlog::warn("communicator {}: {}", token_prefix(token), result.error);
      for (uint64_t n : result.notify) deliver_join_failed(n, token, result.code, result.error);
      if (const auto& other = result.other) {
        for (uint64_t n : other->notify)
          deliver_join_failed(n, other->token, other->code, other->message);
      }
      return;
    case NodeRendezvous::Result::kFormed: {
      const algo::LinkCost cost = comm_cost(result.formed);
      // The cost model's inputs: every node picks its algorithms from these.
      spdlog::info(
          "communicator {} formed across {} node(s) with {} ranks (path latency {:.0f} us, "
          "{:.0f} Mbit/s)",
          token_prefix(token), result.formed.nodes.size(), nranks, cost.alpha_s * 1e6,
          8.0 / cost.beta_s_per_byte / 1e6);
      deliver_formed(token, result.formed, cost);
      return;
    }
  }
}

void NodeJoins::probe(const NodeRendezvous::Successor& successor, const NodeSpan& span) {
  // A node the shrink waits for that is gone already is found now, not at the timeout: a
  // control connection to it is refused (on_peer_control_lost); one to a live node stays
  // open while the rendezvous waits (control_busy). After the rendezvous exists, so that a
  // refusal found at once has something to fail.
  capnp::MallocMessageBuilder message;
  message.initRoot<nc::NodeMessage>().setProbe();
  for (size_t n = 0; n < span.node_ids.size(); ++n) {
    const uint64_t id = span.node_ids[n];
    if (id == instance_id_ || successor.expected.count(id) == 0 ||
        peers_->control_peer(id) != nullptr) {
      continue;
    }
    peers_->send_control(id, span.node_addresses[n], message);
  }
}

algo::LinkCost NodeJoins::comm_cost(const NodeRendezvous::Formed& formed) const {
  // Latency: half the slowest round trip to a member on its control connection (the kernel's
  // smallest, else the handshakes': control_round_trip_s), at least 20 us; bandwidth: the
  // slowest member's fastest advertised NIC (10 Gbit/s when unknown). Computed once here so
  // every node picks alike.
  algo::LinkCost cost;
  double alpha = 0;
  uint32_t slowest_mbps = 0;
  for (const auto& node : formed.nodes) {
    alpha = std::max(alpha, peers_->control_round_trip_s(node.instance_id) / 2);
    const transports::PeerIdentity* id = node.instance_id == instance_id_
                                             ? &peers_->identity()
                                             : peers_->control_peer(node.instance_id);
    uint32_t fastest = 0;
    if (id != nullptr) {
      for (const auto& nic : id->nics) fastest = std::max(fastest, nic.speed_mbps);
    }
    if (fastest == 0) fastest = 10000;
    slowest_mbps = slowest_mbps == 0 ? fastest : std::min(slowest_mbps, fastest);
  }
  cost.alpha_s = std::max(alpha, 20e-6);
  cost.beta_s_per_byte = 8.0 / (static_cast<double>(slowest_mbps) * 1e6);
  return cost;
}

void NodeJoins::deliver_formed(const CommToken& token, const NodeRendezvous::Formed& formed,
                               const algo::LinkCost& cost) {
  relay_.seen_before(token);
  forward_formed(token, TopologyMessage{formed, cost, instance_id_, kFormedFanout});
  // A root that holds no rank of it (the unique id was made here) only passes it on.
  for (const auto& node : formed.nodes) {
    if (node.instance_id == instance_id_) {
      on_formed(token, formed, cost);
      return;
    }
  }
}

void NodeJoins::forward_formed(const CommToken& token, const TopologyMessage& topology) {
  const std::vector<size_t> children = topology.children_of(instance_id_);
  send_formed(token, topology, children);
  relay_.passed_on(token, topology, children, Clock::now() + config_.connect_timeout);
}

void NodeJoins::send_formed(const CommToken& token, const TopologyMessage& topology,
                            const std::vector<size_t>& to) {
  if (to.empty() || !peers_) return;
  capnp::MallocMessageBuilder message;
  auto f = message.initRoot<nc::NodeMessage>().initFormed();
  f.setToken(bytes_of(token));
  write_formed(f, topology);
  for (size_t n : to) {
    const NodeInfo& node = topology.formed.nodes[n];
    peers_->send_control(node.instance_id, node.addresses, message);
  }
}

void NodeJoins::refuse_join(const CommToken& token, const RootRef& root, plexus_result_t code,
                            const std::string& message) {
  if (root.instance == instance_id_) {
    root_refused(token, code, message);
    return;
  }
  if (!peers_ || root.instance == 0 || root.addresses.empty()) return;
  send_join_failed(root.instance, root.addresses, token, code, message);
}

void NodeJoins::send_join_failed(uint64_t node, const std::vector<std::string>& addresses,
                                 const CommToken& token, plexus_result_t code,
                                 const std::string& message) {
  capnp::MallocMessageBuilder m;
  auto failed = m.initRoot<nc::NodeMessage>().initJoinFailed();
  failed.setToken(bytes_of(token));
  failed.setMessage(message);
  failed.setCode(static_cast<uint32_t>(code));
  peers_->send_control(node, addresses, m);
}

void NodeJoins::root_refused(const CommToken& token, plexus_result_t code,
                             const std::string& message) {
  if (auto failure = node_rendezvous_.refuse(token, code, message)) {
    for (uint64_t n : failure->notify) {
      deliver_join_failed(n, token, failure->code, failure->message);
    }
  }
  hooks_.arm_timer();
}

void NodeJoins::deliver_join_failed(uint64_t node, const CommToken& token, plexus_result_t code,
                                    const std::string& message) {
  if (node == instance_id_) {
    fail_local_join(token, code, message);
    return;
  }
  const transports::PeerIdentity* peer = peers_->control_peer(node);
  if (peer == nullptr) return;  // it went away; it fails its own ranks
  send_join_failed(node, peer->addresses, token, code, message);
}

void NodeJoins::fail_local_join(const CommToken& token, plexus_result_t code,
                                const std::string& message) {
  const std::string text = "communicator " + token_prefix(token) + ": " + message;
  for (const auto& joiner : rendezvous_.take(token)) {
    hooks_.send_error(joiner.session_id, joiner.request_id, code, text);
  }
  multi_joins_.erase(token);
}

void NodeJoins::on_formed(const CommToken& token, NodeRendezvous::Formed formed,
                          const algo::LinkCost& cost) {
  // Formed even when every local rank of it went away meanwhile: the engine then fails it
  // and tells the other nodes, which would otherwise wait for this node's data.
  const int nranks = static_cast<int>(formed.rank_node.size());
  multi_joins_.erase(token);
  if (formed.nodes.size() == 1) {
    hooks_.form_comm(token, nranks, rendezvous_.take(token), std::nullopt);
    return;
  }
  // No data connection opens here: the engine opens each when an op first sends to that
  // node (InternodeRunner::reach), so a node holds connections only to the nodes its plans
  // talk to, not to every member.
  NodeSpan span;
  for (size_t n = 0; n < formed.nodes.size(); ++n) {
    span.topology.node_names.push_back(formed.nodes[n].name);
    span.node_ids.push_back(formed.nodes[n].instance_id);
    span.node_addresses.push_back(std::move(formed.nodes[n].addresses));
    if (formed.nodes[n].instance_id == instance_id_) span.topology.my_node = static_cast<int>(n);
  }
  span.topology.rank_node = std::move(formed.rank_node);
  span.topology.finish();
  span.comm_id = comm_id_of(token);
  span.cost = cost;
  span.forced = formed.algorithm.empty() ? std::nullopt : algo::parse_algorithm(formed.algorithm);
  span.open_timeout = config_.connect_timeout;
  hooks_.form_comm(token, nranks, rendezvous_.take(token), std::move(span));
  // A revoke that overtook the Formed (it came down another route) takes effect now: the
  // engine holds the communicator before it hears (its queue is in order).
  if (revokes_) {
    if (auto comm = find_comm(token)) revokes_->formed(comm);
  }
}

void NodeJoins::on_peer_control(const transports::PeerIdentity& peer,
                                kj::Array<capnp::word> words) {
  try {
    capnp::FlatArrayMessageReader reader(words, common::untrusted_reader_options());
    auto message = reader.getRoot<nc::NodeMessage>();
    switch (message.which()) {
      case nc::NodeMessage::JOIN: {
        auto join = read_join(message.getJoin());
        if (!join.ok()) {
          spdlog::warn("node {}: {} ignored", peer.node_name, join.error());
          return;
        }
        root_join(NodeInfo{peer.instance_id, peer.node_name, peer.addresses}, join->token,
                  join->nranks, join->ranks, join->timeout_ms, join->algorithm,
                  join->shrink ? &*join->shrink : nullptr);
        return;
      }
      case nc::NodeMessage::FORMED: {
        auto f = message.getFormed();
        if (f.getToken().size() != sizeof(CommToken)) return;
        const CommToken token = token_of(f.getToken());
        auto join = multi_joins_.find(token);
        // It comes down the tree from the root (formed_tree.h): the root it names must be the
        // one this node's ranks joined, and whoever passed it on a member.
        if (join != multi_joins_.end() && join->second.root.instance != f.getRoot()) {
          spdlog::warn("node {} sent a topology for communicator {} from a root it does not have",
                       peer.node_name, token_prefix(token));
          return;
        }
        auto topology = read_formed(f, instance_id_, peer.instance_id);
        if (!topology.ok()) {
          fail_local_join(token, PLEXUS_ERR_PROTOCOL,
                          "node " + peer.node_name +
                              " sent a topology that cannot be used: " + topology.error());
          return;
        }
        // Once: it may come again from a node that took a lost parent's place.
        if (relay_.seen_before(token)) return;
        // On down the tree first: the nodes below wait on this one, whatever its own ranks do.
        forward_formed(token, *topology);
        if (std::string problem = local_problem(
                *topology, join != multi_joins_.end() ? std::optional<int>(join->second.nranks)
                                                      : std::nullopt);
            !problem.empty()) {
          fail_local_join(token, PLEXUS_ERR_PROTOCOL,
                          "node " + peer.node_name +
                              " sent a topology this node's ranks cannot use: " + problem);
          return;
        }
        on_formed(token, std::move(topology->formed), topology->cost);
        return;
      }
      case nc::NodeMessage::WEIGHTS_SUBSCRIBE: {
        auto sub = message.getWeightsSubscribe();
        if (on_weights_subscribe) on_weights_subscribe(peer, sub.getRelayId(), sub.getHave());
        return;
      }
      case nc::NodeMessage::PROBE:
        return;
      case nc::NodeMessage::REVOKE: {
        auto revoke = message.getRevoke();
        if (revoke.getToken().size() != sizeof(CommToken) || !revokes_) return;
        revokes_->on_revoke(peer, revoke, find_comm(token_of(revoke.getToken()), true));
        return;
      }
      case nc::NodeMessage::JOIN_FAILED: {
        auto failed = message.getJoinFailed();
        if (failed.getToken().size() != sizeof(CommToken)) return;
        const CommToken token = token_of(failed.getToken());
        auto join = multi_joins_.find(token);
        std::string text = failed.getMessage().cStr();
        if (text.size() > 1024) text.resize(1024);
        const plexus_result_t code = join_failure_code(failed.getCode(), text);
        if (join == multi_joins_.end() || join->second.root.instance == instance_id_) {
          // This node is its root (or not waiting on another): a node that refused its part.
          root_refused(token, code, text);
          return;
        }
        if (join->second.root.instance != peer.instance_id) return;
        fail_local_join(token, code, text);
        return;
      }
      default:
        spdlog::warn("node {}: unknown control message ignored", peer.node_name);
        return;
    }
  } catch (const kj::Exception& e) {
    spdlog::warn("node {}: malformed control message ignored: {}", peer.node_name,
                 e.getDescription().cStr());
  }
}

void NodeJoins::on_peer_control_lost(uint64_t instance, const std::string& name,
                                     const std::string& reason, bool gone) {
  // A node this one passed a topology on to is lost, perhaps before it passed it on: the
  // nodes below it get it from here.
  for (const auto& resend : relay_.lost(instance, Clock::now())) {
    spdlog::info("communicator {}: {} lost; the topology goes to the {} node(s) below it from here",
                 token_prefix(resend.token), name, resend.to.size());
    send_formed(resend.token, resend.message, resend.to);
  }
  if (revokes_) revokes_->lost(instance);
  // A daemon that refuses connections is gone: its data link need not wait out the grace on
  // silent paths. One merely unreachable for control may still carry data on a path the
  // control connection cannot take (a backup bound to its NIC across rails): its data link
  // keeps its own watch. Joins waiting on it fail either way: they need control messages.
  // A dormant link has no path to keep a watch of its own: any loss of control fails it.
  if ((gone && data_links_.count(instance) != 0) || dormant_links_.count(instance) != 0) {
    dormant_links_.erase(instance);
    engine_.post([instance, text = "its daemon's control connection closed: " + reason](Engine& e) {
      e.links().peer_gone(instance, text);
    });
  }
  drop_from_rendezvous(instance);
  drop_root(instance,
            "lost the root daemon (" + name + ") before the communicator formed: " + reason);
}

void NodeJoins::drop_root(uint64_t instance, const std::string& why) {
  std::vector<CommToken> waiting;
  for (const auto& [token, join] : multi_joins_) {
    if (join.root.instance == instance) waiting.push_back(token);
  }
  for (const auto& token : waiting) fail_local_join(token, PLEXUS_ERR_PEER_LOST, why);
}

void NodeJoins::drop_from_rendezvous(uint64_t instance) {
  report_failures(node_rendezvous_.drop_node(instance));
}

void NodeJoins::report_failures(const std::vector<NodeRendezvous::Failure>& failures) {
  for (const auto& failure : failures) {
    spdlog::warn("communicator {}: {}", token_prefix(failure.token), failure.message);
    for (uint64_t n : failure.notify) {
      deliver_join_failed(n, failure.token, failure.code, failure.message);
    }
  }
}

void NodeJoins::expire(Clock::time_point now) { report_failures(node_rendezvous_.expire(now)); }

std::optional<Clock::time_point> NodeJoins::next_deadline() const {
  return node_rendezvous_.next_deadline();
}

void NodeJoins::forget_abandoned() {
  std::erase_if(multi_joins_, [&](const auto& entry) { return !rendezvous_.has(entry.first); });
}

}  // namespace plexus::daemon
