// The control socket between clients and plexusd: length-framed Cap'n Proto messages
// (common/frame_codec.h) on a unix stream socket, with file descriptors passed by
// SCM_RIGHTS, and the limits both sides hold each other to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/frame_codec.h"
#include "common/unique_fd.h"

namespace plexus::shm {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kMaxClientFrameBytes = 64 * 1024;
inline constexpr size_t kMaxDaemonFrameBytes = 4 * 1024 * 1024;
inline constexpr size_t kMaxFdsPerFrame = 4;

// sendmsg of a whole frame (retrying partial writes; blocks on a blocking socket).
// Returns "" or the error sentence.
[[nodiscard]] std::string send_frame(int sock, std::span<const std::byte> frame,
                                     std::span<const int> fds = {});

// One recvmsg: bytes into buf, received descriptors appended to *fds (close-on-exec).
// Returns bytes read (0 = peer closed), or -1 with errno set (EAGAIN included).
// Sets *truncated when the kernel dropped descriptors (MSG_CTRUNC).
ssize_t recv_with_fds(int sock, std::byte* buf, size_t cap, std::vector<common::UniqueFd>* fds,
                      bool* truncated);

// The default control socket: $PLEXUS_SOCKET, else /run/plexus/plexusd.sock for root,
// else $XDG_RUNTIME_DIR/plexus/plexusd.sock, else /tmp/plexus-<uid>/plexusd.sock.
std::string default_socket_path();

}  // namespace plexus::shm
