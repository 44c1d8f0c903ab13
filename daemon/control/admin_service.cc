#include "daemon/control/admin_service.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <thread>

#include "daemon/control/daemon_reply.h"
#include "daemon/local/reduce.h"
#include "monitor/slow_paths.h"
#include "monitor/window_summary.h"
#include "shm/entry_validation.h"

namespace plexus::daemon {
namespace {

namespace control = shm::control;
using monitor::PathTraffic;

constexpr uint32_t kMaxEventsPerReply = 512;

// What an op in flight and a finished one both say.
template <typename Builder, typename Report>
void fill_op(Builder out, const Report& op) {
  out.setComm(op.comm);
  out.setJob(op.job);
  out.setCollective(op.collective);
  out.setSeq(op.seq);
  out.setBytes(op.bytes);
  out.setAlgorithm(op.algorithm);
}

void fill_rank(control::OpRank::Builder out, const OpRankRef& rank) {
  out.setRank(static_cast<uint32_t>(rank.rank));
  out.setPid(rank.pid);
  out.setNode(rank.node);
}

}  // namespace

AdminService::AdminService(const ControlConfig& config, Engine& engine, Hooks hooks)
    : config_(config),
      engine_(engine),
      hooks_(std::move(hooks)),
      admin_(admin_policy(config.admin_group)),
      started_at_(std::chrono::steady_clock::now()) {}

void AdminService::status(uint64_t session, uint32_t request_id) {
  const std::vector<std::shared_ptr<const Comm>>& served = hooks_.comms();
  capnp::MallocMessageBuilder reply;
  auto root = daemon_reply(reply, request_id);
  auto status = root.initStatusReply();
  status.setVersion(PLEXUS_VERSION_STRING);
  status.setNodeName(config_.node_name);
  status.setPid(static_cast<uint32_t>(::getpid()));
  status.setUptimeMs(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::steady_clock::now() - started_at_)
                                               .count()));
  status.setSocketPath(config_.socket_path);
  status.setWorkers(engine_.workers());
  status.setReduceIsa(reduce_kernel_isa());
  status.setOpsCompleted(engine_.op_watch().ops_completed());
  status.setBadMessages(hooks_.bad_messages());
  uint64_t bad_entries = 0;
  const std::vector<std::shared_ptr<const Session>> clients = hooks_.sessions();
  auto sessions = status.initSessions(static_cast<unsigned>(clients.size()));
  unsigned i = 0;
  for (const auto& client : clients) {
    const Session& s = *client;
    auto info = sessions[i++];
    info.setId(s.id());
    info.setPid(s.creds().pid);
    info.setUid(s.creds().uid);
    info.setRole(s.role() == SessionRole::kRank ? control::Role::RANK : control::Role::ADMIN);
    info.setProcessName(s.process_name());
    info.setPoolBytes(s.pool().size());
    info.setComms(s.comm_count.load());
    info.setOpsSubmitted(s.ops_submitted.load());
    info.setBadEntries(s.bad_entries.load());
    info.setJob(s.job());
    bad_entries += s.bad_entries.load();
  }
  fill_jobs(status);
  status.setBadEntries(bad_entries);
  auto comms = status.initComms(static_cast<unsigned>(served.size()));
  for (size_t k = 0; k < served.size(); ++k) {
    const Comm& comm = *served[k];
    auto info = comms[static_cast<unsigned>(k)];
    info.setTokenPrefix(token_prefix(comm.token()));
    info.setNranks(static_cast<uint32_t>(comm.nranks()));
    info.setJoined(static_cast<uint32_t>(comm.nranks()));
    info.setState(comm.broken()
                      ? (comm.broken_status() == PLEXUS_ERR_REVOKED ? "revoked" : "broken")
                  : comm.suspended.load() ? "suspended"
                                          : "ready");
    if (comm.origin()) info.setOrigin(comm.origin()->how);
    for (const auto& other : served) {
      if (other->origin() && other->origin()->predecessor == comm.token()) {
        info.setSuccessor(token_prefix(other->token()));
      }
    }
    info.setBrokenReason(comm.broken() ? comm.broken_reason() : "");
    info.setOpsCompleted(comm.ops_completed.load());
    info.setBytesMoved(comm.bytes_moved.load());
    auto ranks = info.initRanks(static_cast<unsigned>(comm.nranks()));
    for (size_t r = 0; r < comm.members().size(); ++r) {
      ranks[static_cast<unsigned>(r)].setRank(static_cast<uint32_t>(r));
      ranks[static_cast<unsigned>(r)].setPid(comm.members()[r].pid);
      ranks[static_cast<unsigned>(r)].setSessionId(comm.members()[r].session_id);
    }
  }
  hooks_.reply(session, reply);
}

bool AdminService::admit_admin(const Session& client, uint32_t request_id,
                               const std::string& what) {
  const PeerCredentials& creds = client.creds();
  if (is_admin(admin_, creds)) return true;
  hooks_.error(client.id(), request_id, PLEXUS_ERR_INVALID_ARGUMENT,
               what + " needs " + admin_requirement(admin_) + "; this request came from uid " +
                   std::to_string(creds.uid) + " (pid " + std::to_string(creds.pid) + ")");
  return false;
}

bool AdminService::admit_fault_injection(const Session& client, uint32_t request_id,
                                         const std::string& what) {
  // Who may ask comes first: a stranger learns nothing of how the daemon runs.
  if (!admit_admin(client, request_id, what)) return false;
  if (config_.fault_injection) return true;
  hooks_.error(client.id(), request_id, PLEXUS_ERR_INVALID_ARGUMENT,
               "fault injection is off in this plexusd (start it with --fault-injection)");
  return false;
}

bool AdminService::admit_nic(const Session& client, uint32_t request_id, const std::string& nic) {
  const std::vector<std::string> nics = peer_nic_names();
  if (std::find(nics.begin(), nics.end(), nic) == nics.end()) {
    std::string known;
    for (const auto& n : nics) {
      if (!known.empty()) known += ", ";
      known += n;
    }
    // Appended, not "'" + nic.substr(...): GCC 12's Release build warns -Wrestrict (a
    // false positive in its inlined operator+(const char*, string&&)).
    std::string why = "'";
    why += nic.substr(0, 64);
    why += "' is not a NIC this plexusd reaches peers over (";
    why += known.empty() ? "it serves no peers: no --peer-listen, or no NIC" : known;
    why += ")";
    hooks_.error(client.id(), request_id, PLEXUS_ERR_INVALID_ARGUMENT, why);
    return false;
  }
  return true;
}

void AdminService::nic_drain(const Session& client, uint32_t request_id,
                             control::NicDrain::Reader request) {
  const uint64_t session = client.id();
  const std::string nic = request.getNic().cStr();
  if (!admit_admin(client, request_id, "draining a NIC") || !admit_nic(client, request_id, nic)) {
    return;
  }
  const bool drain = request.getDrained();
  engine_.post([this, session, request_id, nic, drain](Engine& engine) {
    const size_t paths = engine.links().drain_nic(nic, drain);
    hooks_.post([this, session, request_id, paths] {
      capnp::MallocMessageBuilder reply;
      auto root = daemon_reply(reply, request_id);
      root.initNicDrainReply().setPaths(static_cast<uint32_t>(paths));
      hooks_.reply(session, reply);
    });
  });
}

void AdminService::job_set(const Session& client, uint32_t request_id,
                           control::JobSet::Reader request) {
  const uint64_t session = client.id();
  if (!admit_admin(client, request_id, "setting a job's policy")) return;
  const std::string job = request.getName().cStr();
  const std::string class_name = request.getTrafficClass().cStr();
  std::string bad = transports::check_traffic_class(class_name);
  if (bad.empty()) bad = transports::check_weight(request.getWeight());
  if (!bad.empty()) {
    hooks_.error(session, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                 "job '" + job.substr(0, 64) + "': " + bad);
    return;
  }
  const transports::FlowPolicy policy{*transports::parse_traffic_class(class_name),
                                      request.getWeight()};
  engine_.post([this, session, request_id, job, policy](Engine& engine) {
    std::string error = engine.jobs().set(job, policy);
    hooks_.post([this, session, request_id, error] {
      if (!error.empty()) {
        hooks_.error(session, request_id, PLEXUS_ERR_INVALID_ARGUMENT, error);
        return;
      }
      capnp::MallocMessageBuilder reply;
      auto root = daemon_reply(reply, request_id);
      root.setJobSetReply();
      hooks_.reply(session, reply);
    });
  });
}

void AdminService::nic_fault(const Session& client, uint32_t request_id, const std::string& nic) {
  const uint64_t session = client.id();
  if (!admit_fault_injection(client, request_id, "injecting a fault")) return;
  if (!admit_nic(client, request_id, nic)) return;
  engine_.post([this, session, request_id, nic](Engine& engine) {
    auto injected = engine.links().inject_fault(nic);
    const size_t paths = injected.ok() ? *injected : 0;
    hooks_.post([this, session, request_id, nic, paths, why = injected.error()] {
      if (paths == 0) {
        hooks_.error(session, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                     why.empty() ? "no path to a peer runs over " + nic + " now" : why);
        return;
      }
      capnp::MallocMessageBuilder reply;
      auto root = daemon_reply(reply, request_id);
      root.setNicFaultReply(static_cast<uint32_t>(paths));
      hooks_.reply(session, reply);
    });
  });
}

void AdminService::engine_hold(const Session& client, uint32_t request_id, uint32_t ms) {
  const uint64_t session = client.id();
  if (!admit_fault_injection(client, request_id, "holding the engine")) return;
  if (ms == 0 || ms > kMaxEngineHoldMs) {
    hooks_.error(session, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                 "an engine hold of " + std::to_string(ms) + " ms: it must be 1.." +
                     std::to_string(kMaxEngineHoldMs));
    return;
  }
  spdlog::warn("fault injection: the engine thread is held for {} ms (asked by {})", ms,
               client.describe());
  capnp::MallocMessageBuilder reply;
  auto root = daemon_reply(reply, request_id);
  root.setEngineHoldReply();
  hooks_.reply(session, reply);
  engine_.post([ms](Engine&) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); });
}

void AdminService::ops(uint64_t session_id, uint32_t request_id) {
  // Pending collectives are the engine's alone: it builds the report; the reply goes from
  // here, if the asker is still connected by then.
  engine_.post([this, session_id, request_id](Engine& engine) {
    hooks_.post([this, session_id, request_id, report = engine.op_watch().report()] {
      send_ops(session_id, request_id, report);
    });
  });
}

void AdminService::send_ops(uint64_t session_id, uint32_t request_id, const OpsReport& report) {
  capnp::MallocMessageBuilder reply;
  auto root = daemon_reply(reply, request_id);
  auto ops = root.initOpsReply();
  ops.setNode(config_.node_name);
  ops.setStallMs(config_.stall_ms);
  auto inflight = ops.initInflight(static_cast<unsigned>(report.inflight.size()));
  for (unsigned i = 0; i < inflight.size(); ++i) {
    const InflightOpReport& op = report.inflight[i];
    auto out = inflight[i];
    fill_op(out, op);
    out.setState(op.state);
    out.setAgeMs(op.age_ms);
    out.setIdleMs(op.idle_ms);
    out.setStalled(op.stalled);
    out.setArrived(op.arrived);
    out.setLocalRanks(op.local_ranks);
    auto missing = out.initMissingRanks(static_cast<unsigned>(op.missing_ranks.size()));
    for (unsigned r = 0; r < missing.size(); ++r) fill_rank(missing[r], op.missing_ranks[r]);
    auto nodes = out.initWaitingNodes(static_cast<unsigned>(op.waiting_nodes.size()));
    for (unsigned n = 0; n < nodes.size(); ++n) nodes.set(n, op.waiting_nodes[n]);
    out.setSlicesDone(op.slices_done);
    out.setSlices(op.slices);
    out.setWaitingFor(waiting_for_text(op));
  }
  auto finished = ops.initFinished(static_cast<unsigned>(report.finished.size()));
  for (unsigned i = 0; i < finished.size(); ++i) {
    const FinishedOpReport& op = report.finished[i];
    auto out = finished[i];
    fill_op(out, op);
    out.setStatus(op.status);
    out.setEndUnixMs(op.end_unix_ms);
    out.setArrivalSpreadUs(op.arrival_spread_us);
    out.setRunUs(op.run_us);
    out.setLastRank(op.last_rank);
    out.setSlices(op.slices);
    out.setLocalInUs(op.local_in_us);
    out.setNetworkUs(op.network_us);
    out.setLocalOutUs(op.local_out_us);
    out.setSlowestSliceUs(op.slowest_slice_us);
  }
  hooks_.reply(session_id, reply);
}

void AdminService::check_slow_paths() {
  const auto now = monitor::WindowRing::Clock::now();
  struct Judged {
    std::string key, peer, nic, remote;
    uint64_t bytes_out = 0;  // over the span: evidence
  };
  std::vector<Judged> paths;
  std::vector<PathTraffic> traffic;
  size_t group = 0;
  for (const NodeLinks::PeerInfo& peer : engine_.links().snapshot()) {
    for (const NodeLinks::PathInfo& path : peer.paths) {
      // A standby backup or a drained path carries nothing by design; a latency-class path
      // carries only that class's frames, so its rate says nothing beside the others'.
      if (!path.windows || path.state == "standby" || path.state == "drained" || path.latency) {
        continue;
      }
      const monitor::WindowSummary s = monitor::summarize_recent(*path.windows, now, kSlowPathSpan);
      paths.push_back({peer.name + "|" + path.nic + "|" + path.remote, peer.name, path.nic,
                       path.remote, s.bytes_out});
      traffic.push_back({group, path.delivery_bytes_per_s, path.delivery_app_limited,
                         s.sending_windows, path.kernel_unsent_bytes});
    }
    ++group;
  }
  const std::vector<monitor::PathVerdict> verdicts =
      monitor::judge_paths(traffic, monitor::SlowPathRule{1, config_.slow_path_ratio});
  std::vector<std::string> keys;
  keys.reserve(paths.size());
  for (const Judged& p : paths) keys.push_back(p.key);
  for (const monitor::SlowPathStreaks::Report& report : slow_path_streaks_.look(keys, verdicts)) {
    const size_t i = report.index;
    const Judged& p = paths[i];
    const monitor::PathVerdict& v = verdicts[i];
    const PathTraffic& t = traffic[i];
    const double ratio = t.rate_bytes_per_s / v.siblings_median_rate;
    const double seconds = std::chrono::duration<double>(kSlowPathSpan).count();
    engine_.events().emit(
        "slow_path", "warning",
        fmt::format("the path over NIC {} to node {} ({}) delivers {:.1f} MB/s, {:.3f} of the "
                    "median of its {} sibling path(s) to that node ({:.1f} MB/s); it sent "
                    "{:.1f} MB in the last {:.1f} s and has {:.1f} MB queued",
                    p.nic, p.peer, p.remote, t.rate_bytes_per_s / 1e6, ratio, v.siblings,
                    v.siblings_median_rate / 1e6, static_cast<double>(p.bytes_out) / 1e6, seconds,
                    static_cast<double>(t.unsent_bytes) / 1e6),
        {{"nic", p.nic},
         {"peer", p.peer},
         {"remote", p.remote},
         {"delivery_bytes_per_s", t.rate_bytes_per_s},
         {"siblings_median_delivery_bytes_per_s", v.siblings_median_rate},
         {"ratio", ratio},
         {"threshold_ratio", config_.slow_path_ratio},
         {"bytes_out", p.bytes_out},
         {"busy_windows", t.busy_windows},
         {"kernel_unsent_bytes", t.unsent_bytes},
         {"siblings", v.siblings},
         {"span_s", seconds},
         {"confirmations", report.streak}});
  }
}

void AdminService::fill_jobs(control::StatusReply::Builder status) {
  std::map<std::string, uint32_t> sessions;
  for (const auto& session : hooks_.sessions()) {
    if (session->role() == SessionRole::kRank) ++sessions[session->job()];
  }
  const auto jobs = engine_.op_watch().job_counters().all();
  auto list = status.initJobs(static_cast<unsigned>(jobs.size()));
  for (unsigned i = 0; i < list.size(); ++i) {
    const JobCounters& job = *jobs[i];
    auto out = list[i];
    out.setName(job.job);
    out.setSessions(sessions[job.job]);
    out.setFailedCompletions(job.failed_completions.load(std::memory_order_relaxed));
    const transports::FlowPolicy policy = job.policy();
    out.setTrafficClass(transports::traffic_class_name(policy.traffic_class));
    out.setWeight(policy.weight);
    out.setConfiguredShare(job.configured_share.load(std::memory_order_relaxed));
    out.setAchievedShare(job.achieved_share.load(std::memory_order_relaxed));
    out.setScheduledBytes(job.scheduled_bytes.load(std::memory_order_relaxed));
    const DurationHistogram::Snapshot delay = job.queue_delay.snapshot();
    out.setQueueDelayFrames(delay.count);
    out.setQueueDelayMeanUs(delay.count == 0 ? 0 : delay.sum_seconds * 1e6 / delay.count);
    out.setQueueDelayP99Us(delay.quantile_bound(0.99) * 1e6);
    out.setMaxInflightBytes(job.max_inflight_bytes.load(std::memory_order_relaxed));
    out.setInflightBytes(job.inflight_bytes.load(std::memory_order_relaxed));
    out.setMaxStagingBytes(job.max_staging_bytes.load(std::memory_order_relaxed));
    out.setRefusedOps(job.refused_ops.load(std::memory_order_relaxed));
    std::vector<uint8_t> used;
    for (uint8_t op = 1; op < kOpKinds; ++op) {
      if (job.ops[op].load(std::memory_order_relaxed) > 0) used.push_back(op);
    }
    auto counts = out.initCollectives(static_cast<unsigned>(used.size()));
    for (unsigned k = 0; k < counts.size(); ++k) {
      counts[k].setCollective(shm::opcode_name(used[k]));
      counts[k].setOps(job.ops[used[k]].load(std::memory_order_relaxed));
      counts[k].setPayloadBytes(job.payload_bytes[used[k]].load(std::memory_order_relaxed));
    }
  }
}

void AdminService::events(uint64_t session, uint32_t request_id,
                          control::EventsRequest::Reader request) {
  const uint32_t max = std::clamp<uint32_t>(request.getMax(), 1, kMaxEventsPerReply);
  const monitor::EventLog::Page page = engine_.events().after(request.getAfter(), max);
  capnp::MallocMessageBuilder reply;
  auto root = daemon_reply(reply, request_id);
  auto events = root.initEventsReply();
  auto lines = events.initLines(static_cast<unsigned>(page.lines.size()));
  for (unsigned i = 0; i < lines.size(); ++i) lines.set(i, page.lines[i]);
  events.setNextAfter(page.next_after);
  events.setMissed(page.missed);
  hooks_.reply(session, reply);
}

}  // namespace plexus::daemon
