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
// kAgreedLimit (its answer lost with a path) lapses as if refused.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/links/peer_links.h"
#include "transports/wire/frame_views.h"

namespace plexus::daemon {

namespace wire = transports::wire;
using Clock = transports::ReliableChannel::Clock;

namespace {
// Far longer than an asker takes to answer (its next poll); only a lost answer waits it out.
constexpr auto kAgreedLimit = std::chrono::seconds(10);
}  // namespace

bool PeerLinks::quiet(const Link& link, bool idle_paths) const {
  if (link.channel->waiting() != 0 || link.channel->unacknowledged() != 0) return false;
  bool any = false;
  for (const auto& path : link.paths) {
    if (!path || link.channel->state(path->id) == transports::PathState::kFailed) continue;
    any = true;
    if (path->conn->wants_write() || (idle_paths && !link.channel->idle(path->id))) return false;
  }
  return any;
}

bool PeerLinks::may_retire(const Link& link) const {
  if (link.pins != 0 || link.opening_until) return false;
  if (!channel_settings_.reliable && link.channel->live_paths() != 1) return false;
  return !handler_.busy || !handler_.busy(link.peer);
}

void PeerLinks::send_retire(Link& link, wire::PathNotice what, uint64_t id) {
  if (what == wire::PathNotice::kRetire) id = ++link.ask_id;
  for (auto& path : link.paths) {
    if (!path || link.channel->state(path->id) == transports::PathState::kFailed) continue;
    path->conn->queue_urgent(wire::make_path_notice({.what = what, .from = id, .to = 0}),
                             kNoticeToken);
    update_interest(*path);
    if (what == wire::PathNotice::kRetire) {
      link.retire = Retire::kAsked;
      link.sent_at_ask = link.channel->counters().frames_sent;
      link.paths_at_ask = link.paths_added;
    }
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

void PeerLinks::retire_idle(Link& link, transports::ReliableChannel::TimePoint now) {
  if (link.retire == Retire::kAgreed && now - link.agreed_at >= kAgreedLimit) {
    spdlog::warn(
        "node {} agreed to close its idle link to this node but did not answer within "
        "{} s: kept open",
        link.name, std::chrono::duration_cast<std::chrono::seconds>(kAgreedLimit).count());
    unretire(link);  // may lose the link: nothing is touched after
    return;
  }
  if (link.retire != Retire::kOpen || link.opening_until) return;
  if (!quiet(link, true)) {
    link.quiet_since.reset();
    return;
  }
  if (!link.quiet_since) link.quiet_since = now;
  if (retirement_.idle_close.count() != 0 && now - *link.quiet_since >= retirement_.idle_close &&
      now >= link.next_ask && may_retire(link)) {
    send_retire(link, wire::PathNotice::kRetire);
  }
}

void PeerLinks::retire_over_cap(transports::ReliableChannel::TimePoint now) {
  if (retirement_.max_open == 0 || open_links() <= retirement_.max_open) return;
  std::vector<std::pair<transports::ReliableChannel::TimePoint, Link*>> quiet_links;
  size_t leaving = 0;  // already asked, or agreed
  for (auto& [peer, link] : links_) {
    if (link->retire == Retire::kAsked || link->retire == Retire::kAgreed) ++leaving;
    if (link->retire == Retire::kOpen && link->quiet_since && now >= link->next_ask &&
        may_retire(*link)) {
      quiet_links.emplace_back(*link->quiet_since, link.get());
    }
  }
  const size_t over = open_links() - retirement_.max_open;
  if (leaving >= over) return;
  const size_t ask = std::min(over - leaving, quiet_links.size());
  std::partial_sort(quiet_links.begin(), quiet_links.begin() + static_cast<std::ptrdiff_t>(ask),
                    quiet_links.end(),
                    [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < ask; ++i) send_retire(*quiet_links[i].second, wire::PathNotice::kRetire);
}

// Called from a path's read (on_path_frame): nothing here closes a path or loses the link at
// once (fail_doomed does, after the read; a flush defers its failures the same way).
std::string PeerLinks::on_retire_notice(Path& path, wire::PathNotice what, uint64_t id) {
  Link& link = *path.link;
  switch (what) {
    case wire::PathNotice::kRetire: {
      if (link.retire == Retire::kAgreed && id == link.agreed_id) return {};  // a copy
      if (link.retire == Retire::kAsked) {
        // Crossed: the lower incarnation's ask goes on (an unknown one's does not).
        if (link.peer_incarnation != 0 && link.incarnation < link.peer_incarnation) return {};
        link.retire = Retire::kOpen;  // the peer drops this side's ask: answer its own
      }
      const bool never = retirement_.idle_close.count() == 0 && retirement_.max_open == 0;
      if (never || link.retire != Retire::kOpen || !may_retire(link) || !quiet(link, false)) {
        send_retire(link, wire::PathNotice::kRetireRefused, id);
        return {};
      }
      link.retire = Retire::kAgreed;
      link.agreed_id = id;
      link.agreed_at = Clock::now();
      link.channel->hold(true);  // nothing new goes to a path until the asker answers
      for (auto& p : link.paths) {
        if (p) p->retired = true;
      }
      send_retire(link, wire::PathNotice::kRetireAgreed, id);
      return {};
    }
    case wire::PathNotice::kRetireAgreed: {
      if (link.retire != Retire::kAsked || id != link.ask_id || !may_retire(link) ||
          !quiet(link, false) || link.channel->counters().frames_sent != link.sent_at_ask ||
          link.paths_added != link.paths_at_ask) {
        if (link.retire == Retire::kAsked && id == link.ask_id) {
          link.retire = Retire::kOpen;
          link.quiet_since.reset();
        }
        send_retire(link, wire::PathNotice::kRetireRefused, id);  // the peer lets its frames go
        return {};
      }
      // Closed once no connection is mid-read (this one is): fail_doomed, then close_retired.
      link.channel->hold(true);
      for (auto& p : link.paths) {
        if (!p) continue;
        p->retired = true;
        doomed_.push_back({link.peer, p->key, "closed while idle"});
      }
      return {};
    }
    case wire::PathNotice::kRetireRefused:
      if (link.retire == Retire::kAsked && id == link.ask_id) {
        link.retire = Retire::kOpen;
        // Not asked again for a while: idle_close from now, and at least a second.
        link.quiet_since = Clock::now();
        link.next_ask = *link.quiet_since + std::max<std::chrono::milliseconds>(
                                                retirement_.idle_close, std::chrono::seconds(1));
      } else if (link.retire == Retire::kAgreed && id == link.agreed_id) {
        unretire(link);
      }
      return {};
    default:
      return {};
  }
}

void PeerLinks::unretire(Link& link) {
  link.retire = Retire::kOpen;
  link.reopen_until.reset();
  link.quiet_since.reset();
  for (auto& p : link.paths) {
    if (p) p->retired = false;
  }
  link.channel->hold(false);
  flush(link);  // what waited meanwhile; may lose the link (outside a read)
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
    if (link.retire == Retire::kAgreed) unretire(link);
    return;
  }
  spdlog::info("link to node {} closed while idle (dormant until its next use)", link.name);
  link.retire = Retire::kDormant;
  ++dormant_;
  link.quiet_since.reset();
  link.channel->hold(false);  // with no path, frames wait in it (path_closed)
  hooks_.peer_lost(peer);
  publish();
  if (handler_.on_retired) handler_.on_retired(peer);
  // Wanted while it closed (want() while kAgreed, or frames held meanwhile): opened again.
  if (link.reopen_until || link.channel->waiting() != 0) {
    link.retire = Retire::kOpen;
    --dormant_;
    link.opening_until = link.reopen_until.value_or(Clock::now() + retirement_.reopen_within);
    link.reopen_until.reset();
    follow(link);
    if (handler_.on_wanted) handler_.on_wanted(peer, link.addresses);
  }
}

}  // namespace plexus::daemon
