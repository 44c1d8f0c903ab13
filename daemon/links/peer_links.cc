// Peer links: channels over paths, epoll interest, path failure, loss.
#include "daemon/links/peer_links.h"
#include "transports/wire/frame_views.h"

#include <sys/epoll.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <system_error>
#include <tuple>

namespace plexus::daemon {

namespace wire = transports::wire;
using Clock = transports::ReliableChannel::Clock;

namespace {

uint64_t random_incarnation() {
  std::random_device device;
  const uint64_t value = (static_cast<uint64_t>(device()) << 32) | device();
  return value == 0 ? 1 : value;
}

}  // namespace

PeerLinks::PeerLinks(LinksHandler handler, Hooks hooks, Parts parts, uint32_t chunk_bytes,
                     transports::ReliableChannel::Settings channel, Retirement retirement)
    : handler_(std::move(handler)),
      hooks_(std::move(hooks)),
      parts_(parts),
      chunk_bytes_(chunk_bytes),
      channel_settings_(channel),
      retirement_(retirement),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (!epoll_) throw std::system_error(errno, std::generic_category(), "node links epoll");
}

PeerLinks::Link& PeerLinks::make_link(uint64_t peer, std::string name) {
  auto link = std::make_unique<Link>();
  link->peer = peer;
  link->name = std::move(name);
  transports::ReliableChannel::Handler h;
  h.on_frame = [this, peer](const wire::DataFrameHeader& header,
                            std::span<const std::byte> payload) {
    return handler_.on_frame(peer, header, payload);
  };
  if (handler_.place) {
    h.place = [this, peer](const wire::DataFrameHeader& header) {
      return handler_.place(peer, header);
    };
    h.on_placed = [this, peer](const wire::DataFrameHeader& header) {
      return handler_.on_placed(peer, header);
    };
  }
  h.on_released = [this](uint64_t token, uint32_t path) { chunk_sent(token, path); };
  h.on_resent = [this, peer](uint32_t path, uint64_t bytes) {
    if (Path* p = path_of(peer, path)) {
      const auto now = Clock::now();
      p->record(now, [&](monitor::WindowRing& w) { w.resent(now, bytes); });
    }
  };
  if (handler_.on_scheduled) h.on_scheduled = handler_.on_scheduled;
  transports::ReliableChannel::Settings settings = channel_settings_;
  settings.incarnation = random_incarnation();
  link->incarnation = settings.incarnation;
  link->channel =
      std::make_unique<transports::ReliableChannel>(settings, std::move(h), parts_.flow_policies);
  return *links_.emplace(peer, std::move(link)).first->second;
}

bool PeerLinks::has(uint64_t peer) const {
  auto it = links_.find(peer);
  return it != links_.end() && it->second->retire.open();
}

bool PeerLinks::want(uint64_t peer, std::string name,
                     transports::ReliableChannel::TimePoint deadline,
                     std::vector<std::string> addresses) {
  auto it = links_.find(peer);
  if (it == links_.end()) {
    Link& link = make_link(peer, std::move(name));
    link.opening_until = deadline;
    link.addresses = std::move(addresses);
    follow(link);  // its deadline is a tick's
    return true;
  }
  Link& link = *it->second;
  if (!addresses.empty()) link.addresses = std::move(addresses);
  switch (link.retire.state()) {
    case Retire::kDormant:  // its channel kept everything: a path is all it needs
      link.retire.reopened();
      --dormant_;
      link.channel->hold(false);
      link.opening_until = deadline;
      follow(link);
      return true;
    case Retire::kAgreed:  // its paths are closing: once they have, one is opened (or the
                           // peer's new one carries what is held)
      link.reopen_until = deadline;
      return false;
    default:
      return false;
  }
}

void PeerLinks::open_failed(uint64_t peer, const std::string& reason) {
  auto it = links_.find(peer);
  if (it == links_.end() || !it->second->opening_until) return;
  lose(peer, "cannot open a data connection to node " + it->second->name + ": " + reason);
}

void PeerLinks::add(uint64_t peer, std::string name, transports::PathOpener open, std::string nic,
                    bool backup, bool latency, std::string rail_key) {
  auto it = links_.find(peer);
  const bool first = it == links_.end() || it->second->opening_until.has_value() ||
                     it->second->retire.state() == Retire::kDormant;
  Link& link = it == links_.end() ? make_link(peer, std::move(name)) : *it->second;
  link.opening_until.reset();
  // A dormant link is open again. One asking keeps asking (its new path refuses the close);
  // one agreed stays held until its old paths have closed (close_retired).
  if (link.retire.state() == Retire::kDormant) {
    --dormant_;
    link.retire.reopened();
    link.channel->hold(false);
  }
  ++link.paths_added;
  link.retire.used();
  auto path = std::make_unique<Path>();
  Path* raw = path.get();
  raw->link = &link;
  raw->key = next_key_++;
  raw->nic = std::move(nic);
  raw->latency = latency;
  raw->rail_key = std::move(rail_key);
  std::tie(raw->windows, raw->nic_windows) = parts_.published->windows_for_path(raw->nic);
  transports::DataPath::Callbacks callbacks;
  callbacks.on_frame = [this, raw](const wire::DataFrameHeader& h,
                                   std::span<const std::byte> payload) {
    std::string error = on_path_frame(*raw, h);
    if (!error.empty() || h.type == wire::FrameType::kPathNotice ||
        h.type == wire::FrameType::kNodeRate) {
      return error;
    }
    const auto now = Clock::now();
    if (h.type == wire::FrameType::kData && !payload.empty()) {
      raw->record(now, [&](monitor::WindowRing& w) { w.received(now, payload.size()); });
    }
    return raw->link->channel->receive(raw->id, h, payload, now);
  };
  callbacks.on_sent = [raw](uint64_t token, size_t bytes) {
    if (bytes > 0) {
      const auto now = Clock::now();
      raw->record(now, [&](monitor::WindowRing& w) { w.sent(now, bytes); });
    }
    raw->link->channel->on_path_sent(raw->id, token, bytes);
  };
  if (handler_.place) {
    callbacks.place = [raw](const wire::DataFrameHeader& h) {
      return raw->link->channel->place(raw->id, h, transports::ReliableChannel::Clock::now());
    };
    callbacks.on_placed = [raw](const wire::DataFrameHeader& h) {
      const auto now = Clock::now();
      raw->record(now, [&](monitor::WindowRing& w) { w.received(now, h.length); });
      return raw->link->channel->placed(raw->id, h, now);
    };
    callbacks.on_discarded = [raw](const wire::DataFrameHeader& h) {
      const auto now = Clock::now();
      raw->record(now, [&](monitor::WindowRing& w) { w.received(now, h.length); });
      return raw->link->channel->discarded(raw->id, h, now);
    };
  }
  wire::DataFrameLimits limits;
  limits.max_payload_bytes = std::max<uint32_t>(chunk_bytes_, 64 * 1024);
  raw->conn = open(limits, std::move(callbacks));
  const transports::PathEndpoint local = raw->conn->local();
  const transports::PathEndpoint remote = raw->conn->remote();
  raw->local = local.text;
  raw->local_key = local.key;
  raw->remote = remote.text;
  raw->remote_key = remote.key;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = raw->key;
  const bool watched = ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw->conn->poll_fd(), &ev) == 0;
  const int watch_errno = errno;
  paths_by_key_[raw->key] = raw;
  // A path joining a channel that has lost one before is on probation.
  const bool probation = link.channel->counters().path_failures > 0;
  raw->id = link.channel->add_path(raw->conn.get(), Clock::now(), probation, backup, latency);
  if (link.paths.size() <= raw->id) link.paths.resize(raw->id + 1);
  link.paths[raw->id] = std::move(path);
  spdlog::info("path to node {} up over {} ({} -> {}){}{}{}", link.name,
               raw->nic.empty() ? "?" : raw->nic, raw->local, raw->remote,
               latency ? ", the latency class's" : "", backup ? ", a backup across rails" : "",
               probation ? ", on probation" : "");
  if (!watched) {  // unheard, it carries nothing: failed now (may lose the link: not touched after)
    fail_path(*raw, std::string("cannot watch it: epoll_ctl: ") + std::strerror(watch_errno), true);
    return publish();
  }
  if (!raw->nic.empty() && parts_.nics->drained(raw->nic)) {
    link.channel->drain(raw->id, true);
    send_path_notice(link, *raw, wire::PathNotice::kDrained);
  }
  flush(peer);  // may lose the link (a write that fails): `link` is not touched after it
  publish();
  if (first && handler_.on_linked && links_.count(peer) != 0) handler_.on_linked(peer);
}

std::string PeerLinks::on_path_frame(Path& path, const wire::DataFrameHeader& h) {
  Link& link = *path.link;
  if (const uint64_t incarnation =
          wire::is_channel_control(h) ? wire::read_channel_control(h).incarnation : 0;
      incarnation != 0) {
    if (link.peer_incarnation == 0) link.peer_incarnation = incarnation;
    if (incarnation != link.peer_incarnation) {
      // The peer gave up its channel to this node and started another: what this side
      // still waits for on the old one will never come.
      link.last_failure = "node " + link.name +
                          " gave up its channel to this node and opened a new one (it had no "
                          "path to this node for its grace period)";
      doomed_.push_back({link.peer, 0, link.last_failure});
      return link.last_failure;  // not for the old channel: it fails this path now
    }
  }
  if (h.type == wire::FrameType::kNodeRate) {
    hooks_.peer_rate(link.peer, wire::read_node_rate(h));
    return {};
  }
  if (h.type != wire::FrameType::kPathNotice) return {};
  // The peer's connection from `from` to `to` is this side's from `to` to `from`.
  const wire::PathNoticeFrame notice = wire::read_path_notice(h);
  if (notice.what == wire::PathNotice::kRetire || notice.what == wire::PathNotice::kRetireAgreed ||
      notice.what == wire::PathNotice::kRetireRefused) {
    const uint64_t id = notice.from;  // the ask's
    const bool never = retirement_.idle_close.count() == 0 && retirement_.max_open == 0;
    LinkRetire::Step step = LinkRetire::Step::kNone;
    if (notice.what == wire::PathNotice::kRetire) {
      step = link.retire.peer_asked(retire_facts(link), id, never, Clock::now());
    } else if (notice.what == wire::PathNotice::kRetireAgreed) {
      step = link.retire.peer_agreed(retire_facts(link), id);
    } else if (notice.to == LinkRetire::kCallsOffMyAsk) {
      step = link.retire.peer_called_off(id);
    } else {
      step = link.retire.peer_refused(id, Clock::now(), retirement_.idle_close);
    }
    retire_step(link, step, id);
    return {};
  }
  for (auto& other : link.paths) {
    if (!other || other->local_key != notice.to || other->remote_key != notice.from) continue;
    switch (notice.what) {
      case wire::PathNotice::kDown:
        doomed_.push_back({link.peer, other->key,
                           "node " + link.name + " reports its end (" + other->remote + ") down"});
        break;
      case wire::PathNotice::kDrained:
      case wire::PathNotice::kUndrained: {
        const bool drained = notice.what == wire::PathNotice::kDrained;
        if (other->peer_drained == drained) break;  // a copy: notices go on every path
        other->peer_drained = drained;
        // Drained while either side has it drained.
        link.channel->drain(other->id, drained || parts_.nics->drained(other->nic));
        spdlog::info("path to node {} over {} ({}) {} by node {}", link.name, other->nic,
                     other->local, drained ? "drained" : "undrained", link.name);
        break;
      }
      default:
        return "a path notice of unknown kind " +
               std::to_string(static_cast<uint32_t>(notice.what));
    }
    return {};
  }
  return {};  // a path already gone here
}

void PeerLinks::send_path_notice(Link& link, const Path& about, wire::PathNotice what) {
  if (about.local_key == 0 || about.remote_key == 0) return;  // not IPv4: the timeout covers it
  const wire::DataFrameHeader h =
      wire::make_path_notice({.what = what, .from = about.local_key, .to = about.remote_key});
  // On every live path (one may be about to fail too), but a path down on itself.
  for (auto& other : link.paths) {
    if (!other || (what == wire::PathNotice::kDown && other.get() == &about)) continue;
    other->conn->queue_urgent(h, kNoticeToken);
  }
}

PeerLinks::Path* PeerLinks::path_of(uint64_t peer, uint32_t path) const {
  auto it = links_.find(peer);
  if (it == links_.end() || path >= it->second->paths.size()) return nullptr;
  return it->second->paths[path].get();
}

void PeerLinks::chunk_sent(uint64_t token, uint32_t path) {
  ChunkTokens::Released chunk = tokens_.release(token);
  // Without acknowledgements a chunk released on no path was never written: its last path
  // failed, and the link is lost next. Its message is not sent, so its `done` never runs, as
  // for any chunk of a link that is gone (ChunkTokens::drop_peer); a sender that took `done`
  // for delivery (the weight relay finishing a forward) would be wrong.
  if (!channel_settings_.reliable && path == transports::kNoPath) return;
  if (channel_settings_.reliable) {
    if (Path* over = path_of(chunk.peer, path); over && over->windows) {  // null: failed since
      const auto now = Clock::now();
      over->record(now, [&](monitor::WindowRing& w) { w.acknowledged(now, now - chunk.sent_at); });
    }
  }
  if (chunk.done) chunk.done();
}

transports::ReliableChannel* PeerLinks::channel(uint64_t peer) {
  auto it = links_.find(peer);
  return it == links_.end() ? nullptr : it->second->channel.get();
}

void PeerLinks::flush(uint64_t peer) {
  auto it = links_.find(peer);
  if (it == links_.end()) return;
  flush(*it->second);
  if (auto again = links_.find(peer); again != links_.end()) follow(*again->second);
}

// Hands the paths frames and writes what the kernel takes now (the common case needs no
// epoll round trip); a path whose queue the kernel emptied gets the next frame the scheduler
// picks, a few times over. A path that cannot write is failed, and the link is lost with its
// last path.
void PeerLinks::flush(Link& link) {
  const uint64_t peer = link.peer;
  // Writes what the paths hold and watches for writable where they keep some; false when
  // the link was lost (its last path failed).
  auto write_paths = [&]() {
    for (size_t i = 0; i < link.paths.size(); ++i) {
      Path* path = link.paths[i].get();
      if (path == nullptr || !path->conn->wants_write()) continue;
      if (!path->conn->on_writable()) {
        if (mid_read_) {
          // Called back from a connection's read (a frame that moved an op on): failing a
          // path now could destroy that very connection under its reader. Failed once
          // the read returns (fail_doomed).
          doomed_.push_back({peer, path->key, path->conn->error()});
          continue;
        }
        fail_path(*path, path->conn->error());
        if (links_.count(peer) == 0) return false;  // that was its last path
        i = static_cast<size_t>(-1);                // the failure moved frames to other paths
        continue;
      }
      update_interest(*path);
    }
    return true;
  };
  constexpr int kPasses = 8;  // bounded: other links and reads get their turn
  bool pumped = false;
  for (int pass = 0; pass < kPasses; ++pass) {
    if (!write_paths()) return;
    pumped = false;
    // Held while its paths close by agreement (peer_links_retire.cc): nothing to pump.
    if (link.channel->waiting() == 0 || link.channel->held()) return;
    if (!link.channel->pump()) break;
    pumped = true;
  }
  // What the last pass handed the paths is written, or at least watched for.
  if (pumped && !write_paths()) return;
  if (link.channel->waiting() == 0) return;
  // Frames wait for a path that its transport's queue limit holds back: no event will say
  // when it has room (a full window, or no live path, waits for reads or the tick instead).
  for (const auto& path : link.paths) {
    if (path && path->conn->held_by_queue_limit()) {
      if (!held_) held_since_ = Clock::now();
      held_ = true;
      return;
    }
  }
}

void PeerLinks::fail_path(Path& path, std::string reason, bool notify) {
  Link& link = *path.link;
  if (path.retired) {  // closing by agreement: its end, however it comes, is no failure
    close_retired(path);
    return;
  }
  // An ask's answer may be lost with it: called off (told once the path is gone).
  const LinkRetire::Step call_off = link.retire.path_failed();
  const uint32_t id = path.id;
  const bool peer_closed = path.conn->peer_closed();
  const std::string nic = path.nic;
  const std::string remote = path.remote;
  const bool latency = path.latency;
  const std::string rail_key = path.rail_key;
  spdlog::warn("path to node {} over {} ({} -> {}) failed: {}", link.name, nic.empty() ? "?" : nic,
               path.local, path.remote, reason);
  if (notify) send_path_notice(link, path, wire::PathNotice::kDown);
  const auto failed_at = Clock::now();
  path.record(failed_at, [&](monitor::WindowRing& w) { w.error(failed_at); });
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, path.conn->poll_fd(), nullptr);
  path.conn->close_abortively();
  paths_by_key_.erase(path.key);
  // Out of the link before its channel moves the frames: writing them to the link's other
  // paths may fail those too, and the last one loses the link (lose() destroys it).
  std::unique_ptr<Path> gone = std::move(link.paths[id]);
  const uint64_t peer = link.peer;
  link.channel->path_failed(id, reason);  // its unacknowledged frames wait for another path
  gone.reset();                           // closes the path; `path` is gone
  if (links_.count(peer) == 0) return;    // lost meanwhile, `link` with it
  link.last_failure = reason;
  if (!channel_settings_.reliable) {
    // Whatever the path had taken is lost for good: the peer's ops cannot complete.
    lose(link.peer, std::move(reason));
    return;
  }
  const bool pathless = link.channel->live_paths() == 0;
  if (pathless) {
    if (peer_closed) {  // its daemon stopped, or gave this node up (an orderly close)
      lose(link.peer, std::move(reason));
      return;
    }
    spdlog::warn("no path left to node {}: its frames wait up to {} ms for one to come back",
                 link.name, channel_settings_.last_path_grace.count());
  }
  retire_step(link, call_off, 0);  // over another path, if one is left
  if (handler_.on_path_lost) {
    handler_.on_path_lost(link.peer, nic, remote, rail_key, latency, pathless);
  }
  flush(link.peer);  // and follow: its channel may want a tick now (a path it must resend)
}

void PeerLinks::fail_doomed() {
  while (!doomed_.empty()) {
    DoomedPath doomed = std::move(doomed_.back());
    doomed_.pop_back();
    if (doomed.key == 0) {
      lose(doomed.peer, std::move(doomed.reason));
      continue;
    }
    auto it = paths_by_key_.find(doomed.key);
    if (it != paths_by_key_.end()) fail_path(*it->second, std::move(doomed.reason));
  }
}

void PeerLinks::abandon_placements(const void* owner) {
  for (auto& [key, path] : paths_by_key_) path->conn->abandon_placement(owner);
}

void PeerLinks::update_interest(Path& path) {
  const bool want = path.conn->wants_write();
  if (want == path.watching_out) return;
  epoll_event ev{};
  ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
  ev.data.u64 = path.key;
  // Unchanged on a failure, so that the next call tries again (the tick flushes meanwhile).
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, path.conn->poll_fd(), &ev) != 0) return;
  path.watching_out = want;
}

void PeerLinks::lose(uint64_t peer, std::string reason) {
  auto it = links_.find(peer);
  if (it == links_.end()) return;
  std::unique_ptr<Link> link = std::move(it->second);
  links_.erase(it);
  if (link->retire.state() == Retire::kDormant) --dormant_;
  for (auto& path : link->paths) {
    if (!path) continue;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, path->conn->poll_fd(), nullptr);
    paths_by_key_.erase(path->key);
  }
  // Its queued and unacknowledged frames will never be written: release their memory.
  link->paths.clear();
  link->channel.reset();
  tokens_.drop_peer(peer);
  hooks_.peer_lost(peer);
  publish();
  if (handler_.on_lost) handler_.on_lost(peer, link->name, reason);
}

bool PeerLinks::service(Path& path, uint32_t events) {
  const uint64_t before = path.conn->bytes_received() + path.conn->bytes_sent();
  bool ok = true;
  // Reads in bites of kReadBiteBytes: what they bring in is acknowledged at once, so the
  // sender's frames are not held for a whole gulp.
  mid_read_ = true;  // what its frames set off may not fail paths until it returns
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ok = path.conn->on_readable(kReadBiteBytes);
  if (ok && (events & EPOLLOUT)) ok = path.conn->on_writable();
  mid_read_ = false;
  bool progress = path.conn->bytes_received() + path.conn->bytes_sent() != before;
  if (!ok) {
    fail_path(path, path.conn->error());
    return true;
  }
  Link& link = *path.link;
  follow(link);
  // A heartbeat on an idle link is no progress: the engine may go back to sleep at once
  // rather than spin as if an op moved.
  if (link.channel->next_tick() > Clock::now()) progress = false;
  // Frames wait for room on the paths: this one may have some now.
  if (link.channel->ack_due() || link.channel->waiting() > 0) {
    link.channel->flush_ack();
    flush(link);  // may fail paths, this one included: `path` is not touched after it
    return progress;
  }
  update_interest(path);
  return progress;
}

// Heartbeats, silent paths, probation, rate samples, acknowledgements; peers with no
// live path past the grace period are lost. Links that asked for no tick yet are passed by.
void PeerLinks::tick(transports::ReliableChannel::TimePoint now) {
  std::vector<uint64_t> peers;
  peers.reserve(links_.size());
  for (auto& [peer, link] : links_) {
    if (due(*link) <= now) peers.push_back(peer);  // never a dormant one
  }
  for (uint64_t peer : peers) {
    auto it = links_.find(peer);
    if (it == links_.end()) continue;
    Link& link = *it->second;
    for (auto& silent : link.channel->tick(now)) {
      if (silent.path < link.paths.size() && link.paths[silent.path]) {
        fail_path(*link.paths[silent.path], std::move(silent.reason));
        if (links_.count(peer) == 0) break;
      }
    }
    if (links_.count(peer) == 0) continue;
    if (link.opening_until) {  // no path yet: its own deadline, not the grace
      if (now >= *link.opening_until) {
        lose(peer, "no data connection to node " + link.name + " opened in time");
      }
      continue;
    }
    const auto quiet = now - link.channel->last_heard();
    if (link.channel->live_paths() == 0 && quiet >= channel_settings_.last_path_grace) {
      lose(peer, "no path to node " + link.name + " for " +
                     std::to_string(
                         std::chrono::duration_cast<std::chrono::milliseconds>(quiet).count()) +
                     " ms (grace " + std::to_string(channel_settings_.last_path_grace.count()) +
                     " ms); the last one failed: " + link.last_failure);
      continue;
    }
    flush(link);
    if (links_.count(peer) == 0) continue;  // a write failed and lost it
    for (auto& path : link.paths) {
      if (!path || !link.channel->idle(path->id)) continue;
      if (path->windows) path->windows->release_if_idle(now);
      path->conn->release_idle_memory();
    }
    // Last: kUnretire may lose the link.
    retire_step(link, link.retire.tick(retire_facts(link), now, retirement_.idle_close), 0);
  }
  retire_over_cap(now);
  next_tick_ = transports::ReliableChannel::TimePoint::max();
  busy_ = false;
  for (auto& [peer, link] : links_) {
    follow(*link);
    busy_ |= due(*link) <= now;
  }
}

bool PeerLinks::poll(int timeout_ms) {
  if (held_ && Clock::now() - held_since_ >= channel_settings_.held_path_retry) {
    held_ = false;                  // flush sets it again for a link still held
    std::vector<uint64_t> waiting;  // flush may lose a link (its last path failing)
    for (auto& [peer, link] : links_) {
      if (link->channel->waiting() != 0) waiting.push_back(peer);
    }
    for (uint64_t peer : waiting) {
      if (auto it = links_.find(peer); it != links_.end()) flush(*it->second);
    }
  }
  epoll_event events[32];
  const int n = ::epoll_wait(epoll_.get(), events, 32, std::min(timeout_ms, kTickMs));
  bool progress = false;
  for (int i = 0; i < n; ++i) {
    if (events[i].data.u64 == kNicMonitorKey) {
      hooks_.nic_readable();
      progress = true;
      continue;
    }
    auto it = paths_by_key_.find(events[i].data.u64);
    if (it == paths_by_key_.end()) continue;             // failed while handling an earlier event
    progress |= service(*it->second, events[i].events);  // acknowledges what it read
    fail_doomed();
  }
  return progress;
}

}  // namespace plexus::daemon
