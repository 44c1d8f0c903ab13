// The links report (plexusctl paths, nics): this daemon's NICs and its paths to peer
// daemons, each with the last second of its telemetry windows.
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "daemon/control/admin_service.h"
#include "daemon/control/daemon_reply.h"
#include "monitor/window_summary.h"

namespace plexus::daemon {
namespace {

namespace control = shm::control;
using Clock = monitor::WindowRing::Clock;

// What the windows of the last second add up to.
void fill_recent(control::WindowStats::Builder out, const monitor::WindowRing& ring,
                 Clock::time_point now) {
  const monitor::WindowSummary s = monitor::summarize_recent(ring, now, std::chrono::seconds(1));
  out.setSeconds(std::chrono::duration<double>(ring.width()).count() *
                 static_cast<double>(s.windows));
  out.setBusyWindows(static_cast<uint32_t>(s.busy_windows));
  out.setBytesOut(s.bytes_out);
  out.setBytesIn(s.bytes_in);
  out.setResentBytes(s.resent_bytes);
  out.setErrors(s.errors);
  out.setBusyOutBytesPerS(s.busy_out_bytes_per_s);
  out.setLatencySamples(s.latency.count);
  out.setLatencyP50Us(s.latency.p50_us);
  out.setLatencyP99Us(s.latency.p99_us);
  out.setLatencyMaxUs(s.latency.max_us);
}

}  // namespace

std::vector<std::string> AdminService::peer_nic_names() const {
  std::vector<std::string> names;
  if (const transports::PeerIdentity* me = hooks_.peer_identity()) {
    for (const auto& nic : me->nics) names.push_back(nic.name);
  }
  return names;
}

std::string AdminService::operstate(const std::string& nic) {
  std::ifstream in("/sys/class/net/" + nic + "/operstate");
  std::string state;
  return in >> state ? state : "unknown";
}

void AdminService::links(uint64_t session, uint32_t request_id) {
  const transports::PeerIdentity* me = hooks_.peer_identity();
  const auto now = Clock::now();
  capnp::MallocMessageBuilder reply;
  auto root = daemon_reply(reply, request_id);
  auto links = root.initLinksReply();
  const std::vector<std::string> nics = peer_nic_names();
  auto nic_list = links.initNics(static_cast<unsigned>(nics.size()));
  for (unsigned i = 0; i < nic_list.size(); ++i) nic_list.set(i, nics[i]);
  const std::vector<std::string> drained_nics = engine_.links().drained_snapshot();
  auto drained = links.initDrained(static_cast<unsigned>(drained_nics.size()));
  for (unsigned d = 0; d < drained.size(); ++d) drained.set(d, drained_nics[d]);
  links.setTelemetryWindowUs(config_.telemetry ? config_.telemetry_window_us : 0);
  const auto peers = engine_.links().snapshot();
  auto list = links.initPeers(static_cast<unsigned>(peers.size()));
  std::map<std::string, uint32_t> live_paths;                    // by NIC
  std::map<std::string, std::set<std::string>> transports_over;  // by NIC
  for (unsigned i = 0; i < list.size(); ++i) {
    const NodeLinks::PeerInfo& info = peers[i];
    auto out = list[i];
    out.setNode(info.name);
    out.setInstance(info.instance);
    out.setAcks(info.reliable);
    out.setFramesSent(info.counters.frames_sent);
    out.setFramesResent(info.counters.frames_resent);
    out.setBytesResent(info.counters.bytes_resent);
    out.setDuplicatesDropped(info.counters.duplicates_dropped);
    out.setPathFailures(info.counters.path_failures);
    out.setFailbacks(info.counters.failbacks);
    out.setDownForMs(info.down_for_ms);
    out.setDormant(info.dormant);
    auto paths = out.initPaths(static_cast<unsigned>(info.paths.size()));
    for (unsigned p = 0; p < paths.size(); ++p) {
      const NodeLinks::PathInfo& path = info.paths[p];
      ++live_paths[path.nic];
      transports_over[path.nic].insert(path.transport);
      paths[p].setNic(path.nic);
      paths[p].setTransport(path.transport);
      paths[p].setLocal(path.local);
      paths[p].setRemote(path.remote);
      paths[p].setState(path.state);
      paths[p].setBytesSent(path.bytes_sent);
      paths[p].setBytesReceived(path.bytes_received);
      paths[p].setRateBytesPerS(path.rate_bytes_per_s);
      paths[p].setDeliveryBytesPerS(path.delivery_bytes_per_s);
      paths[p].setDeliveryAppLimited(path.delivery_app_limited);
      paths[p].setRttUs(path.rtt_us);
      paths[p].setKernelUnsentBytes(path.kernel_unsent_bytes);
      paths[p].setLatencyClass(path.latency);
      if (path.windows) {
        paths[p].setHasRecent(true);
        fill_recent(paths[p].initRecent(), *path.windows, now);
      }
    }
  }
  const auto windows = engine_.links().nic_windows();
  const auto& identity_nics = me != nullptr ? me->nics : std::vector<transports::NicInfo>{};
  auto nic_info = links.initNicInfo(static_cast<unsigned>(identity_nics.size()));
  for (unsigned i = 0; i < nic_info.size(); ++i) {
    const transports::NicInfo& nic = identity_nics[i];
    auto out = nic_info[i];
    out.setName(nic.name);
    out.setAddress(nic.address);
    out.setState(operstate(nic.name));
    out.setSpeedMbps(nic.speed_mbps);
    out.setDrained(std::find(drained_nics.begin(), drained_nics.end(), nic.name) !=
                   drained_nics.end());
    out.setPaths(live_paths[nic.name]);
    std::string transports;  // in the set's order: "rdma+tcp"
    for (const auto& t : transports_over[nic.name])
      transports += (transports.empty() ? "" : "+") + t;
    out.setTransports(transports);
    auto ring = windows.find(nic.name);
    if (ring == windows.end()) continue;
    const auto totals = ring->second->totals();
    out.setBytesOut(totals.bytes_out);
    out.setBytesIn(totals.bytes_in);
    out.setResentBytes(totals.resent_bytes);
    out.setFailures(totals.errors);
    out.setHasRecent(true);
    fill_recent(out.initRecent(), *ring->second, now);
  }
  hooks_.reply(session, reply);
}

}  // namespace plexus::daemon
