// What the links publish for other threads: the snapshot plexusctl and the exporter read (each
// peer's paths, their state, bytes, measured and transport rates), the drained NICs, and the
// telemetry windows per NIC. Owns them under one mutex, and the telemetry settings the windows
// are made with. Written on the engine thread (PeerLinks publishes, and makes a path's windows
// as it opens); read from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "daemon/links/path_windows.h"
#include "monitor/window_ring.h"
#include "transports/channel/reliable_channel.h"

namespace plexus::daemon {

class LinksSnapshot {
 public:
  struct PathInfo {
    std::string nic;        // local interface
    std::string transport;  // "tcp", "rdma" (DataPath::transport)
    std::string local;
    std::string remote;
    std::string state;     // active, standby (a backup), probation, drained
    bool latency = false;  // the latency class's connection
    uint64_t bytes_sent = 0;
    uint64_t bytes_received = 0;
    double rate_bytes_per_s = 0;  // measured while busy; 0 until then
    // The transport's latest delivery-rate sample and RTT (DataPath::delivery).
    double delivery_bytes_per_s = 0;
    bool delivery_app_limited = false;
    double rtt_us = 0;
    uint64_t kernel_unsent_bytes = 0;  // queued in its socket, not yet sent
    // Its windowed telemetry (null when off): data bytes and chunks each way, resent bytes,
    // failures, and the time from a chunk's send to its acknowledgement.
    std::shared_ptr<const monitor::WindowRing> windows;
  };
  struct PeerInfo {
    uint64_t instance = 0;
    std::string name;
    bool reliable = false;
    std::vector<PathInfo> paths;
    transports::ReliableChannel::Counters counters;
    int64_t down_for_ms = -1;  // no live path for this long; -1 while one is live, or dormant
    bool dormant = false;      // its paths closed while idle (PeerLinks); not down
  };

  // Windowed telemetry per path and per NIC (monitor/window_ring.h): `windows` of `width`
  // each kept per NIC, and `path_windows` per path with traffic (0: `windows`;
  // path_windows.h); a zero width (Telemetry{}) turns it off. No member initializers: GCC
  // cannot use them in NodeLinks' constructor's default argument.
  struct Telemetry {
    std::chrono::nanoseconds width;
    size_t windows;
    size_t path_windows;
  };

  explicit LinksSnapshot(Telemetry telemetry) : telemetry_(telemetry) {}

  // A new path's windows over local NIC `nic` ("" when unknown) and its NIC's, shared by every
  // path over it; both null when telemetry is off.
  std::pair<std::unique_ptr<PathWindows>, std::shared_ptr<monitor::WindowRing>> windows_for_path(
      const std::string& nic);

  void publish(std::vector<PeerInfo> peers, std::vector<std::string> drained);
  // As of the last publish(); safe from any thread.
  std::vector<PeerInfo> peers() const;
  std::vector<std::string> drained() const;
  // Per local NIC ("?" when unknown), the windows of every path over it, past and present
  // (empty when telemetry is off); safe from any thread.
  std::map<std::string, std::shared_ptr<const monitor::WindowRing>> nic_windows() const;

 private:
  const Telemetry telemetry_;
  mutable std::mutex mutex_;
  std::vector<PeerInfo> peers_;
  std::vector<std::string> drained_;
  std::map<std::string, std::shared_ptr<monitor::WindowRing>> nic_windows_;
};

}  // namespace plexus::daemon
