// What plexusctl and Prometheus see of this node, and the admin commands: status, links,
// NIC drain, ops, events, jobs, the Prometheus metrics, and the slow-path watch over every
// path's last second. Runs on the control thread; it reaches the clients and the control
// thread's own state through Hooks, and the engine through its queue and what it publishes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "daemon/control/admin_access.h"
#include "daemon/control/control_config.h"
#include "daemon/engine/engine.h"
#include "monitor/metric_families.h"
#include "monitor/slow_path_streaks.h"
#include "shm/control.capnp.h"
#include "transports/peer/peer_handshake.h"

namespace plexus::daemon {

class AdminService {
 public:
  struct Hooks {
    // Sends a reply to session `id`'s client; false when it is gone or closing.
    std::function<bool(uint64_t id, capnp::MessageBuilder& reply)> reply;
    std::function<void(uint64_t id, uint32_t request_id, plexus_result_t code,
                       const std::string& message)>
        error;
    // Runs fn on the control thread (from the engine's).
    std::function<void(std::function<void()> fn)> post;
    // The session of every connected client whose hello was accepted.
    std::function<std::vector<std::shared_ptr<const Session>>()> sessions;
    // The communicators still served (finished ones pruned first).
    std::function<const std::vector<std::shared_ptr<const Comm>>&()> comms;
    // This daemon as its peers know it; null without --peer-listen.
    std::function<const transports::PeerIdentity*()> peer_identity;
    std::function<uint64_t()> bad_messages;  // control messages refused
    // Whether communicators are still forming (joins admitted, not yet formed or failed).
    std::function<bool()> joins_pending;
  };

  AdminService(const ControlConfig& config, Engine& engine, Hooks hooks);

  void status(uint64_t session, uint32_t request_id);
  void links(uint64_t session, uint32_t request_id);
  // Admin only (admin_access.h).
  void nic_drain(const Session& session, uint32_t request_id,
                 shm::control::NicDrain::Reader request);
  // Needs ControlConfig::fault_injection too: into every path over `nic`.
  // plexusctl job set: a job's class and weight (admins only; checked here, applied by the
  // engine, which refuses a job it has never heard of).
  void job_set(const Session& client, uint32_t request_id, shm::control::JobSet::Reader request);
  void nic_fault(const Session& session, uint32_t request_id, const std::string& nic);
  // Needs ControlConfig::fault_injection too: the engine thread is held `ms` (at most
  // kMaxEngineHoldMs), as a stuck op or command would hold it; for watchdog drills.
  void engine_hold(const Session& session, uint32_t request_id, uint32_t ms);
  static constexpr uint32_t kMaxEngineHoldMs = 600000;
  // The engine's ops report (built on the engine thread, sent from this one).
  void ops(uint64_t session, uint32_t request_id);
  void events(uint64_t session, uint32_t request_id, shm::control::EventsRequest::Reader request);
  // Every metric of a Prometheus scrape (admin_metrics.cc).
  void collect_metrics(monitor::MetricFamilies& metrics);
  // The slow-path rule over every path's last second of windows (with telemetry on).
  void check_slow_paths();
  static constexpr uint64_t kPathWatchIntervalMs = 250;

  // The node as a service (admin_node.cc). plexusctl config: the settings in use (open to
  // all local users, as status is).
  void config_show(uint64_t session, uint32_t request_id);
  // plexusctl config reload (admins): the config file read again (ControlConfig::reload);
  // the reply goes once the engine has taken the new settings.
  void config_reload(const Session& client, uint32_t request_id);
  // A reload's thresholds for this thread (slow-path ratio, the stall time reported).
  void reconfigure(const ControlConfig& next);
  // plexusctl node drain | undrain (admins), or how the drain stands (query: open to all).
  void node_drain(const Session& client, uint32_t request_id,
                  shm::control::NodeDrain::Reader request);
  // While draining, new communicators are refused (ControlServer::handle_comm_init).
  bool draining() const { return draining_; }
  // Every kStatusIntervalMs: the status line (ControlConfig::on_status) when it changed, and
  // the end of a drain, logged once.
  void report_status();
  static constexpr uint64_t kStatusIntervalMs = 1000;

 private:
  void send_ops(uint64_t session, uint32_t request_id, const OpsReport& report);
  void fill_jobs(shm::control::StatusReply::Builder status);
  // The kernel's view of an interface: "up", "down", "lowerlayerdown" (no carrier), ...
  static std::string operstate(const std::string& nic);
  // False (the client told why) unless the request comes from an admin. `what`: "draining
  // a NIC", ...
  bool admit_admin(const Session& client, uint32_t request_id, const std::string& what);
  // admit_admin, and fault injection on (plexusd --fault-injection).
  bool admit_fault_injection(const Session& client, uint32_t request_id, const std::string& what);
  // False (the client told why) unless `nic` is a NIC this daemon serves peers on.
  bool admit_nic(const Session& client, uint32_t request_id, const std::string& nic);
  // The NICs this daemon serves peers on (none without --peer-listen).
  std::vector<std::string> peer_nic_names() const;

  ControlConfig config_;
  Engine& engine_;
  Hooks hooks_;
  AdminPolicy admin_;
  std::chrono::steady_clock::time_point started_at_;
  // The slow-path rule looks at the last kSlowPathSpan of each path's windows.
  static constexpr std::chrono::milliseconds kSlowPathSpan{1000};
  // Looks (kPathWatchIntervalMs apart) that must find a path slow before it is reported,
  // and the looks in a row that cannot judge it (2 s) after which its streak lapses.
  static constexpr int kSlowPathConfirmations = 3;
  static constexpr int kSlowPathMaxGap = 8;
  monitor::SlowPathStreaks slow_path_streaks_{kSlowPathConfirmations, kSlowPathMaxGap};

  // What a drain waits for: the communicators still served and those still forming.
  struct Served {
    uint32_t comms = 0;
    uint32_t ranks = 0;  // on this node
    std::set<std::string> jobs;
    bool forming = false;
    uint32_t sessions = 0;       // every client connected (ranks and plexusctl)
    uint32_t rank_sessions = 0;  // connected, with or without a communicator
    bool idle() const { return comms == 0 && !forming; }
  };
  Served served();
  bool draining_ = false;
  bool drained_logged_ = false;
  std::string status_line_;  // the last sent to on_status
};

}  // namespace plexus::daemon
