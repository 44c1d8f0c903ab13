// A path to a peer daemon over an RDMA reliable-connection queue pair, behind the same
// DataPath interface as TCP. The queue pair is set up over the path's authenticated TCP data
// connection: each side finds the verbs port holding its end's address (verbs_port.h), and
// both exchange queue pair numbers, GIDs and the address and key of their receive ring on that
// socket, which then stays open only to notice the peer going (its close, or any byte after
// the setup, ends the path).
//
// Frames go whole by RDMA WRITE WITH IMMEDIATE into the peer's receive ring (RemoteRing says
// where; the immediate value is the offset), copied first into a registered send bounce ring;
// the receiver hands ring space and receive work requests back with small SENDs of credit.
// Completions arrive on a completion channel whose descriptor, with the socket's, sits behind
// the one descriptor the links' event loop polls. Nothing is allocated per frame. A work
// completion in error (retry exceeded, a flushed queue, a remote access error) or a fatal
// async event fails the path at once, naming what the device said, and the reliable channel
// sends its unacknowledged frames again on the others.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "transports/path/data_path.h"

namespace plexus::transports::rdma {

struct RdmaSettings {
  // The receive ring the peer writes frames into, per path: at least one largest frame
  // (4 MiB of payload and its header); more lets frames stream while credit comes back.
  uint64_t ring_bytes = uint64_t{16} << 20;
  // The registered buffer frames are copied into before they are posted, per path.
  uint64_t bounce_bytes = uint64_t{16} << 20;
  uint32_t receive_depth = 256;  // receive work requests kept posted (frames and credit)
  uint32_t send_depth = 256;     // send queue entries
  // The queue pair's local ACK timeout (4.096 us x 2^timeout: 14 is 67 ms) and retries: a
  // link that stays silent fails the path after about (retry_count + 1) timeouts.
  uint8_t ack_timeout = 14;
  uint8_t retry_count = 7;
  // How long the setup exchange on the socket may take before the path fails.
  std::chrono::milliseconds setup_timeout{10000};
};

// The opener of an RDMA path over `fd` (a connected, authenticated stream socket whose local
// address a verbs device carries), which it owns from now on. The path fails at once, naming
// why, if no verbs port holds the address or the queue pair cannot be made.
PathOpener rdma_path_opener(int fd, RdmaSettings settings);

}  // namespace plexus::transports::rdma
