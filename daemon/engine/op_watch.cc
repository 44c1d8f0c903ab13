#include "daemon/engine/op_watch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "daemon/engine/internode_state.h"
#include "daemon/engine/session.h"
#include "shm/dtype.h"

namespace plexus::daemon {
namespace {

constexpr auto kWatchInterval = std::chrono::milliseconds(100);

uint64_t ms_between(std::chrono::steady_clock::time_point from,
                    std::chrono::steady_clock::time_point to) {
  if (to <= from) return 0;
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
}

uint64_t us_between(std::chrono::steady_clock::time_point from,
                    std::chrono::steady_clock::time_point to) {
  if (to <= from) return 0;
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(to - from).count());
}

const Contribution* first_part(const PendingCollective& op) {
  for (const Contribution& part : op.parts) {
    if (part.session != nullptr) return &part;
  }
  return nullptr;
}

// A key that changes whenever the oldest collective moves: another rank submits, a frame
// for it arrives, or it finishes and the next becomes the oldest.
uint64_t progress_key(const Comm& comm) {
  uint64_t key = comm.first_seq * 0x9E3779B97F4A7C15ull;
  key ^= static_cast<uint64_t>(comm.collectives.front().arrived) << 48;
  if (comm.internode) key += comm.internode->frames_in;
  return key;
}

// A rank's call in its job's per-collective counters.
void count_call(const Comm& comm, const shm::ValidatedEntry& entry) {
  if (!comm.job_counters) return;
  const auto kind = static_cast<size_t>(entry.opcode) % kOpKinds;
  bump_single_writer(comm.job_counters->ops[kind], uint64_t{1});
  bump_single_writer(comm.job_counters->payload_bytes[kind],
                     uint64_t{entry.count * shm::dtype_size(entry.dtype)});
}

}  // namespace

OpWatch::OpWatch(Settings settings, std::shared_ptr<monitor::EventLog> events)
    : settings_(std::move(settings)), events_(std::move(events)) {}

void OpWatch::watch(const std::shared_ptr<Comm>& comm) {
  watched_.push_back(comm);
  if (settings_.timing) {
    comm->skew.emplace(monitor::RankSkewRule{.min_lateness = settings_.rank_skew});
  }
}

void OpWatch::set_thresholds(std::chrono::milliseconds stall, std::chrono::milliseconds rank_skew) {
  settings_.stall = stall;
  if (settings_.rank_skew == rank_skew) return;
  settings_.rank_skew = rank_skew;
  for (const std::weak_ptr<Comm>& weak : watched_) {
    if (auto comm = weak.lock(); comm && comm->skew) comm->skew->set_min_lateness(rank_skew);
  }
}

void OpWatch::note_arrival(Comm& comm, PendingCollective& op, int rank) {
  const auto now = Clock::now();
  if (op.arrived == 1) op.first_arrival = now;
  if (op.arrived != comm.local_ranks()) return;
  op.all_arrived = now;
  op.last_rank = rank;
  if (!comm.skew || comm.local_ranks() < 2) return;
  const auto lateness =
      std::chrono::duration_cast<std::chrono::microseconds>(op.all_arrived - op.first_arrival);
  const auto finding = comm.skew->observe(now, rank, lateness);
  if (!finding) return;
  const Comm::Member& member = comm.members()[static_cast<size_t>(rank)];
  const double median_ms = static_cast<double>(finding->median_lateness.count()) / 1000.0;
  events_->emit(
      "rank_skew", "warning",
      fmt::format("rank {} (pid {}) of communicator {}, job {}, submitted last in {} of the "
                  "last {} collectives, a median {:.1f} ms after the first rank",
                  rank, member.pid, token_prefix(comm.token()), comm.job, finding->late_ops,
                  finding->window, median_ms),
      {{"comm", token_prefix(comm.token())},
       {"job", comm.job},
       {"rank", rank},
       {"pid", member.pid},
       {"node", settings_.node_name},
       {"late_ops", finding->late_ops},
       {"of_ops", finding->window},
       {"median_lateness_us", finding->median_lateness.count()},
       {"threshold_us", std::chrono::microseconds(settings_.rank_skew).count()}});
}

void OpWatch::record_finished(const Comm& comm, const PendingCollective& op, uint64_t seq,
                              const char* algorithm, plexus_result_t status,
                              const OpStageTimes& stages) {
  const Contribution* part = first_part(op);
  if (part == nullptr) return;
  const auto now = Clock::now();
  // Per op: raw fields into a fixed ring; names and wall-clock time only when reported.
  FinishedOp& r = finished_ops_[finished_next_++ % finished_ops_.size()];
  r.token = comm.token();
  r.job = comm.job_counters;
  r.opcode = part->entry.opcode;
  r.seq = seq;
  r.bytes = part->entry.count * shm::dtype_size(part->entry.dtype);
  r.algorithm = algorithm;
  r.status = status;
  r.first_arrival = op.first_arrival;
  r.all_arrived = op.all_arrived;
  r.end = now;
  r.last_rank = op.last_rank;
  r.stages = stages;
  if (status == PLEXUS_SUCCESS && op.first_arrival != Clock::time_point{}) {
    op_durations_.record(part->entry.opcode, now - op.first_arrival);
  }
}

void OpWatch::count_completed(Comm& comm, uint64_t bytes, const shm::ValidatedEntry& call,
                              const shm::ValidatedEntry* other_call, bool op_ends_here) {
  bump_single_writer(comm.bytes_moved, bytes);
  if (op_ends_here) {
    bump_single_writer(comm.ops_completed, uint64_t{1});
    bump_single_writer(ops_completed_, uint64_t{1});
  }
  count_call(comm, call);
  if (other_call != nullptr) count_call(comm, *other_call);
}

void OpWatch::count_bad_entry(Session& session) {
  session.bad_entries.fetch_add(1, std::memory_order_relaxed);
  bump_single_writer(bad_entries_, uint64_t{1});
}

void OpWatch::maybe_look(bool idle) {
  // A clock read when idle, else every 1024 loop turns: nothing per op.
  if (!idle && (++loop_ticks_ & 1023) != 0) return;
  const auto now = Clock::now();
  if (now < next_look_) return;
  next_look_ = now + kWatchInterval;
  look(now);
}

void OpWatch::look(Clock::time_point now) {
  const auto threshold = settings_.stall;
  std::erase_if(watched_, [](const std::weak_ptr<Comm>& weak) {
    auto comm = weak.lock();
    return !comm || comm->finished.load(std::memory_order_relaxed);
  });
  for (const auto& weak : watched_) {
    auto comm = weak.lock();
    if (!comm) continue;
    if (comm->broken() || comm->collectives.empty()) {
      comm->stall_watch.reset();
      continue;
    }
    comm->stall_watch.observe(progress_key(*comm), now);
    if (!comm->stall_watch.should_report(now, threshold)) continue;
    const InflightOpReport op = describe(*comm, 0, now);
    events_->emit("op_stalled", "warning",
                  fmt::format("collective #{} ({} of {} bytes) of communicator {}, job {}, has "
                              "made no progress for {:.1f} s: {}",
                              op.seq, op.collective, op.bytes, op.comm, op.job,
                              static_cast<double>(op.idle_ms) / 1000.0, waiting_for_text(op)),
                  to_json(op));
  }
}

InflightOpReport OpWatch::describe(const Comm& comm, size_t index, Clock::time_point now) const {
  const PendingCollective& op = comm.collectives[index];
  InflightOpReport r;
  r.comm = token_prefix(comm.token());
  r.job = comm.job;
  r.seq = comm.first_seq + index;
  r.arrived = static_cast<uint32_t>(op.arrived);
  r.local_ranks = static_cast<uint32_t>(comm.local_ranks());
  if (const Contribution* part = first_part(op)) {
    r.collective = shm::opcode_name(static_cast<uint8_t>(part->entry.opcode));
    r.bytes = part->entry.count * shm::dtype_size(part->entry.dtype);
  }
  const bool oldest = index == 0;
  if (oldest && comm.stall_watch.since() != Clock::time_point{}) {
    r.idle_ms = ms_between(comm.stall_watch.since(), now);
    r.stalled = comm.stall_watch.reported();  // as the event said: the two always agree
  }
  if (op.first_arrival != Clock::time_point{}) {
    r.age_ms = ms_between(op.first_arrival, now);
    // The stall watch looks every 100 ms: it may have first seen the op's state before
    // this op began (the previous one's last moments).
    r.idle_ms = std::min(r.idle_ms, r.age_ms);
  } else if (oldest) {
    r.age_ms = r.idle_ms;  // untimed (telemetry off): at least this old
  }
  for (int rank = 0; rank < comm.nranks(); ++rank) {
    const Comm::Member& member = comm.members()[static_cast<size_t>(rank)];
    if (member.remote || op.parts[static_cast<size_t>(rank)].session != nullptr) continue;
    r.missing_ranks.push_back({rank, member.pid, settings_.node_name});
  }
  const bool running = oldest && comm.internode && comm.internode->active;
  if (running) {
    const InternodeOp& active = *comm.internode->active;
    r.state = "running";
    r.algorithm = comm.internode->active_algorithm;
    r.slices = active.layout().slices;
    r.slices_done = active.slices_finished();
    for (int node : active.waiting_for()) r.waiting_nodes.push_back(node_name(comm, node));
  } else if (op.arrived < comm.local_ranks()) {
    r.state = "waiting for ranks";
  } else {
    r.state = "queued";
  }
  return r;
}

OpsReport OpWatch::report() const {
  OpsReport report;
  const auto now = Clock::now();
  for (const auto& weak : watched_) {
    auto comm = weak.lock();
    if (!comm || comm->broken()) continue;
    for (size_t i = 0; i < comm->collectives.size(); ++i) {
      report.inflight.push_back(describe(*comm, i, now));
    }
  }
  // Wall-clock end times from the steady clock's offset now (one read for the report).
  const auto wall_now = std::chrono::system_clock::now();
  const size_t kept = std::min(finished_next_, finished_ops_.size());
  for (size_t i = finished_next_ - kept; i < finished_next_; ++i) {
    const FinishedOp& op = finished_ops_[i % finished_ops_.size()];
    FinishedOpReport r;
    r.comm = token_prefix(op.token);
    r.job = op.job ? op.job->job : std::string();
    r.collective = shm::opcode_name(static_cast<uint8_t>(op.opcode));
    r.seq = op.seq;
    r.bytes = op.bytes;
    r.algorithm = op.algorithm;
    r.status = result_name(op.status);
    r.end_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        (wall_now - std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                        now - op.end))
                            .time_since_epoch())
                        .count();
    if (op.all_arrived != Clock::time_point{}) {
      r.arrival_spread_us = us_between(op.first_arrival, op.all_arrived);
      r.run_us = us_between(op.all_arrived, op.end);
    }
    r.last_rank = op.last_rank;
    auto us = [](std::chrono::nanoseconds t) {
      return static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(t).count());
    };
    r.slices = op.stages.slices;
    r.local_in_us = us(op.stages.local_in);
    r.network_us = us(op.stages.network);
    r.local_out_us = us(op.stages.local_out);
    r.slowest_slice_us = us(op.stages.slowest_slice_network);
    report.finished.push_back(std::move(r));
  }
  return report;
}

}  // namespace plexus::daemon
