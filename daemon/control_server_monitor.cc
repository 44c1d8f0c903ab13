// plexusctl ops and events: the engine's ops report (built on the engine thread, sent from
// this one) and pages of the event log.
#include "daemon/control_server.h"

namespace plexus::daemon {
namespace {

namespace control = shm::control;

constexpr uint32_t kMaxEventsPerReply = 512;

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
    post([this, session_id, request_id, report = engine.ops_report()] {
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
    out.setComm(op.comm);
    out.setJob(op.job);
    out.setCollective(op.collective);
    out.setSeq(op.seq);
    out.setBytes(op.bytes);
    out.setAlgorithm(op.algorithm);
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
    out.setComm(op.comm);
    out.setJob(op.job);
    out.setCollective(op.collective);
    out.setSeq(op.seq);
    out.setBytes(op.bytes);
    out.setAlgorithm(op.algorithm);
    out.setStatus(op.status);
    out.setEndUnixMs(op.end_unix_ms);
    out.setArrivalSpreadUs(op.arrival_spread_us);
    out.setRunUs(op.run_us);
    out.setLastRank(op.last_rank);
  }
  send_message(*connection, reply);
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
