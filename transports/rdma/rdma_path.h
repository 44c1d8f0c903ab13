// A path to a peer daemon over an RDMA reliable-connection queue pair, behind the same
// DataPath interface as TCP. The queue pair is set up over the path's authenticated TCP data
// connection: each side finds the verbs port holding its end's address (verbs_port.h), and
// both exchange queue pair numbers, GIDs and the address and key of their receive ring on that
// socket, which then stays open only to notice the peer going (its close, or any byte after
// the setup, ends the path).
//
// Frames go whole by RDMA WRITE WITH IMMEDIATE into the peer's receive ring (RemoteRing says
// where; the immediate value is the offset). A large payload in an announced client pool
// (transports/path/sendable_memory.h) goes straight from there as the second scatter entry,
// after its header in a registered send bounce ring, its window of the pool registered on
// first use and kept while used (mr_cache.h); any other payload is copied into that bounce
// ring first;
// the receiver hands ring space and receive work requests back with small SENDs of credit.
// Completions arrive on a completion channel whose descriptor, with the socket's, sits behind
// the one descriptor the links' event loop polls. Nothing is allocated per frame. A work
// completion in error (retry exceeded, a flushed queue, a remote access error) or a fatal
// async event fails the path at once, naming what the device said, and the reliable channel
// sends its unacknowledged frames again on the others.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transports/path/data_path.h"
#include "transports/path/sendable_memory.h"
#include "transports/rdma/pinned_budget.h"

namespace plexus::transports::rdma {

struct RdmaSettings {
  // The receive ring the peer writes frames into, per path: at least one largest frame
  // (4 MiB of payload and its header); more lets frames stream while credit comes back.
  uint64_t ring_bytes = uint64_t{16} << 20;
  // The registered buffer frames are copied into before they are posted, per path.
  uint64_t bounce_bytes = uint64_t{16} << 20;
  // Payloads at least this large go straight from an announced client pool; smaller ones,
  // and any from memory not announced, are copied into the bounce ring (for a small frame
  // the copy costs less than a second scatter entry). 0: always copy.
  uint64_t zero_copy_min_bytes = uint64_t{64} << 10;
  // A pool is registered in windows of this size, one starting every half window, so that
  // a payload of up to half a window lies wholly in one (registering whole pools would pin
  // every page of every client's pool).
  uint64_t registration_window_bytes = uint64_t{16} << 20;
  // Windows kept registered per device, shared by its paths (pinned memory, within
  // pinned_max_bytes too): past that the least recently used one no work request holds goes.
  uint32_t max_registrations = 64;
  // Everything RDMA pins on the node, every device and path: rings and bounce buffers
  // (32 MiB a path at the sizes above; plexusd sizes the rings so that its link cap's paths
  // take at most this, daemon/config.cc: 64 paths over one NIC take half) and registered pool
  // windows. A path whose
  // rings do not fit is not opened over RDMA (TCP instead, or with --transport rdma the
  // connection is refused, naming this bound); windows that do not fit are not registered
  // (their payloads are copied) and give way to a new path's rings.
  uint64_t pinned_max_bytes = uint64_t{4} << 30;
  uint32_t receive_depth = 256;  // receive work requests kept posted (frames and credit)
  uint32_t send_depth = 256;     // send queue entries
  // The queue pair's local ACK timeout (4.096 us x 2^timeout: 14 is 67 ms) and retries: a
  // link that stays silent fails the path after about (retry_count + 1) timeouts.
  uint8_t ack_timeout = 14;
  uint8_t retry_count = 7;
  // How long the setup exchange on the socket may take before the path fails.
  std::chrono::milliseconds setup_timeout{10000};
};

// Receives posted beyond those advertised for frames: a credit SEND completes when the
// peer's device has it, not when the peer's daemon has reposted the receive it took, so a
// few credits can land before the peer catches up; these take them without a
// receiver-not-ready stall (rnr_retry stays the backstop).
inline constexpr uint32_t kCreditReceives = 32;

// The receive work requests a path keeps posted (frames and credit), one slot each.
inline uint64_t receive_slots(const RdmaSettings& settings) {
  return uint64_t{settings.receive_depth} + kCreditReceives;
}

// What a receive work request's buffer holds (a credit, with room to spare).
inline constexpr size_t kReceiveSlotBytes = 64;
// The buffer a path's credit messages are sent from (a page).
inline constexpr uint64_t kCreditBufferBytes = 4096;

// What one path pins of its own: its receive ring, bounce ring, receive slots and credit.
inline uint64_t path_pinned_bytes(const RdmaSettings& settings) {
  return settings.ring_bytes + settings.bounce_bytes + receive_slots(settings) * kReceiveSlotBytes +
         kCreditBufferBytes;
}

class VerbsDevices;

// The opener of an RDMA path over `fd` (a connected, authenticated stream socket whose local
// address a verbs device carries), which it owns from now on. The path fails at once, naming
// why, if no verbs port holds the address, its rings do not fit the node's pinned-memory
// bound or the queue pair cannot be made. Payloads in memory announced in `sendable` go
// without a copy (null: every payload is copied). `devices`: the daemon's devices and bound,
// shared by its paths (null: this path's own, bounded by settings.pinned_max_bytes).
// `reserved`: the path's rings, held against the bound when RDMA was offered (empty: held
// when the path opens).
PathOpener rdma_path_opener(int fd, RdmaSettings settings,
                            std::shared_ptr<const SendableMemory> sendable = nullptr,
                            std::shared_ptr<VerbsDevices> devices = nullptr,
                            PinnedBudget::Hold reserved = {});

}  // namespace plexus::transports::rdma
