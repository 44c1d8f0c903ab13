// The weight store across nodes: keys, subscriptions, and the versions the engine's relay
// carries (daemon/engine/weight_relay.h). The publisher's daemon keeps the nodes subscribed to
// each model it advertises (the chain a version goes down: what the relay needs, nothing per
// other peer); a subscriber's daemon keeps which local model each relay id fills.
#include <spdlog/spdlog.h>

#include <cstring>

#include "daemon/control/daemon_reply.h"
#include "daemon/control/node_control.capnp.h"
#include "daemon/control/weight_service.h"

namespace plexus::daemon {

namespace control = shm::control;

namespace {

// Subscribed nodes one model's chain holds.
constexpr size_t kMaxSubscribers = 4096;

// A key's relay id: its token folded to 64 bits (0: not a token).
uint64_t relay_id_of(capnp::Data::Reader token) {
  if (token.size() != 16) return 0;
  uint64_t a = 0, b = 0;
  std::memcpy(&a, token.begin(), 8);
  std::memcpy(&b, token.begin() + 8, 8);
  return (a ^ b) == 0 ? 1 : a ^ b;
}

}  // namespace

void WeightService::advertise(const Session& session, uint32_t request_id,
                              control::WeightsKey::Reader key) {
  const std::string model = key.getModel();
  const uint64_t relay_id = relay_id_of(key.getToken());
  std::string why = check_model_name(model);
  if (why.empty() && relay_id == 0) why = "the key's token is not 16 bytes";
  if (why.empty()) why = store_.refuse_reader(model, session.creds().uid);
  const uint32_t uid = session.creds().uid;
  if (auto bound = published_.find(relay_id);
      why.empty() && bound != published_.end() &&
      (bound->second.model != model || bound->second.uid != uid)) {
    why = "the key names model '" + bound->second.model + "' here already";
  }
  if (why.empty() && published_.count(relay_id) == 0 && published_.size() >= weights::kMaxModels) {
    why = "this node advertises " + std::to_string(published_.size()) + " models already";
  }
  if (!why.empty()) {
    hooks_.send_error(session.id(), request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "the key of model '" + model + "': " + why);
    return;
  }
  Published& p = published_[relay_id];
  p.model = model;
  p.uid = uid;
  capnp::MallocMessageBuilder reply;
  daemon_reply(reply, request_id).setWeightsAdvertiseReply();
  hooks_.reply(session.id(), reply);
}

void WeightService::subscribe(const Session& session, uint32_t request_id,
                              control::WeightsKey::Reader key) {
  const std::string model = key.getModel();
  const uint64_t relay_id = relay_id_of(key.getToken());
  const uint32_t uid = session.creds().uid;
  std::string why = check_model_name(model);
  if (why.empty() && relay_id == 0) why = "the key's token is not 16 bytes";
  if (why.empty() && key.getRootInstance() == 0) {
    why = "the key names no daemon (it was made where no plexusd answered)";
  }
  if (why.empty() && hooks_.instance_id && key.getRootInstance() == hooks_.instance_id()) {
    why = "the key is this node's own: pull the model by its name here";
  }
  if (why.empty()) why = store_.refuse_reader(model, uid);
  if (auto bound = replicas_.find(relay_id);
      why.empty() && bound != replicas_.end() &&
      (bound->second.model != model || bound->second.uid != uid)) {
    why = "the key is subscribed here as model '" + bound->second.model + "' already";
  }
  if (why.empty() && replicas_.count(relay_id) == 0 && replicas_.size() >= weights::kMaxModels) {
    why = "this node holds " + std::to_string(replicas_.size()) + " replicas already";
  }
  if (!why.empty()) {
    hooks_.send_error(session.id(), request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "subscribing model '" + model + "': " + why);
    return;
  }
  // Accepted before the publisher hears of it: its first frames find the engine ready.
  if (hooks_.engine) hooks_.engine([relay_id](Engine& e) { e.weights().accept(relay_id); });
  std::vector<std::string> addresses;
  for (auto a : key.getRootAddresses()) addresses.push_back(a);
  capnp::MallocMessageBuilder message;
  auto sub = message.initRoot<node_control::NodeMessage>().initWeightsSubscribe();
  sub.setRelayId(relay_id);
  sub.setHave(store_.latest(model));
  if (!hooks_.send_node || !hooks_.send_node(key.getRootInstance(), addresses, message)) {
    hooks_.send_error(session.id(), request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "subscribing model '" + model +
                          "': this daemon serves no other nodes (plexusd --peer-listen)");
    return;
  }
  replicas_[relay_id] = Replica{.model = model, .uid = uid};
  capnp::MallocMessageBuilder reply;
  daemon_reply(reply, request_id).setWeightsSubscribeReply(store_.latest(model));
  hooks_.reply(session.id(), reply);
}

void WeightService::on_node_subscribe(const transports::PeerIdentity& peer, uint64_t relay_id,
                                      uint64_t have) {
  auto it = published_.find(relay_id);
  if (it == published_.end()) {
    spdlog::warn("weights: node {} subscribed to a model not advertised here (relay {:016x})",
                 peer.node_name, relay_id);
    return;
  }
  auto& chain = it->second.subscribers;
  // A node that comes back (a new daemon) takes its old place's: by name.
  std::erase_if(chain, [&](const WeightRelay::NodeRef& n) {
    return n.instance == peer.instance_id || n.name == peer.node_name;
  });
  if (chain.size() >= kMaxSubscribers) {
    spdlog::warn("weights: node {} not subscribed to model '{}': {} nodes are", peer.node_name,
                 it->second.model, chain.size());
    return;
  }
  WeightRelay::NodeRef node{
      .instance = peer.instance_id, .name = peer.node_name, .addresses = peer.addresses};
  chain.push_back(node);
  spdlog::info("weights: node {} subscribed to model '{}' ({} node(s))", peer.node_name,
               it->second.model, chain.size());
  // A late joiner, or a node back: the newest version now, from this node's own copy.
  std::shared_ptr<const weights::Version> newest = store_.find(it->second.model, 0);
  if (!newest || newest->number <= have || !hooks_.engine) return;
  hooks_.engine(
      [relay_id, newest, node](Engine& e) { e.weights().push(relay_id, newest, {node}); });
}

void WeightService::push_to_subscribers(const std::string& model) {
  for (const auto& [relay_id, p] : published_) {
    if (p.model != model || p.subscribers.empty() || !hooks_.engine) continue;
    std::shared_ptr<const weights::Version> newest = store_.find(model, 0);
    if (!newest) return;
    hooks_.engine([relay_id = relay_id, newest, chain = p.subscribers](Engine& e) {
      e.weights().push(relay_id, newest, chain);
    });
  }
}

void WeightService::arrived(uint64_t relay_id, std::shared_ptr<const weights::Version> version) {
  auto it = replicas_.find(relay_id);
  if (it == replicas_.end()) return;  // not subscribed (any more)
  const std::string model = it->second.model;
  const uint64_t number = version->number;
  if (!store_.adopt(model, it->second.uid, std::move(version))) return;  // late, or twice
  spdlog::info("weights: version {} of model '{}' arrived from another node", number, model);
  serve_waiters(model);
  // A replica may be published on from here too (a tier of its own).
  push_to_subscribers(model);
}

}  // namespace plexus::daemon
