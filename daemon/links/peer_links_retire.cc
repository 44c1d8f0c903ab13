// Idle links close their paths by agreement, and stay, dormant, with their channels.
//
// A link quiet for Retirement::idle_close (or among the least recently busy while more than
// Retirement::max_open links have paths) sends kRetire with a fresh ask id. The peer agrees
// (kRetireAgreed, the same id) only if it too has nothing queued, unacknowledged or being
// written, and then holds its channel: no new frame goes to a path (acknowledgements and
// heartbeats still do) until the asker answers. The asker closes every path if it is still
// quiet and has sent nothing and added no path since it asked; it holds its channel as it
// does. Else it answers kRetireRefused, as the peer does when it is not quiet. Neither side
// closes a pinned link, one an op under way exchanges with, or, without acknowledgements, one
// with more than one path. So nothing is in flight either way when a path closes: each side
// sent its last frame before its notice on the same, single, in-order path, or, with
// acknowledgements, every frame was acknowledged. Both keep the link and its channel
// (sequence numbers, incarnations) with no path: the next frame for it opens one (want), as
// on first use, and joins the same channel. Asks that cross: the side whose channel
// incarnation is lower goes on; the other answers it. An agreement unanswered for
// LinkRetire::kAgreedLimit (its answer lost with a path) lapses as if refused. LinkRetire
// (link_retire.h) decides each step; this file gathers what it decides on and acts.
#include <sys/epoll.h>

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/links/peer_links.h"
#include "transports/wire/frame_views.h"

namespace plexus::daemon {

namespace wire = transports::wire;
using Clock = transports::ReliableChannel::Clock;
using Step = LinkRetire::Step;

RetireFacts PeerLinks::retire_facts(const Link& link) const {
  RetireFacts facts;
  facts.frames_sent = link.channel->counters().frames_sent;
  facts.paths_added = link.paths_added;
  facts.own_incarnation = link.incarnation;
  facts.peer_incarnation = link.peer_incarnation;
  facts.quiet = link.channel->waiting() == 0 && link.channel->unacknowledged() == 0;
  facts.paths_idle = true;
  bool any = false;
  for (const auto& path : link.paths) {
    if (!path || link.channel->state(path->id) == transports::PathState::kFailed) continue;
    any = true;
    // waiting: what the path has not handed to its transport (an RDMA path's queue is not a
    // write wanted); what the transport has goes before anything sent after it.
    if (path->conn->wants_write() || path->conn->waiting_bytes() != 0) facts.quiet = false;
    if (!link.channel->idle(path->id)) facts.paths_idle = false;
  }
  facts.quiet = facts.quiet && any;
  // The op check last, and only for a quiet link (nothing decides on it otherwise): it walks
  // the communicators.
  facts.may_retire = link.pins == 0 && !link.opening_until && facts.quiet &&
                     (channel_settings_.reliable || link.channel->live_paths() == 1) &&
                     (!handler_.busy || !handler_.busy(link.peer));
  return facts;
}

void PeerLinks::retire_step(Link& link, Step step, uint64_t id) {
  wire::PathNotice notice = wire::PathNotice::kRetire;
  uint64_t about = 0;  // a refusal's kind
  switch (step) {
    case Step::kNone:
      return;
    case Step::kAsk:
      link.retire.ask(link.channel->counters().frames_sent, link.paths_added, Clock::now());
      id = link.retire.ask_id();
      break;
    case Step::kAgree:
      link.channel->hold(true);  // nothing new goes to a path until the asker answers
      for (auto& p : link.paths) {
        if (p) p->retired = true;
      }
      notice = wire::PathNotice::kRetireAgreed;
      break;
    case Step::kRefuse:
    case Step::kCallOff:
      notice = wire::PathNotice::kRetireRefused;
      about = step == Step::kRefuse ? LinkRetire::kRefusesYourAsk : LinkRetire::kCallsOffMyAsk;
      if (step == Step::kCallOff && id == 0) id = link.retire.ask_id();
      break;
    case Step::kClose:
      // Closed once no connection is mid-read (the answer came in a read): fail_doomed,
      // then close_retired; nothing new goes to them meanwhile.
      link.channel->hold(true);
      for (auto& p : link.paths) {
        if (!p) continue;
        p->retired = true;
        doomed_.push_back({link.peer, p->key, "closed while idle"});
      }
      return;
    case Step::kUnretire:
      if (link.retire.state() == LinkRetire::State::kAgreed) {
        spdlog::debug("link to node {}: closing while idle called off", link.name);
      }
      link.retire.unretired();
      link.reopen_until.reset();
      for (auto& p : link.paths) {
        if (p) p->retired = false;
      }
      link.channel->hold(false);
      flush(link);  // what waited meanwhile; may lose the link
      return;
  }
  for (auto& path : link.paths) {  // the notice, on one live path
    if (!path || link.channel->state(path->id) == transports::PathState::kFailed) continue;
    path->conn->queue_urgent(wire::make_path_notice({.what = notice, .from = id, .to = about}),
                             kNoticeToken);
    update_interest(*path);
    return;
  }
}

void PeerLinks::pin(uint64_t peer, bool pinned) {
  auto it = links_.find(peer);
  if (it == links_.end()) return;
  Link& link = *it->second;
  if (pinned) {
    ++link.pins;
  } else if (link.pins > 0) {
    --link.pins;
  }
}

void PeerLinks::retire_over_cap(transports::ReliableChannel::TimePoint now) {
  if (retirement_.max_open == 0 || open_links() <= retirement_.max_open) return;
  std::vector<std::pair<transports::ReliableChannel::TimePoint, Link*>> quiet_links;
  size_t leaving = 0;  // already asked, or agreed
  for (auto& [peer, link] : links_) {
    const LinkRetire::State state = link->retire.state();
    if (state == LinkRetire::State::kAsked || state == LinkRetire::State::kAgreed) ++leaving;
    if (link->retire.askable(now) && retire_facts(*link).may_retire) {
      quiet_links.emplace_back(*link->retire.quiet_since(), link.get());
    }
  }
  const size_t over = open_links() - retirement_.max_open;
  if (leaving >= over) return;
  const size_t ask = std::min(over - leaving, quiet_links.size());
  std::partial_sort(quiet_links.begin(), quiet_links.begin() + static_cast<std::ptrdiff_t>(ask),
                    quiet_links.end(),
                    [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < ask; ++i) retire_step(*quiet_links[i].second, Step::kAsk, 0);
}

void PeerLinks::close_retired(Path& path) {
  Link& link = *path.link;
  const uint64_t peer = link.peer;
  spdlog::debug("path to node {} over {} ({} -> {}) closed while idle", link.name,
                path.nic.empty() ? "?" : path.nic, path.local, path.remote);
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, path.conn->poll_fd(), nullptr);
  paths_by_key_.erase(path.key);
  link.channel->path_closed(path.id);
  link.paths[path.id].reset();  // closes it; `path` is gone
  const auto left = [&](bool retired) {
    return std::any_of(link.paths.begin(), link.paths.end(),
                       [&](const auto& p) { return p && p->retired == retired; });
  };
  if (left(true)) return;  // the others still close
  if (left(false)) {       // the peer opened a new one meanwhile: it carries the link now
    if (link.retire.state() == LinkRetire::State::kAgreed) retire_step(link, Step::kUnretire, 0);
    return;
  }
  spdlog::info("link to node {} closed while idle (dormant until its next use)", link.name);
  link.retire.dormant();
  ++dormant_;
  link.channel->hold(false);  // with no path, frames wait in it (path_closed)
  hooks_.peer_lost(peer);
  publish();
  if (handler_.on_retired) handler_.on_retired(peer);
  // Wanted while it closed (want() while kAgreed, or frames held meanwhile): opened again.
  if (link.reopen_until || link.channel->waiting() != 0) {
    link.retire.reopened();
    --dormant_;
    // Not before reopen_within from now: the close may have taken longer than want() allowed.
    const auto soonest = Clock::now() + retirement_.reopen_within;
    link.opening_until = std::max(link.reopen_until.value_or(soonest), soonest);
    link.reopen_until.reset();
    follow(link);
    if (handler_.on_wanted) handler_.on_wanted(peer, link.addresses);
  }
}

}  // namespace plexus::daemon
