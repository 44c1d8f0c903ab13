// Peer links: chunking, per-chunk tokens from a free list, epoll interest, loss.
#include "daemon/node_links.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace plexus::daemon {

namespace wire = transports::wire;

NodeLinks::NodeLinks(Handler handler, uint32_t chunk_bytes,
                     transports::ReliableChannel::Settings channel)
    : handler_(std::move(handler)),
      chunk_bytes_(chunk_bytes),
      channel_settings_(channel),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (!epoll_) throw std::system_error(errno, std::generic_category(), "node links epoll");
}

NodeLinks::~NodeLinks() = default;

const std::string* NodeLinks::name_of(uint64_t peer) const {
  auto it = links_.find(peer);
  return it == links_.end() ? nullptr : &it->second->name;
}

void NodeLinks::add(uint64_t peer, std::string name, int fd) {
  auto it = links_.find(peer);
  if (it == links_.end()) {
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
    h.on_released = [this](uint64_t token) { chunk_sent(token); };
    link->channel = std::make_unique<transports::ReliableChannel>(channel_settings_, std::move(h));
    it = links_.emplace(peer, std::move(link)).first;
  }
  Link& link = *it->second;
  auto path = std::make_unique<Path>();
  Path* raw = path.get();
  raw->link = &link;
  raw->key = next_key_++;
  transports::TcpConnection::Callbacks callbacks;
  callbacks.on_frame = [raw](const wire::DataFrameHeader& h, std::span<const std::byte> payload) {
    return raw->link->channel->receive(raw->id, h, payload,
                                       transports::ReliableChannel::Clock::now());
  };
  callbacks.on_sent = [raw](uint64_t token, size_t bytes) {
    raw->link->channel->on_path_sent(raw->id, token, bytes);
  };
  if (handler_.place) {
    callbacks.place = [raw](const wire::DataFrameHeader& h) {
      return raw->link->channel->place(raw->id, h, transports::ReliableChannel::Clock::now());
    };
    callbacks.on_placed = [raw](const wire::DataFrameHeader& h) {
      return raw->link->channel->placed(raw->id, h, transports::ReliableChannel::Clock::now());
    };
  }
  wire::DataFrameLimits limits;
  limits.max_payload_bytes = std::max<uint32_t>(chunk_bytes_, 64 * 1024);
  raw->conn = std::make_unique<transports::TcpConnection>(fd, limits, std::move(callbacks));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = raw->key;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw->conn->fd(), &ev);
  paths_by_key_[raw->key] = raw;
  // A path joining a channel that has lost one before is on probation.
  const bool probation = link.channel->counters().path_failures > 0;
  raw->id = link.channel->add_path(raw, transports::ReliableChannel::Clock::now(), probation);
  if (link.paths.size() <= raw->id) link.paths.resize(raw->id + 1);
  link.paths[raw->id] = std::move(path);
  flush(link);
}

uint64_t NodeLinks::take_token(uint64_t peer, std::shared_ptr<void> keep_alive,
                               std::function<void()> done) {
  uint64_t token;
  if (!free_tokens_.empty()) {
    token = free_tokens_.back();
    free_tokens_.pop_back();
  } else {
    token = pending_.size();
    pending_.emplace_back();
  }
  Pending& p = pending_[token];
  p.peer = peer;
  p.keep_alive = std::move(keep_alive);
  p.done = std::move(done);
  p.used = true;
  return token;
}

void NodeLinks::chunk_sent(uint64_t token) {
  Pending& p = pending_[token];
  std::function<void()> done = std::move(p.done);
  p.keep_alive.reset();
  p.done = nullptr;
  p.used = false;
  free_tokens_.push_back(token);
  if (done) done();
}

bool NodeLinks::send_message(uint64_t peer, uint64_t comm_id, uint64_t op_seq, uint32_t step,
                             std::span<const std::byte> data, std::shared_ptr<void> keep_alive,
                             std::function<void()> done) {
  auto it = links_.find(peer);
  if (it == links_.end()) return false;
  Link& link = *it->second;
  wire::DataFrameHeader h;
  h.type = wire::FrameType::kData;
  h.comm_id = comm_id;
  h.op_seq = op_seq;
  h.step = step;
  uint64_t offset = 0;
  uint32_t chunk = 0;
  do {
    const auto bytes =
        static_cast<uint32_t>(std::min<uint64_t>(chunk_bytes_, data.size() - offset));
    const bool last = offset + bytes == data.size();
    h.chunk = chunk++;
    h.offset = offset;
    h.length = bytes;
    const uint64_t token = take_token(peer, keep_alive, last ? std::move(done) : nullptr);
    link.channel->send(h, data.subspan(offset, bytes), token);
    offset += bytes;
  } while (offset < data.size());
  flush(link);
  return true;
}

bool NodeLinks::send_marker(uint64_t peer, uint64_t comm_id, uint64_t op_seq, uint32_t step,
                            uint64_t offset, uint32_t chunk, std::function<void()> done) {
  auto it = links_.find(peer);
  if (it == links_.end()) return false;
  Link& link = *it->second;
  wire::DataFrameHeader h;
  h.type = wire::FrameType::kData;
  h.comm_id = comm_id;
  h.op_seq = op_seq;
  h.step = step;
  h.chunk = chunk;
  h.offset = offset;
  h.length = 0;
  link.channel->send(h, {}, take_token(peer, nullptr, std::move(done)));
  flush(link);
  return true;
}

// Writes what the kernel takes now on every path (the common case needs no epoll round
// trip); a path that cannot is failed, and the link is lost with its last path.
void NodeLinks::flush(Link& link) {
  const uint64_t peer = link.peer;
  for (size_t i = 0; i < link.paths.size(); ++i) {
    Path* path = link.paths[i].get();
    if (path == nullptr || !path->conn->wants_write()) continue;
    if (!path->conn->on_writable()) {
      fail_path(*path, path->conn->error());
      if (links_.count(peer) == 0) return;  // that was its last path
      i = static_cast<size_t>(-1);          // the failure moved frames to other paths
      continue;
    }
    update_interest(*path);
  }
}

void NodeLinks::fail_path(Path& path, std::string reason) {
  Link& link = *path.link;
  const uint32_t id = path.id;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, path.conn->fd(), nullptr);
  paths_by_key_.erase(path.key);
  link.channel->path_failed(id, reason);  // its unacknowledged frames wait for another path
  link.paths[id].reset();                 // closes the socket; `path` is gone
  if (link.channel->live_paths() == 0) {
    lose(link.peer, std::move(reason));
    return;
  }
  flush(link);
}

void NodeLinks::send_abort(uint64_t peer, uint64_t comm_id, const std::string& reason) {
  send_notice(peer, wire::FrameType::kAbort, comm_id, 0, reason);
}

void NodeLinks::send_departed(uint64_t peer, uint64_t comm_id, int rank, uint64_t collectives,
                              const std::string& reason) {
  send_notice(peer, wire::FrameType::kDeparted, comm_id, static_cast<uint32_t>(rank), reason,
              collectives);
}

void NodeLinks::send_notice(uint64_t peer, wire::FrameType type, uint64_t comm_id, uint32_t step,
                            const std::string& reason, uint64_t op_seq) {
  auto it = links_.find(peer);
  if (it == links_.end()) return;
  Link& link = *it->second;
  auto text = std::make_shared<std::string>(
      reason.substr(0, std::min<size_t>(reason.size(), wire::kMaxAbortReasonBytes)));
  wire::DataFrameHeader h;
  h.type = type;
  h.comm_id = comm_id;
  h.step = step;
  h.op_seq = op_seq;
  h.length = static_cast<uint32_t>(text->size());
  const std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(text->data()),
                                           text->size());
  link.channel->send(h, payload, take_token(peer, text, nullptr));
  flush(link);
}

void NodeLinks::abandon_placements(const void* owner) {
  for (auto& [key, path] : paths_by_key_) path->conn->abandon_placement(owner);
}

void NodeLinks::update_interest(Path& path) {
  const bool want = path.conn->wants_write();
  if (want == path.watching_out) return;
  epoll_event ev{};
  ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
  ev.data.u64 = path.key;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, path.conn->fd(), &ev);
  path.watching_out = want;
}

void NodeLinks::lose(uint64_t peer, std::string reason) {
  auto it = links_.find(peer);
  if (it == links_.end()) return;
  std::unique_ptr<Link> link = std::move(it->second);
  links_.erase(it);
  for (auto& path : link->paths) {
    if (!path) continue;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, path->conn->fd(), nullptr);
    paths_by_key_.erase(path->key);
  }
  // Its queued and unacknowledged frames will never be written: release their memory.
  link->paths.clear();
  link->channel.reset();
  for (uint64_t token = 0; token < pending_.size(); ++token) {
    Pending& p = pending_[token];
    if (!p.used || p.peer != peer) continue;
    p.keep_alive.reset();
    p.done = nullptr;
    p.used = false;
    free_tokens_.push_back(token);
  }
  if (handler_.on_lost) handler_.on_lost(peer, link->name, reason);
}

bool NodeLinks::service(Path& path, uint32_t events) {
  const uint64_t before = path.conn->bytes_received() + path.conn->bytes_sent();
  bool ok = true;
  // Reads in bites of kReadBiteBytes: what they bring in is acknowledged at once, so the
  // sender's frames are not held for a whole gulp.
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ok = path.conn->on_readable(kReadBiteBytes);
  if (ok && (events & EPOLLOUT)) ok = path.conn->on_writable();
  const bool progress = path.conn->bytes_received() + path.conn->bytes_sent() != before;
  if (!ok) {
    fail_path(path, path.conn->error());
    return true;
  }
  Link& link = *path.link;
  if (link.channel->ack_due()) {
    link.channel->flush_ack();
    flush(link);  // may fail paths, this one included: `path` is not touched after it
    return progress;
  }
  update_interest(path);
  return progress;
}

// Heartbeats, silent paths, probation, rate samples, acknowledgements.
void NodeLinks::tick() {
  const auto now = transports::ReliableChannel::Clock::now();
  last_tick_ = now;
  std::vector<uint64_t> peers;
  peers.reserve(links_.size());
  for (auto& [peer, link] : links_) peers.push_back(peer);
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
    if (links_.count(peer) != 0) flush(link);
  }
}

bool NodeLinks::poll(int timeout_ms) {
  if (links_.empty()) return false;
  if (transports::ReliableChannel::Clock::now() - last_tick_ >=
      std::chrono::milliseconds(kTickMs)) {
    tick();
    if (links_.empty()) return true;
  }
  epoll_event events[32];
  const int n = ::epoll_wait(epoll_.get(), events, 32, std::min(timeout_ms, kTickMs));
  bool progress = false;
  for (int i = 0; i < n; ++i) {
    auto it = paths_by_key_.find(events[i].data.u64);
    if (it == paths_by_key_.end()) continue;             // failed while handling an earlier event
    progress |= service(*it->second, events[i].events);  // acknowledges what it read
  }
  return progress;
}

}  // namespace plexus::daemon
