// plexusctl ops and events: the engine's ops report (built on the engine thread, sent from
// this one) and pages of the event log.
#include <spdlog/spdlog.h>

#include "daemon/control/control_server.h"
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

void ControlServer::handle_ops(uint64_t session_id, uint32_t request_id) {
  // Pending collectives are the engine's alone: it builds the report; the reply goes from
  // here, if the asker is still connected by then.
  engine_.post([this, session_id, request_id](Engine& engine) {
    post([this, session_id, request_id, report = engine.op_watch().report()] {
      send_ops(session_id, request_id, report);
    });
  });
}

void ControlServer::send_ops(uint64_t session_id, uint32_t request_id, const OpsReport& report) {
  Connection* connection = find_connection(session_id);
  if (connection == nullptr) return;
  capnp::MallocMessageBuilder reply;
  auto root = reply.initRoot<control::DaemonMessage>();
  root.setRequestId(request_id);
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
  send_message(*connection, reply);
}

void ControlServer::check_slow_paths() {
  const auto now = monitor::WindowRing::Clock::now();
  struct Judged {
    std::string key, peer, nic, remote;
    uint64_t bytes_out = 0;  // over the span: evidence
  };
  std::vector<Judged> paths;
  std::vector<PathTraffic> traffic;
  size_t group = 0;
  for (const NodeLinks::PeerInfo& peer : engine_.peer_links()) {
    for (const NodeLinks::PathInfo& path : peer.paths) {
      // A standby backup or a drained path carries nothing by design.
      if (!path.windows || path.state == "standby" || path.state == "drained") continue;
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
  std::map<std::string, int> streaks;
  for (size_t i = 0; i < paths.size(); ++i) {
    const Judged& p = paths[i];
    const monitor::PathVerdict& v = verdicts[i];
    const auto previous = slow_path_streaks_.find(p.key);
    const int before = previous == slow_path_streaks_.end() ? 0 : previous->second;
    if (v.kind == monitor::PathVerdict::kAtPar) {
      slow_paths_reported_.erase(p.key);  // reported again if it slows down again
      continue;
    }
    // Slow in consecutive looks: one low sample (a receiver descheduled for a moment) is not
    // a slow path.
    if (v.kind != monitor::PathVerdict::kSlow) continue;
    const int streak = streaks[p.key] = before + 1;
    if (streak < kSlowPathConfirmations || !slow_paths_reported_.insert(p.key).second) {
      continue;
    }
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
         {"confirmations", streak}});
  }
  slow_path_streaks_ = std::move(streaks);
}

void ControlServer::fill_jobs(control::StatusReply::Builder status) {
  std::map<std::string, uint32_t> sessions;
  for (const auto& session : this->sessions()) {
    if (session->role == SessionRole::kRank) ++sessions[session->job];
  }
  const auto jobs = engine_.op_watch().job_counters().all();
  auto list = status.initJobs(static_cast<unsigned>(jobs.size()));
  for (unsigned i = 0; i < list.size(); ++i) {
    const JobCounters& job = *jobs[i];
    auto out = list[i];
    out.setName(job.job);
    out.setSessions(sessions[job.job]);
    out.setFailedCompletions(job.failed_completions.load(std::memory_order_relaxed));
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

void ControlServer::handle_events(Connection& connection, uint32_t request_id,
                                  control::EventsRequest::Reader request) {
  const uint32_t max = std::clamp<uint32_t>(request.getMax(), 1, kMaxEventsPerReply);
  const monitor::EventLog::Page page = engine_.events().after(request.getAfter(), max);
  capnp::MallocMessageBuilder reply;
  auto root = reply.initRoot<control::DaemonMessage>();
  root.setRequestId(request_id);
  auto events = root.initEventsReply();
  auto lines = events.initLines(static_cast<unsigned>(page.lines.size()));
  for (unsigned i = 0; i < lines.size(); ++i) lines.set(i, page.lines[i]);
  events.setNextAfter(page.next_after);
  events.setMissed(page.missed);
  send_message(connection, reply);
}

}  // namespace plexus::daemon
