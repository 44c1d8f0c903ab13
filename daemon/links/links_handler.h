// What the links tell their owner (the engine's internode runner): frames that arrived, and
// links, paths and NICs that failed or came back. Set once, with designated initializers, and
// called on the engine thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "transports/path/data_path.h"
#include "transports/wire/data_frame.h"

namespace plexus::daemon {

struct LinksHandler {
  // A data frame from `peer`. Return "" or why it is unacceptable: the link then fails.
  std::function<std::string(uint64_t peer, const transports::wire::DataFrameHeader&,
                            std::span<const std::byte>)>
      on_frame;
  // Optional: where a large data frame's payload may be read to directly
  // (DataPath::Callbacks::place), and its end.
  std::function<transports::Placement(uint64_t peer, const transports::wire::DataFrameHeader&)>
      place;
  std::function<std::string(uint64_t peer, const transports::wire::DataFrameHeader&)> on_placed;
  // The link to `peer` failed (reason says how); it has been removed.
  std::function<void(uint64_t peer, const std::string& name, const std::string& reason)> on_lost;
  // Optional: a path to `peer` over local NIC `nic`, to the peer's "ip:port" `remote` ("?"
  // when its socket was reset before the path learnt it), the latency class's or not, failed
  // while the peer is kept (other paths, or the grace period); the side that dialled it
  // (`rail_key`: the rail it dialled it for, "" on the side that accepted it) connects it
  // again. `pathless`: it was the link's last path, and the link's frames wait out the
  // grace period for one to come back.
  std::function<void(uint64_t peer, const std::string& nic, const std::string& remote,
                     const std::string& rail_key, bool latency, bool pathless)>
      on_path_lost;
  // Optional: local NIC `nic` is up again (netlink).
  std::function<void(const std::string& nic)> on_nic_up;
  // Optional: a frame of `flow` with `bytes` of payload left a channel's send scheduler
  // for a path after waiting `waited` there (per-job share and queue delay).
  std::function<void(uint32_t flow, uint64_t bytes, std::chrono::nanoseconds waited)> on_scheduled;
  // Optional: the link to `peer` has its first path (a new link, or one that waited for it).
  std::function<void(uint64_t peer)> on_linked;
  // Optional: an op under way exchanges with `peer` now: its link does not close while idle
  // (however long the op waits), so the notices of a failure reach the peer.
  std::function<bool(uint64_t peer)> busy;
  // Optional: the link to `peer` closed its paths by agreement while idle and stays, dormant:
  // nothing failed, and a connection is opened again on its next use.
  std::function<void(uint64_t peer)> on_retired;
  // Optional: a link that was closing its paths is wanted again now that they are closed:
  // open a data connection to one of `addresses` (as after NodeLinks::want returned true).
  std::function<void(uint64_t peer, const std::vector<std::string>& addresses)> on_wanted;
};

}  // namespace plexus::daemon
