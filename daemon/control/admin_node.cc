// The node as a service: its settings (plexusctl config, config reload), its drain before a
// stop (plexusctl node drain) and the status line systemd shows.
#include <spdlog/spdlog.h>

#include <string>

#include "daemon/control/admin_service.h"
#include "daemon/control/daemon_reply.h"

namespace plexus::daemon {
namespace {

namespace control = shm::control;

void set_texts(capnp::List<capnp::Text>::Builder out, const std::vector<std::string>& texts) {
  for (unsigned i = 0; i < texts.size(); ++i) out.set(i, texts[i]);
}

}  // namespace

void AdminService::config_show(uint64_t session, uint32_t request_id) {
  if (!config_.show_config) {
    hooks_.error(session, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                 "this plexusd cannot show its settings (it runs embedded)");
    return;
  }
  const ConfigShown shown = config_.show_config();
  capnp::MallocMessageBuilder reply;
  auto root = daemon_reply(reply, request_id);
  auto out = root.initConfigShowReply();
  out.setText(shown.text);
  out.setFile(shown.file);
  set_texts(out.initRestartNeeded(static_cast<unsigned>(shown.restart_needed.size())),
            shown.restart_needed);
  hooks_.reply(session, reply);
}

void AdminService::config_reload(const Session& client, uint32_t request_id) {
  const uint64_t session = client.id();
  if (!admit_admin(client, request_id, "reloading the config")) return;
  if (!config_.reload) {
    hooks_.error(session, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                 "this plexusd has no config to read again (it runs embedded)");
    return;
  }
  ConfigReloadReport report = config_.reload();
  if (!report.error.empty()) {
    hooks_.error(session, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                 "config reload refused, the settings in use are kept: " + report.error);
    return;
  }
  // The engine's queue runs in order: once this runs, it has taken the new settings.
  engine_.post([this, session, request_id, report = std::move(report)](Engine&) {
    hooks_.post([this, session, request_id, report] {
      capnp::MallocMessageBuilder reply;
      auto root = daemon_reply(reply, request_id);
      auto out = root.initConfigReloadReply();
      set_texts(out.initApplied(static_cast<unsigned>(report.applied.size())), report.applied);
      set_texts(out.initRestartNeeded(static_cast<unsigned>(report.restart_needed.size())),
                report.restart_needed);
      hooks_.reply(session, reply);
    });
  });
}

void AdminService::reconfigure(const ControlConfig& next) {
  config_.stall_ms = next.stall_ms;
  config_.slow_path_ratio = next.slow_path_ratio;
}

AdminService::Served AdminService::served() {
  Served s;
  for (const auto& comm : hooks_.comms()) {
    ++s.comms;
    s.ranks += static_cast<uint32_t>(comm->local_ranks());
    if (!comm->job.empty()) s.jobs.insert(comm->job);
  }
  s.forming = hooks_.joins_pending();
  for (const auto& session : hooks_.sessions()) {
    ++s.sessions;
    if (session->role() == SessionRole::kRank) ++s.rank_sessions;
  }
  return s;
}

void AdminService::node_drain(const Session& client, uint32_t request_id,
                              control::NodeDrain::Reader request) {
  const uint64_t session = client.id();
  if (!request.getQuery()) {
    const bool drain = !request.getUndrain();
    if (!admit_admin(client, request_id, drain ? "draining the node" : "undraining the node"))
      return;
    if (drain != draining_) {
      draining_ = drain;
      drained_logged_ = false;
      spdlog::info("{} (asked by uid {}, pid {})",
                   drain ? "node drain: new communicators are refused; the current ones run "
                           "to their end"
                         : "node drain ended: new communicators are admitted again",
                   client.creds().uid, client.creds().pid);
      report_status();
    }
  }
  const Served s = served();
  capnp::MallocMessageBuilder reply;
  auto root = daemon_reply(reply, request_id);
  auto out = root.initNodeDrainReply();
  out.setDraining(draining_);
  out.setComms(s.comms);
  out.setRanks(s.ranks);
  auto jobs = out.initJobs(static_cast<unsigned>(s.jobs.size()));
  unsigned i = 0;
  for (const std::string& job : s.jobs) jobs.set(i++, job);
  out.setSafeToStop(draining_ && s.idle());
  out.setRankSessions(s.rank_sessions);
  out.setForming(s.forming);
  hooks_.reply(session, reply);
}

void AdminService::report_status() {
  const Served s = served();
  std::string line = std::to_string(s.sessions) + " session(s), " + std::to_string(s.comms) +
                     " communicator(s) with " + std::to_string(s.ranks) + " rank(s) here";
  if (draining_) {
    line += s.idle() ? "; drained: safe to stop" : "; draining: new communicators refused";
    if (s.idle() && !drained_logged_) {
      drained_logged_ = true;
      spdlog::info("node drained: no communicator left or forming; plexusd may be stopped");
    }
  }
  if (line == status_line_) return;
  status_line_ = line;
  if (config_.on_status) config_.on_status(line);
}

}  // namespace plexus::daemon
