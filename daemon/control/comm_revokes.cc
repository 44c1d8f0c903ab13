#include "daemon/control/comm_revokes.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "daemon/control/formed_tree.h"

namespace plexus::daemon {
namespace {

namespace nc = node_control;

size_t index_in(const NodeSpan& span, uint64_t instance) {
  for (size_t n = 0; n < span.node_ids.size(); ++n) {
    if (span.node_ids[n] == instance) return n;
  }
  return span.node_ids.size();
}

}  // namespace

size_t RevokeNotice::index_of(uint64_t instance) const { return index_in(*comm->span(), instance); }

std::vector<size_t> RevokeNotice::children_of(uint64_t instance) const {
  return formed_children(comm->span()->node_ids.size(), origin, index_of(instance), fanout);
}

CommRevokes::CommRevokes(uint64_t me, Hooks hooks, std::chrono::milliseconds keep)
    : me_(me), hooks_(std::move(hooks)), keep_(keep) {}

void CommRevokes::revoke(std::shared_ptr<const Comm> comm, const std::string& text,
                         plexus_result_t code, uint64_t lost) {
  if (!comm || !comm->span()) return;
  if (relay_.seen_before(comm->token())) return;  // told already, by this node or another
  RevokeNotice notice{comm, text, code, index_in(*comm->span(), me_), kFormedFanout};
  pass_on(notice, lost);
}

void CommRevokes::on_revoke(const transports::PeerIdentity& peer, nc::Revoke::Reader revoke,
                            std::shared_ptr<const Comm> comm) {
  Received r;
  r.from = peer.instance_id;
  r.from_name = peer.node_name;
  r.origin = revoke.getOrigin();
  r.fanout = revoke.getFanout();
  r.text = revoke.getText().cStr();
  if (r.text.size() > 1024) r.text.resize(1024);
  r.code = revoke.getCode() == PLEXUS_ERR_PEER_LOST ? PLEXUS_ERR_PEER_LOST : PLEXUS_ERR_REVOKED;
  if (comm) {
    accept(comm, r);
    return;
  }
  // Not formed here yet (or left long ago): kept a while for formed().
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(early_, [&](const auto& e) { return e.second.until <= now; });
  if (early_.size() >= kMaxEarlyRevokes || revoke.getToken().size() != sizeof(CommToken)) return;
  CommToken token{};
  std::memcpy(token.data(), revoke.getToken().begin(), token.size());
  // Each peer holds a few places at most (one naming made-up tokens cannot crowd the members'
  // out), and the same revoke from it again holds none more.
  size_t from_peer = 0;
  for (const auto& [t, kept] : early_) {
    if (kept.from != r.from) continue;
    if (t == token && kept.origin == r.origin) return;
    ++from_peer;
  }
  if (from_peer >= kMaxEarlyRevokesPerPeer) return;
  r.until = now + keep_;
  early_.emplace(token, std::move(r));
}

void CommRevokes::formed(const std::shared_ptr<const Comm>& comm) {
  // Each kept for it in turn (a stranger's first does not hide a member's), until one holds.
  auto [first, last] = early_.equal_range(comm->token());
  std::vector<Received> kept;
  for (auto it = first; it != last; ++it) kept.push_back(std::move(it->second));
  early_.erase(first, last);
  const auto now = std::chrono::steady_clock::now();
  for (const Received& r : kept) {
    if (r.until > now && accept(comm, r)) return;
  }
}

bool CommRevokes::accept(const std::shared_ptr<const Comm>& comm, const Received& r) {
  // A peer's message: only a member may revoke a communicator, from a node of it.
  if (!comm->span()) return false;
  const NodeSpan& span = *comm->span();
  const size_t origin = index_in(span, r.origin);
  if (origin == span.node_ids.size() || index_in(span, r.from) == span.node_ids.size() ||
      r.fanout == 0 || r.fanout > kMaxFormedFanout) {
    spdlog::warn("node {}: a revoke of communicator {} that names no node of it ignored",
                 r.from_name, token_prefix(comm->token()));
    return false;
  }
  if (relay_.seen_before(comm->token())) return true;
  // On down the tree first: the nodes below wait on this one, whatever its engine does.
  pass_on(RevokeNotice{comm, r.text, r.code, origin, r.fanout}, 0);
  hooks_.revoked(span.comm_id, r.text, r.code);
  return true;
}

void CommRevokes::pass_on(const RevokeNotice& notice, uint64_t lost) {
  const std::vector<size_t> to = targets(notice, notice.children_of(me_), lost);
  relay_.passed_on(notice.comm->token(), notice, to, std::chrono::steady_clock::now() + keep_);
  send(notice, to);
}

std::vector<size_t> CommRevokes::targets(const RevokeNotice& notice, std::vector<size_t> to,
                                         uint64_t lost) const {
  const NodeSpan& span = *notice.comm->span();
  // Bounded by the span: each index is visited once, and a lost node's place is taken by
  // its children.
  std::vector<size_t> out;
  for (size_t i = 0; i < to.size() && i < span.node_ids.size(); ++i) {
    if (span.node_ids[to[i]] == lost) {
      for (size_t child : notice.children_of(lost)) to.push_back(child);
      continue;
    }
    out.push_back(to[i]);
  }
  return out;
}

void CommRevokes::send(const RevokeNotice& notice, const std::vector<size_t>& to) {
  const NodeSpan& span = *notice.comm->span();
  capnp::MallocMessageBuilder message;
  auto r = message.initRoot<nc::NodeMessage>().initRevoke();
  r.setToken(kj::arrayPtr(notice.comm->token().data(), notice.comm->token().size()));
  r.setText(notice.text);
  r.setOrigin(span.node_ids[notice.origin]);
  r.setFanout(notice.fanout);
  r.setCode(static_cast<uint32_t>(notice.code));
  for (size_t n : to) hooks_.send(span.node_ids[n], span.node_addresses[n], message);
}

void CommRevokes::lost(uint64_t instance) {
  for (const auto& resend : relay_.lost(instance, std::chrono::steady_clock::now())) {
    spdlog::info(
        "communicator {}: a node it was revoked to was lost; its {} node(s) below are "
        "told from here",
        token_prefix(resend.token), resend.to.size());
    send(resend.message, resend.to);
  }
}

void CommRevokes::node_lost(uint64_t instance,
                            const std::vector<std::shared_ptr<const Comm>>& comms,
                            const std::string& me) {
  // A copy: revoking sends, and a send may come back here (a node found lost at once).
  const std::vector<std::shared_ptr<const Comm>> all = comms;
  for (const auto& comm : all) {
    if (!comm->span()) continue;
    const NodeSpan& span = *comm->span();
    const size_t n = index_in(span, instance);
    if (n == span.node_ids.size()) continue;
    revoke(comm,
           "communicator " + token_prefix(comm->token()) + " was revoked by node " + me +
               "'s daemon: it lost node " + span.topology.node_names[n] +
               " (its daemon stopped, or the network to it failed)",
           PLEXUS_ERR_PEER_LOST, instance);
  }
}

}  // namespace plexus::daemon
