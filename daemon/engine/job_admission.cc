#include "daemon/engine/job_admission.h"

#include <algorithm>

namespace plexus::daemon {
namespace {

void take_from_job(Session& session, uint64_t bytes) {
  if (!session.job_counters() || bytes == 0) return;
  std::atomic<uint64_t>& held = session.job_counters()->inflight_bytes;
  const uint64_t now = held.load(std::memory_order_relaxed);
  held.store(now - std::min(now, bytes), std::memory_order_relaxed);
}

}  // namespace

bool over_limit(uint64_t held, uint64_t more, uint64_t limit) {
  return more > limit || held > limit - more;
}

uint64_t inflight_charge(const shm::ValidatedEntry& entry) {
  return std::max(entry.send.bytes, entry.recv.bytes);
}

std::string refuse_inflight(const JobCounters& job, uint64_t bytes) {
  const uint64_t cap = job.max_inflight_bytes.load(std::memory_order_relaxed);
  const uint64_t held = job.inflight_bytes.load(std::memory_order_relaxed);
  if (cap == 0 || !over_limit(held, bytes, cap)) return {};
  return "job '" + job.job + "' would hold " + std::to_string(held + bytes) +
         " bytes of ops in flight on this node (this op " + std::to_string(bytes) +
         "), past its cap of " + std::to_string(cap) + " ([jobs." + job.job +
         "] max_inflight_bytes; wait for earlier ops, or make them smaller)";
}

std::string refuse_staging(const JobCounters& job, uint64_t needed, uint64_t given_back) {
  const uint64_t cap = job.max_staging_bytes.load(std::memory_order_relaxed);
  const uint64_t held = *job.staging_bytes - std::min(*job.staging_bytes, given_back);
  if (cap == 0 || !over_limit(held, needed, cap)) return {};
  return "staging its GPU buffers through host memory needs " + std::to_string(needed) +
         " bytes, and job '" + job.job + "''s GPU ops in flight hold " + std::to_string(held) +
         " of the " + std::to_string(cap) + " allowed ([jobs." + job.job +
         "] max_staging_bytes; wait for earlier ops, or make them smaller)";
}

void charge_inflight(Session& session, uint64_t user_data, uint64_t bytes) {
  Session::OpsInFlight& ops = session.ops_in_flight[user_data];
  ++ops.count;
  ops.bytes += bytes;
  if (session.job_counters()) {
    bump_single_writer(session.job_counters()->inflight_bytes, bytes);
  }
}

void discharge_inflight(Session& session, uint64_t user_data) {
  auto it = session.ops_in_flight.find(user_data);
  if (it == session.ops_in_flight.end()) return;
  Session::OpsInFlight& ops = it->second;
  const uint64_t bytes = ops.bytes / ops.count;
  ops.bytes -= bytes;
  take_from_job(session, bytes);
  if (--ops.count == 0) session.ops_in_flight.erase(it);
}

void discharge_session(Session& session) {
  take_from_job(session, session.inflight_bytes());
  session.ops_in_flight.clear();
}

}  // namespace plexus::daemon
