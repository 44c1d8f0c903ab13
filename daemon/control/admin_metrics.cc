// The Prometheus metrics (plexus_*): built on the control thread for each scrape from the
// same state plexusctl reads, so a scrape costs the data path nothing. Labels are bounded:
// job (at most 64 names), collective, NIC, peer node and path; never an op. The job label
// is plexus_job: Prometheus itself sets `job` (the scrape job) on every series.
#include <chrono>
#include <map>

#include "daemon/control/admin_service.h"
#include "daemon/local/reduce.h"
#include "monitor/window_summary.h"
#include "shm/entry_validation.h"

namespace plexus::daemon {
namespace {

using monitor::MetricLabels;

void collect_links(monitor::MetricFamilies& m, const std::vector<NodeLinks::PeerInfo>& peers) {
  for (const NodeLinks::PeerInfo& peer : peers) {
    const MetricLabels p = {{"peer", peer.name}};
    m.gauge("plexus_peer_up",
            "1 while a path to the peer daemon is live, or its link is dormant (closed while "
            "idle, opened again on its next use)",
            p, peer.down_for_ms < 0 ? 1 : 0);
    m.gauge("plexus_peer_dormant", "1 while the link to the peer closed its paths while idle", p,
            peer.dormant ? 1 : 0);
    m.counter("plexus_peer_failovers_total",
              "Paths to the peer that failed (their unacknowledged frames went on the others)", p,
              static_cast<double>(peer.counters.path_failures));
    m.counter("plexus_peer_failbacks_total", "Failed paths to the peer that came back", p,
              static_cast<double>(peer.counters.failbacks));
    m.counter("plexus_peer_sent_frames_total", "Frames sent to the peer", p,
              static_cast<double>(peer.counters.frames_sent));
    m.counter("plexus_peer_retransmitted_frames_total", "Frames sent again after a path failed", p,
              static_cast<double>(peer.counters.frames_resent));
    m.counter("plexus_peer_retransmitted_bytes_total", "Bytes sent again after a path failed", p,
              static_cast<double>(peer.counters.bytes_resent));
    m.counter("plexus_peer_duplicate_frames_total",
              "Frames from the peer dropped as already received", p,
              static_cast<double>(peer.counters.duplicates_dropped));
    for (const NodeLinks::PathInfo& path : peer.paths) {
      const MetricLabels l = {{"peer", peer.name},
                              {"nic", path.nic},
                              {"remote", path.remote},
                              {"transport", path.transport},
                              {"class", path.latency ? "latency" : "bulk"}};
      MetricLabels with_state = l;
      with_state.emplace_back("state", path.state);
      m.gauge("plexus_path_state",
              "1 for each path, labelled with its state (active, standby, probation, drained)",
              with_state, 1);
      m.counter("plexus_path_sent_bytes_total", "Bytes sent on the path since it connected", l,
                static_cast<double>(path.bytes_sent));
      m.counter("plexus_path_received_bytes_total", "Bytes received on the path since it connected",
                l, static_cast<double>(path.bytes_received));
    }
  }
}

}  // namespace

void AdminService::collect_metrics(monitor::MetricFamilies& m) {
  const auto now = std::chrono::steady_clock::now();
  m.gauge("plexus_build_info", "plexusd's version and node (always 1)",
          {{"version", PLEXUS_VERSION_STRING},
           {"node", config_.node_name},
           {"reduce_kernels", reduce_kernel_isa()}},
          1);
  m.gauge("plexus_uptime_seconds", "Seconds since plexusd started", {},
          std::chrono::duration<double>(now - started_at_).count());
  std::map<std::string, uint64_t> sessions = {{"rank", 0}, {"admin", 0}};
  for (const auto& session : hooks_.sessions()) {
    ++sessions[session->role() == SessionRole::kRank ? "rank" : "admin"];
  }
  for (const auto& [role, count] : sessions) {
    m.gauge("plexus_sessions", "Connected client processes by role", {{"role", role}},
            static_cast<double>(count));
  }
  std::map<std::string, uint64_t> comms = {{"ready", 0}, {"broken", 0}};
  for (const auto& comm : hooks_.comms()) ++comms[comm->broken() ? "broken" : "ready"];
  for (const auto& [state, count] : comms) {
    m.gauge("plexus_communicators", "Communicators with ranks on this node, by state",
            {{"state", state}}, static_cast<double>(count));
  }
  m.counter("plexus_ops_completed_total", "Ops this node ran to completion (all jobs)", {},
            static_cast<double>(engine_.op_watch().ops_completed()));
  m.counter("plexus_bad_ring_entries_total",
            "Submission ring entries refused (bad fields, buffers outside the pool)", {},
            static_cast<double>(engine_.op_watch().bad_entries()));
  m.counter("plexus_bad_control_messages_total", "Malformed or unexpected control messages", {},
            static_cast<double>(hooks_.bad_messages()));
  for (const auto& [key, count] : engine_.events().counts()) {
    m.counter("plexus_events_total", "Events raised (plexusctl events), by kind and severity",
              {{"kind", key.first}, {"severity", key.second}}, static_cast<double>(count));
  }

  for (const auto& job : engine_.op_watch().job_counters().all()) {
    for (uint8_t op = 1; op < kOpKinds; ++op) {
      const uint64_t ops = job->ops[op].load(std::memory_order_relaxed);
      if (ops == 0) continue;
      const MetricLabels l = {{"plexus_job", job->job}, {"collective", shm::opcode_name(op)}};
      m.counter("plexus_ops_total", "Ops run on this node, by job and collective", l,
                static_cast<double>(ops));
      m.counter("plexus_op_payload_bytes_total",
                "Payload of those ops (count x element size), by job and collective", l,
                static_cast<double>(job->payload_bytes[op].load(std::memory_order_relaxed)));
    }
    m.counter("plexus_failed_completions_total",
              "Completions a rank got with an error (per rank, any collective), by job",
              {{"plexus_job", job->job}},
              static_cast<double>(job->failed_completions.load(std::memory_order_relaxed)));
    const MetricLabels j = {{"plexus_job", job->job}};
    const transports::FlowPolicy policy = job->policy();
    m.gauge(
        "plexus_job_weight",
        "A job's weight within its traffic class (labelled), on the links to other nodes",
        {{"plexus_job", job->job}, {"class", transports::traffic_class_name(policy.traffic_class)}},
        policy.weight);
    m.gauge("plexus_job_share_ratio",
            "A job's part of the bytes sent to other nodes over the last second (achieved)", j,
            job->achieved_share.load(std::memory_order_relaxed));
    m.gauge("plexus_job_configured_share_ratio",
            "What a job's weight entitles it to among the busy jobs of its class, last second", j,
            job->configured_share.load(std::memory_order_relaxed));
    m.counter("plexus_job_sent_to_peers_bytes_total", "Payload a job's frames took to other nodes",
              j, static_cast<double>(job->scheduled_bytes.load(std::memory_order_relaxed)));
    m.gauge("plexus_job_inflight_bytes",
            "Bytes of a job's ops in flight on this node (each rank's larger buffer)", j,
            static_cast<double>(job->inflight_bytes.load(std::memory_order_relaxed)));
    m.counter("plexus_job_refused_ops_total",
              "A job's ops refused with NO_MEMORY for its caps (max_inflight_bytes, "
              "max_staging_bytes) or a process's --max-gpu-staging-bytes",
              j, static_cast<double>(job->refused_ops.load(std::memory_order_relaxed)));
    const DurationHistogram::Snapshot delay = job->queue_delay.snapshot();
    if (delay.count > 0) {
      m.histogram("plexus_job_queue_delay_seconds",
                  "How long a job's frames waited in a send scheduler before a path took them", j,
                  DurationHistogram::kUpperBoundsSeconds, delay.counts, delay.sum_seconds);
    }
  }
  for (uint8_t op = 1; op < kOpKinds; ++op) {
    const auto h = engine_.op_watch().op_durations().snapshot(static_cast<shm::Opcode>(op));
    if (h.count == 0) continue;
    m.histogram("plexus_op_duration_seconds",
                "Ops from the first local rank's submission to completion, by collective "
                "(with --telemetry on)",
                {{"collective", shm::opcode_name(op)}}, DurationHistogram::kUpperBoundsSeconds,
                h.counts, h.sum_seconds);
  }

  const transports::PeerIdentity* me = hooks_.peer_identity();
  if (me == nullptr) return;
  collect_links(m, engine_.links().snapshot());
  const auto windows = engine_.links().nic_windows();
  const auto drained = engine_.links().drained_snapshot();
  for (const transports::NicInfo& nic : me->nics) {
    const MetricLabels l = {{"nic", nic.name}};
    m.gauge("plexus_nic_up", "1 while the kernel reports the NIC up (operstate)", l,
            operstate(nic.name) == "up" ? 1 : 0);
    m.gauge("plexus_nic_drained", "1 while the NIC is drained (plexusctl nic drain)", l,
            std::find(drained.begin(), drained.end(), nic.name) != drained.end() ? 1 : 0);
    if (nic.speed_mbps > 0) {
      m.gauge("plexus_nic_speed_bits_per_second", "The NIC's link speed", l,
              static_cast<double>(nic.speed_mbps) * 1e6);
    }
    auto ring = windows.find(nic.name);
    if (ring == windows.end()) continue;  // telemetry off
    const auto totals = ring->second->totals();
    m.counter("plexus_nic_sent_bytes_total", "Data payload sent to peer daemons over the NIC", l,
              static_cast<double>(totals.bytes_out));
    m.counter("plexus_nic_received_bytes_total",
              "Data payload received from peer daemons over the NIC", l,
              static_cast<double>(totals.bytes_in));
    m.counter("plexus_nic_sent_chunks_total", "Data chunks sent over the NIC", l,
              static_cast<double>(totals.chunks_out));
    m.counter("plexus_nic_received_chunks_total", "Data chunks received over the NIC", l,
              static_cast<double>(totals.chunks_in));
    m.counter("plexus_nic_retransmitted_bytes_total",
              "Bytes sent again after a path over the NIC failed", l,
              static_cast<double>(totals.resent_bytes));
    m.counter("plexus_nic_path_failures_total", "Paths over the NIC that failed", l,
              static_cast<double>(totals.errors));
    const monitor::WindowSummary s =
        monitor::summarize_recent(*ring->second, now, std::chrono::seconds(1));
    if (s.latency.count == 0) continue;
    // Gauges over the last second (the windows keep no cumulative histogram).
    m.gauge("plexus_nic_chunk_latency_p50_seconds",
            "Median chunk latency (hand-over to acknowledgement) over the last second", l,
            s.latency.p50_us / 1e6);
    m.gauge("plexus_nic_chunk_latency_p99_seconds",
            "99th-percentile chunk latency over the last second", l, s.latency.p99_us / 1e6);
    m.gauge("plexus_nic_chunk_latency_max_seconds", "Largest chunk latency over the last second", l,
            s.latency.max_us / 1e6);
  }
}

}  // namespace plexus::daemon
