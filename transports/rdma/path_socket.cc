#include "transports/rdma/path_socket.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "transports/rdma/errno_text.h"

namespace plexus::transports::rdma {
namespace {

constexpr std::byte kReadyByte{'R'};

}  // namespace

std::optional<uint32_t> PathSocket::local_ipv4() const {
  sockaddr_in address{};
  socklen_t len = sizeof address;
  if (::getsockname(socket_.get(), reinterpret_cast<sockaddr*>(&address), &len) != 0 ||
      address.sin_family != AF_INET) {
    return std::nullopt;
  }
  return address.sin_addr.s_addr;
}

std::optional<uint32_t> PathSocket::peer_ipv4() const {
  sockaddr_in address{};
  socklen_t len = sizeof address;
  if (::getpeername(socket_.get(), reinterpret_cast<sockaddr*>(&address), &len) != 0 ||
      address.sin_family != AF_INET) {
    return std::nullopt;
  }
  return address.sin_addr.s_addr;
}

std::string PathSocket::send_hello(std::span<const std::byte> hello) {
  if (::send(socket_.get(), hello.data(), hello.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(hello.size())) {
    return errno_text("sending the RDMA setup", errno);
  }
  return {};
}

std::string PathSocket::send_ready() {
  if (::send(socket_.get(), &kReadyByte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
    return errno_text("sending ready on the path's socket", errno);
  }
  return {};
}

common::Result<PathSocket::Step> PathSocket::read() {
  for (;;) {
    std::byte buffer[kHelloBytes];
    size_t want = sizeof buffer;
    if (peer_hello_read_ < kHelloBytes)
      want = kHelloBytes - peer_hello_read_;
    else if (!peer_ready_)
      want = 1;
    const ssize_t n = ::recv(socket_.get(), buffer, want, MSG_DONTWAIT);
    if (n == 0) {
      peer_closed_ = true;
      return common::fail(!peer_ready_
                              ? "the peer closed the connection during the RDMA setup"
                              : "the peer closed the path's connection (its daemon stopped or "
                                "gave this node up)");
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Step::kDrained;
      if (errno == EINTR) continue;
      return common::fail(errno_text("recv on the path's socket", errno));
    }
    if (peer_hello_read_ < kHelloBytes) {
      std::memcpy(peer_hello_.data() + peer_hello_read_, buffer, static_cast<size_t>(n));
      peer_hello_read_ += static_cast<size_t>(n);
      return peer_hello_read_ == kHelloBytes ? Step::kHello : Step::kHeard;
    }
    if (!peer_ready_ && n == 1 && buffer[0] == kReadyByte) {
      peer_ready_ = true;
      return Step::kPeerReady;
    }
    return common::fail("unexpected bytes from the peer on the path's socket after the RDMA setup");
  }
}

void PathSocket::close_abortively() {
  const linger abort_on_close{1, 0};
  ::setsockopt(socket_.get(), SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
}

}  // namespace plexus::transports::rdma
