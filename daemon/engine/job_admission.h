// Per-job admission on this node (JobCaps): what a job's ops in flight and its GPU ops'
// staging copies hold, and the refusal of an op that would pass a cap. An op is checked
// when submitted, before it joins its communicator, so a refused op is one the rank never
// called (as with a process's --max-gpu-staging-bytes): it takes no sequence number, and
// the other ranks' ops are untouched. Engine thread only.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/engine/job_metrics.h"
#include "daemon/engine/session.h"
#include "shm/entry_validation.h"

namespace plexus::daemon {

// Whether `held` and `more` together pass `limit` (without overflowing).
bool over_limit(uint64_t held, uint64_t more, uint64_t limit);
// What an op holds against its job's in-flight cap: the larger of its buffers.
uint64_t inflight_charge(const shm::ValidatedEntry& entry);

// "" or why `job` may not take an op holding `bytes` more (naming the job, what it holds,
// the cap and the config key).
[[nodiscard]] std::string refuse_inflight(const JobCounters& job, uint64_t bytes);
// "" or why `job`'s GPU ops may not hold `needed` more bytes of host staging, once
// `given_back` of what they hold now is released.
[[nodiscard]] std::string refuse_staging(const JobCounters& job, uint64_t needed,
                                         uint64_t given_back);

// An op of `session` with this user_data was accepted, holding `bytes`.
void charge_inflight(Session& session, uint64_t user_data, uint64_t bytes);
// One op of `session` with this user_data ended: what it held is given back (ops sharing a
// user_data give back an equal part each, the rest with the last).
void discharge_inflight(Session& session, uint64_t user_data);
// The session is gone: what its ops still held is given back.
void discharge_session(Session& session);

}  // namespace plexus::daemon
