// Length-framed Cap'n Proto messages on a unix stream socket, with file descriptors
// passed by SCM_RIGHTS. The decoder is incremental and bounded: a frame longer than
// its limit, or a message that fails Cap'n Proto's traversal/nesting limits, is an
// error the caller turns into closing the connection.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "shm/memfd.h"

namespace plexus::shm {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kMaxClientFrameBytes = 64 * 1024;
inline constexpr size_t kMaxDaemonFrameBytes = 4 * 1024 * 1024;
inline constexpr size_t kMaxFdsPerFrame = 4;

// Reader limits for untrusted messages.
capnp::ReaderOptions untrusted_reader_options();

std::vector<std::byte> encode_frame(capnp::MessageBuilder& message);

class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}

  void append(const std::byte* data, size_t n);
  // The next complete frame's message words, std::nullopt when incomplete. On a
  // malformed length sets *error and returns std::nullopt.
  std::optional<kj::Array<capnp::word>> next(std::string* error);
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  size_t max_frame_bytes_;
  std::vector<std::byte> buffer_;
  size_t consumed_ = 0;
};

// sendmsg of a whole frame (retrying partial writes; blocks on a blocking socket).
// Returns "" or the error sentence.
std::string send_frame(int sock, std::span<const std::byte> frame, std::span<const int> fds = {});

// One recvmsg: bytes into buf, received descriptors appended to *fds (close-on-exec).
// Returns bytes read (0 = peer closed), or -1 with errno set (EAGAIN included).
// Sets *truncated when the kernel dropped descriptors (MSG_CTRUNC).
ssize_t recv_with_fds(int sock, std::byte* buf, size_t cap, std::vector<UniqueFd>* fds,
                      bool* truncated);

// The default control socket: $PLEXUS_SOCKET, else /run/plexus/plexusd.sock for root,
// else $XDG_RUNTIME_DIR/plexus/plexusd.sock, else /tmp/plexus-<uid>/plexusd.sock.
std::string default_socket_path();

}  // namespace plexus::shm
