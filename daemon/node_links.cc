// Peer links: chunking, per-chunk tokens from a free list, epoll interest, loss.
#include "daemon/node_links.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace plexus::daemon {

namespace wire = transports::wire;

NodeLinks::NodeLinks(Handler handler, uint32_t chunk_bytes)
    : handler_(std::move(handler)),
      chunk_bytes_(chunk_bytes),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (!epoll_) throw std::system_error(errno, std::generic_category(), "node links epoll");
}

NodeLinks::~NodeLinks() = default;

const std::string* NodeLinks::name_of(uint64_t peer) const {
  auto it = links_.find(peer);
  return it == links_.end() ? nullptr : &it->second->name;
}

void NodeLinks::add(uint64_t peer, std::string name, int fd) {
  if (has(peer)) lose(peer, "replaced by a new connection");
  auto link = std::make_unique<Link>();
  link->peer = peer;
  link->name = std::move(name);
  Link* raw = link.get();
  transports::TcpConnection::Callbacks callbacks;
  callbacks.on_frame = [this, peer](const wire::DataFrameHeader& h,
                                    std::span<const std::byte> payload) {
    return handler_.on_frame(peer, h, payload);
  };
  callbacks.on_sent = [this](uint64_t token) { chunk_sent(token); };
  if (handler_.place) {
    callbacks.place = [this, peer](const wire::DataFrameHeader& h) {
      return handler_.place(peer, h);
    };
    callbacks.on_placed = [this, peer](const wire::DataFrameHeader& h) {
      return handler_.on_placed(peer, h);
    };
  }
  wire::DataFrameLimits limits;
  limits.max_payload_bytes = std::max<uint32_t>(chunk_bytes_, 64 * 1024);
  link->conn = std::make_unique<transports::TcpConnection>(fd, limits, std::move(callbacks));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = peer;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw->conn->fd(), &ev);
  links_[peer] = std::move(link);
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
    link.conn->queue(h, data.subspan(offset, bytes), token);
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
  link.conn->queue(h, {}, take_token(peer, nullptr, std::move(done)));
  flush(link);
  return true;
}

// Writes what the kernel takes now: the common case needs no epoll round trip.
void NodeLinks::flush(Link& link) {
  if (!link.conn->on_writable()) {
    lose(link.peer, link.conn->error());
    return;
  }
  update_interest(link);
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
  link.conn->queue(h, payload, take_token(peer, text, nullptr));
  if (!link.conn->on_writable()) {
    lose(peer, link.conn->error());
    return;
  }
  update_interest(link);
}

void NodeLinks::abandon_placements(const void* owner) {
  for (auto& [peer, link] : links_) link->conn->abandon_placement(owner);
}

void NodeLinks::update_interest(Link& link) {
  const bool want = link.conn->wants_write();
  if (want == link.watching_out) return;
  epoll_event ev{};
  ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
  ev.data.u64 = link.peer;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, link.conn->fd(), &ev);
  link.watching_out = want;
}

void NodeLinks::lose(uint64_t peer, std::string reason) {
  auto it = links_.find(peer);
  if (it == links_.end()) return;
  std::unique_ptr<Link> link = std::move(it->second);
  links_.erase(it);
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, link->conn->fd(), nullptr);
  link->conn.reset();  // its queued chunks will never be written: release their memory
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

bool NodeLinks::service(Link& link, uint32_t events) {
  const uint64_t before = link.conn->bytes_received() + link.conn->bytes_sent();
  bool ok = true;
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ok = link.conn->on_readable();
  if (ok && (events & EPOLLOUT)) ok = link.conn->on_writable();
  const bool progress = link.conn->bytes_received() + link.conn->bytes_sent() != before;
  if (!ok) {
    lose(link.peer, link.conn->error());
    return true;
  }
  update_interest(link);
  return progress;
}

bool NodeLinks::poll(int timeout_ms) {
  if (links_.empty()) return false;
  epoll_event events[32];
  const int n = ::epoll_wait(epoll_.get(), events, 32, timeout_ms);
  bool progress = false;
  for (int i = 0; i < n; ++i) {
    auto it = links_.find(events[i].data.u64);
    if (it == links_.end()) continue;  // lost while handling an earlier event
    progress |= service(*it->second, events[i].events);
  }
  return progress;
}

}  // namespace plexus::daemon
