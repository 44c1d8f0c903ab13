// How long the peer's kernel has sent this socket nothing (no data, no acknowledgement), from
// TCP_INFO: tells a path whose far end is unreachable from one whose far end is only slow to
// run its daemon (its kernel still acknowledges what arrives), which failing over would not
// help.
#pragma once

#include <cstdint>

namespace plexus::transports {

// Milliseconds since the kernel last received anything from the peer on connected TCP
// socket `fd`; 0 while the peer advertises a zero window (it is alive, its reader is not
// keeping up); -1 when the kernel cannot say.
int64_t tcp_peer_silence_ms(int fd);

// Whether the peer's kernel has acknowledged everything sent on connected TCP socket `fd`
// (false when the kernel cannot say). For the log only: a message acknowledged but not
// answered may mean a daemon stopped, or an answer lost by a network failing after it.
bool tcp_peer_acknowledged_all(int fd);

}  // namespace plexus::transports
