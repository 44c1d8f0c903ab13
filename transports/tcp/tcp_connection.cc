// Frame queueing and parsing on a non-blocking TCP socket.
#include "transports/tcp/tcp_connection.h"

#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace plexus::transports {
namespace {

constexpr size_t kMaxIov = 64;
constexpr size_t kGulpBytes = 64 << 10;
// A receive buffer starts this small (heartbeats, acknowledgements) and doubles while reads
// fill it.
constexpr size_t kFirstBufferBytes = 4 << 10;

}  // namespace

TcpConnection::TcpConnection(int fd, wire::DataFrameLimits limits, Callbacks callbacks)
    : fd_(fd), limits_(limits), callbacks_(std::move(callbacks)), ring_(64) {
  const int flags = ::fcntl(fd_, F_GETFL);
  ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  iov_.reserve(kMaxIov);
}

TcpConnection::~TcpConnection() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {
uint64_t socket_queue_bytes(int fd, unsigned long request) {
  int bytes = 0;
  if (::ioctl(fd, request, &bytes) != 0 || bytes < 0) return 0;
  return static_cast<uint64_t>(bytes);
}
}  // namespace

uint64_t TcpConnection::kernel_unacknowledged_bytes() const {
  return socket_queue_bytes(fd_, SIOCOUTQ);
}

uint64_t TcpConnection::kernel_unsent_bytes() const { return socket_queue_bytes(fd_, SIOCOUTQNSD); }

size_t TcpConnection::release_buffer() {
  if (filled_ != consumed_ || placed_.destination.data() != nullptr) return 0;
  const size_t held = buffer_bytes();
  std::vector<std::byte>().swap(in_);
  std::vector<std::byte>().swap(sink_);
  consumed_ = filled_ = frame_bytes_ = 0;
  read_filled_ = false;
  return held;
}

bool TcpConnection::fail(std::string reason) {
  if (error_.empty()) error_ = std::move(reason);
  return false;
}

bool TcpConnection::fail_closed(std::string reason) {
  if (error_.empty()) peer_closed_ = true;
  return fail(std::move(reason));
}

bool TcpConnection::fail_errno(const char* what) {
  return fail(std::string(what) + std::strerror(errno));
}

void TcpConnection::queue(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
                          uint64_t token) {
  if (queued_ == ring_.size()) {
    std::vector<Outgoing> bigger(ring_.size() * 2);
    for (size_t i = 0; i < queued_; ++i) bigger[i] = slot(i);
    ring_ = std::move(bigger);
    head_ = 0;
  }
  Outgoing& out = ring_[(head_ + queued_) % ring_.size()];
  wire::encode_data_frame_header(header, out.header);
  out.payload = payload;
  out.token = token;
  out.written = 0;
  ++queued_;
  queued_bytes_ += out.header.size() + payload.size();
}

void TcpConnection::queue_urgent(const wire::DataFrameHeader& header,
                                 std::span<const std::byte> payload, uint64_t token) {
  queue(header, payload, token);
  // Move it forward past every frame not begun; the head may be half written.
  const size_t first_free = (queued_ > 1 && slot(0).written > 0) ? 1 : 0;
  for (size_t i = queued_ - 1; i > first_free; --i) std::swap(slot(i), slot(i - 1));
}

bool TcpConnection::on_writable() {
  if (!error_.empty()) return false;
  // on_sent may queue more frames and call us again: the outer call writes them.
  if (writing_) return true;
  writing_ = true;
  const bool ok = write_queued();
  writing_ = false;
  return ok;
}

bool TcpConnection::write_queued() {
  while (queued_ > 0) {
    iov_.clear();
    for (size_t i = 0; i < queued_ && iov_.size() + 2 <= kMaxIov; ++i) {
      const Outgoing& out = slot(i);
      size_t skip = out.written;
      if (skip < out.header.size()) {
        iov_.push_back(
            {const_cast<std::byte*>(out.header.data()) + skip, out.header.size() - skip});
        skip = 0;
      } else {
        skip -= out.header.size();
      }
      if (out.payload.size() > skip) {
        iov_.push_back(
            {const_cast<std::byte*>(out.payload.data()) + skip, out.payload.size() - skip});
      }
    }
    const ssize_t n = ::writev(fd_, iov_.data(), static_cast<int>(iov_.size()));
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      return fail_errno("send failed: ");
    }
    bytes_sent_ += static_cast<uint64_t>(n);
    auto left = static_cast<size_t>(n);
    while (queued_ > 0) {
      Outgoing& out = slot(0);
      const size_t total = out.header.size() + out.payload.size();
      const size_t take = std::min(left, total - out.written);
      out.written += take;
      queued_bytes_ -= take;
      left -= take;
      if (out.written < total) break;
      const uint64_t token = out.token;
      const size_t payload_bytes = out.payload.size();
      head_ = (head_ + 1) % ring_.size();
      --queued_;
      if (callbacks_.on_sent) callbacks_.on_sent(token, payload_bytes);
      if (!error_.empty()) return false;
    }
  }
  return true;
}

bool TcpConnection::parse_frames() {
  frame_bytes_ = 0;
  while (filled_ - consumed_ >= wire::kDataFrameHeaderBytes) {
    const std::byte* at = in_.data() + consumed_;
    auto decoded = wire::decode_data_frame_header(
        std::span<const std::byte, wire::kDataFrameHeaderBytes>(at, wire::kDataFrameHeaderBytes),
        limits_);
    if (!decoded.ok()) return fail(decoded.error);
    const wire::DataFrameHeader& header = decoded.header;
    const size_t frame = wire::kDataFrameHeaderBytes + header.length;
    if (filled_ - consumed_ < frame) {
      if (header.length >= kPlaceMinBytes && try_place(header)) return true;
      frame_bytes_ = frame;
      break;
    }
    std::string error = callbacks_.on_frame(
        header, {at + wire::kDataFrameHeaderBytes, static_cast<size_t>(header.length)});
    if (!error.empty()) return fail(std::move(error));
    consumed_ += frame;
  }
  if (consumed_ == filled_) consumed_ = filled_ = 0;
  return true;
}

bool TcpConnection::try_place(const wire::DataFrameHeader& header) {
  if (!callbacks_.place || header.type != wire::FrameType::kData) return false;
  Placement placement = callbacks_.place(header);
  if (placement.destination.size() != header.length) return false;
  // What has come of the payload moves once; the rest is read straight into place.
  const size_t have = filled_ - consumed_ - wire::kDataFrameHeaderBytes;
  std::memcpy(placement.destination.data(), in_.data() + consumed_ + wire::kDataFrameHeaderBytes,
              have);
  consumed_ = filled_ = 0;
  placed_header_ = header;
  placed_ = std::move(placement);
  placed_done_ = have;
  return true;
}

bool TcpConnection::placing() const {
  return placed_.destination.data() != nullptr && !placement_abandoned_;
}

void TcpConnection::abandon_current_placement(bool by_owner) {
  placement_abandoned_ = true;
  abandoned_by_owner_ = by_owner;
  placed_.keep_alive.reset();
}

bool TcpConnection::abandon_placement(const void* owner) {
  if (!placing() || placed_.keep_alive.get() != owner) return false;
  abandon_current_placement(true);
  return true;
}

bool TcpConnection::abandon_placement_of(uint64_t channel_seq) {
  if (!placing() || placed_header_.channel_seq != channel_seq) return false;
  abandon_current_placement(false);
  return true;
}

bool TcpConnection::read_placed() {
  size_t left = placed_.destination.size() - placed_done_;
  std::byte* to = placed_.destination.data() + placed_done_;
  if (placement_abandoned_) {
    if (sink_.empty()) sink_.resize(kGulpBytes);
    to = sink_.data();
    left = std::min(left, sink_.size());
  }
  const ssize_t n = ::read(fd_, to, left);
  if (n == 0) return fail_closed("peer closed the connection");
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
    return fail_errno("receive failed: ");
  }
  placed_done_ += static_cast<size_t>(n);
  bytes_received_ += static_cast<uint64_t>(n);
  return true;
}

size_t TcpConnection::make_room() {
  const size_t pending = filled_ - consumed_;
  // The rest of a frame whose header is in, exactly: a large frame then ends the buffer
  // and the next read starts afresh at its front, so payloads are never moved. At a frame
  // boundary, a gulp: small frames come many per read.
  const size_t want = frame_bytes_ > 0 ? frame_bytes_ - pending : kGulpBytes;
  if (in_.size() - filled_ < want) {
    if (pending > 0) std::memmove(in_.data(), in_.data() + consumed_, pending);
    filled_ = pending;
    consumed_ = 0;
    // At most one whole frame plus a gulp of what follows it.
    const size_t limit = wire::kDataFrameHeaderBytes + limits_.max_payload_bytes + kGulpBytes;
    size_t size = in_.size();
    if (frame_bytes_ > 0) {
      size = std::max(size, pending + want);  // the frame whose header is in, whole
    } else if (size == 0 || (read_filled_ && size < pending + want)) {
      size = std::max(kFirstBufferBytes, size * 2);  // small frames come many per read
    }
    size = std::min(size, limit);
    if (size > in_.size()) in_.resize(size);
  }
  return std::min(want, in_.size() - filled_);
}

bool TcpConnection::on_readable(size_t max_bytes) {
  if (!error_.empty()) return false;
  size_t got = 0;
  while (got < max_bytes) {
    if (placed_.destination.data() != nullptr) {
      const size_t before = placed_done_;
      if (!read_placed()) return false;
      if (placed_done_ == before) break;  // nothing more to read now
      got += placed_done_ - before;
      if (placed_done_ < placed_.destination.size()) continue;
      Placement done = std::move(placed_);
      placed_ = {};
      if (placement_abandoned_) {
        placement_abandoned_ = false;
        if (abandoned_by_owner_ && callbacks_.on_discarded) {
          if (std::string error = callbacks_.on_discarded(placed_header_); !error.empty()) {
            return fail(std::move(error));
          }
        }
        continue;
      }
      std::string error = callbacks_.on_placed(placed_header_);
      if (!error.empty()) return fail(std::move(error));
      continue;
    }
    const size_t want = make_room();
    if (want == 0) return fail("receive buffer full without a whole frame");
    const ssize_t n = ::read(fd_, in_.data() + filled_, want);
    if (n == 0) {
      parse_frames();
      return fail_closed("peer closed the connection");
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      return fail_errno("receive failed: ");
    }
    read_filled_ = static_cast<size_t>(n) == want;
    filled_ += static_cast<size_t>(n);
    got += static_cast<size_t>(n);
    bytes_received_ += static_cast<uint64_t>(n);
    if (!parse_frames()) return false;
  }
  // Collective rounds make every connection look interactive (data both ways), and the
  // kernel then delays ACKs, hoping to ride on a reply: a sender that is waiting for its
  // window stalls by the delayed-ACK timer. Quick ACKs are lost again on the kernel's
  // own judgement, so they are asked for after every read.
  if (got > 0) {
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
  }
  return true;
}

}  // namespace plexus::transports
