// What one RDMA path holds of its verbs device (rdma_path.cc owns one): the port, the device
// it shares with the other paths over it (its context, protection domain and pool window
// registrations, verbs_device.h), the path's bytes of the node's pinned-memory bound, the
// memory the peer writes frames into and this side sends and receives credit from, and those
// memories' registrations, the pins of the pool windows its frames are sent from
// (pool_windows.h), the completion channel and queue, the RC queue pair, and its interest in
// the device's async events; open() makes them, connect() and move_to_error() move the queue
// pair (qp_transitions.h). The frame transfer (frame_transfer.h) posts on them.
//
// The members are declared in the reverse of the order they must be freed in (not the order
// open() makes them), so the device's order holds: the event interest, then the queue pair (no
// work request is left to read anything), the completion queue and its channel, the window
// pins, the path's own registrations, the memory and its hold on the bound, and the shared
// device last (when this path was its last user: the windows, the domain, the context). Each
// verbs object is a VerbsPtr that holds the call freeing it: no hand-written destructor, and
// tests give fakes to check that order. Called only by the thread that runs the path (the
// links' event loop).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/unique_fd.h"
#include "transports/path/sendable_memory.h"
#include "transports/rdma/pinned_budget.h"
#include "transports/rdma/pool_windows.h"
#include "transports/rdma/rdma_hello.h"
#include "transports/rdma/rdma_path.h"
#include "transports/rdma/verbs_device.h"
#include "transports/rdma/verbs_devices.h"
#include "transports/rdma/verbs_port.h"
#include "transports/rdma/verbs_ptr.h"

namespace plexus::transports::rdma {

// Anonymous memory, page aligned, for registration.
class Pages {
 public:
  explicit Pages(size_t bytes);
  ~Pages();
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;
  std::byte* data() const { return base_; }
  size_t size() const { return bytes_; }

 private:
  std::byte* base_ = nullptr;
  size_t bytes_;
};

struct PathVerbs {
  // Maps the memory the settings size (open() says if that failed).
  explicit PathVerbs(const RdmaSettings& settings);
  PathVerbs(const PathVerbs&) = delete;
  PathVerbs& operator=(const PathVerbs&) = delete;

  // Makes everything on `found` (the port holding the path's address, and its device), its
  // memory's bytes held by `pinned`, and moves the queue pair to INIT; sends from pool windows
  // only where `sendable` announces pools and pinning is not capped. Empty, or why not.
  std::string open(VerbsDevices::Found found, PinnedBudget::Hold pinned,
                   const RdmaSettings& settings, std::shared_ptr<const SendableMemory> sendable);
  // The queue pair to RTR, to the peer its setup message describes, and on to RTS with this
  // side's `psn`. Empty, or why not.
  std::string connect(const Hello& peer, const RdmaSettings& settings, uint32_t psn);
  // The queue pair to IBV_QPS_ERR: every posted work request completes flushed.
  std::string move_to_error();
  // Takes the device's async events (whichever path's they are: each is told, and woken
  // through `wake`): why this path must fail (its queue pair or completion queue in error,
  // its port down, the device failed), or empty.
  std::string fatal_async_event();

  VerbsPort port;                       // the device's context, freed last
  std::shared_ptr<VerbsDevice> device;  // shared: the domain, the window registrations
  PinnedBudget::Hold pinned;            // the memory below, of the node's bound
  Pages ring;                           // the peer writes frames here
  Pages bounce;                         // frames are copied here to be written
  Pages slots;   // receive work requests' buffers (credit messages land here)
  Pages credit;  // the credit this side sends
  VerbsPtr<ibv_mr> credit_mr{nullptr, ibv_dereg_mr};
  VerbsPtr<ibv_mr> slots_mr{nullptr, ibv_dereg_mr};
  VerbsPtr<ibv_mr> bounce_mr{nullptr, ibv_dereg_mr};
  VerbsPtr<ibv_mr> ring_mr{nullptr, ibv_dereg_mr};
  std::optional<PoolWindows> pool_windows;
  VerbsPtr<ibv_comp_channel> channel{nullptr, ibv_destroy_comp_channel};
  VerbsPtr<ibv_cq> cq{nullptr, ibv_destroy_cq};
  VerbsPtr<ibv_qp> qp{nullptr, ibv_destroy_qp};
  common::UniqueFd wake;  // an eventfd: the device told `watcher` something
  VerbsDevice::Watcher watcher;
  VerbsDevice::Watch watch;  // of the device's async events, for this path's objects
};

}  // namespace plexus::transports::rdma
