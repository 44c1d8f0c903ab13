// The authenticated TCP connection an RDMA path is set up over (rdma_path.cc), and the
// set-up exchange on it: each side sends its setup message (kHelloBytes, rdma_hello.h), reads
// the peer's, connects its queue pair and sends one ready byte; once the peer's ready byte is
// in, the socket only watches for the peer going (its close, or any byte, ends the path).
// Owns the socket and where the exchange stands (awaiting the peer's setup message, awaiting
// its ready byte, ready); the path does what each step asks (connects its queue pair on
// kHello, starts sending on kPeerReady). Knows nothing of verbs: tests drive it over a
// socketpair. Called only by the thread that runs the path (the links' event loop).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"
#include "transports/rdma/rdma_hello.h"

namespace plexus::transports::rdma {

class PathSocket {
 public:
  explicit PathSocket(int fd) : socket_(fd) {}

  int fd() const { return socket_.get(); }
  // The socket's own and its peer's IPv4 addresses (network byte order), if it has them.
  std::optional<uint32_t> local_ipv4() const;
  std::optional<uint32_t> peer_ipv4() const;

  // This side's setup message, and later its ready byte (after it, this side's queue pair can
  // receive): a few bytes into a connected socket's empty buffer go at once, or the path
  // fails. Empty, or why not.
  std::string send_hello(std::span<const std::byte> hello);
  std::string send_ready();

  enum class Step {
    kDrained,    // nothing more to read now
    kHeard,      // part of the peer's setup message
    kHello,      // the peer's whole setup message is in (peer_hello): connect the queue pair
    kPeerReady,  // the peer's queue pair can receive: frames may go
  };
  // Reads what the socket holds, up to the next step; or why the path fails (peer_closed()
  // if the peer closed the connection).
  common::Result<Step> read();

  // The peer's setup message, once read returned kHello.
  const std::byte* peer_hello() const { return peer_hello_.data(); }
  bool ready() const { return peer_ready_; }
  bool peer_closed() const { return peer_closed_; }
  // Closing now resets the connection rather than waiting for it to drain (SO_LINGER 0).
  void close_abortively();

 private:
  common::UniqueFd socket_;
  std::array<std::byte, kHelloBytes> peer_hello_{};
  size_t peer_hello_read_ = 0;
  bool peer_ready_ = false;
  bool peer_closed_ = false;
};

}  // namespace plexus::transports::rdma
