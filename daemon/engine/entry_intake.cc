#include "daemon/engine/entry_intake.h"

#include <algorithm>
#include <string>

#include "daemon/engine/job_admission.h"
#include "shm/dtype.h"
#include "shm/stream_flags.h"

namespace plexus::daemon {

namespace {

// Whether the entry's stream has reached it (any entry not stream-ordered has).
bool stream_reached(const Session& session, const shm::SubmissionEntry& raw) {
  if ((raw.flags & shm::kEntryStreamOrdered) == 0) return true;
  // A malformed one goes on at once, to be refused by handle().
  if (raw.stream_ticket == 0 ||
      !shm::validate_stream_flags(raw.stream_flags, session.pool().size()).ok()) {
    return true;
  }
  return shm::stream_ready(shm::stream_flags_at(session.pool().data(), raw.stream_flags),
                           raw.stream_ticket);
}

}  // namespace

EntryIntake::EntryIntake(OpWatch& watch, Completions& completions, CommMatcher& matcher,
                         GpuStaging& gpu, Hooks hooks)
    : watch_(watch),
      completions_(completions),
      matcher_(matcher),
      gpu_(gpu),
      hooks_(std::move(hooks)) {}

bool EntryIntake::poll(Session& session, std::vector<shm::SubmissionEntry>& batch) {
  shm::DaemonRingEnd& ring = *session.ring_end;
  uint32_t space = ring.completion_space();
  if (ring.corrupt()) {
    hooks_.kill_session(session, ring.corruption());
    return true;
  }
  uint32_t allowed = space > session.inflight ? space - session.inflight : 0;
  uint32_t n = ring.consume(batch.data(), std::min(allowed, kBatchEntries));
  if (ring.corrupt()) {
    hooks_.kill_session(session, ring.corruption());
    return true;
  }
  for (uint32_t i = 0; i < n && !session.removed; ++i) {
    ++session.inflight;
    session.ops_submitted.fetch_add(1, std::memory_order_relaxed);
    accept(session, batch[i]);
  }
  return n > 0;
}

void EntryIntake::handle(Session& session, const shm::SubmissionEntry& raw) {
  Contribution part;
  part.session = &session;
  shm::ValidationResult result = shm::validate_entry_fields(raw, &part.entry);
  if (result.ok() && part.entry.stream_ordered) {
    result = shm::validate_stream_flags(part.entry.stream_flags, session.pool().size());
  }
  if (!result.ok()) {
    watch_.count_bad_entry(session);
    completions_.refuse(session, raw, result.status, result.error);
    return;
  }
  // The client learnt its handle only after add_comm ran here (ControlServer::form_comm).
  auto it = session.comms.find(part.entry.comm);
  if (it == session.comms.end()) {
    watch_.count_bad_entry(session);
    completions_.refuse(session, raw, PLEXUS_ERR_INVALID_ARGUMENT,
                        "communicator handle " + std::to_string(part.entry.comm) +
                            " is not a communicator of this process");
    return;
  }
  Comm& comm = *it->second.comm;
  part.rank = it->second.rank;
  // Refused, naming the op and the rank; NO_MEMORY (a cap or staging budget) is counted
  // against the job.
  auto refuse_op = [&](plexus_result_t status, const std::string& why) {
    if (status == PLEXUS_ERR_NO_MEMORY && session.job_counters()) {
      bump_single_writer(session.job_counters()->refused_ops, uint64_t{1});
    }
    completions_.refuse(session, raw, status,
                        std::string(shm::opcode_name(raw.opcode)) + " on rank " +
                            std::to_string(part.rank) + ": " + why);
  };
  if (comm.broken()) {
    completions_.refuse(session, raw, comm.broken_status(), comm.broken_reason());
    return;
  }
  result = shm::validate_entry_buffers(
      raw, comm.nranks(), part.rank, [&](uint32_t region) { return session.region_bytes(region); },
      &part.entry);
  if (!result.ok()) {
    watch_.count_bad_entry(session);
    refuse_op(result.status, result.error);
    return;
  }
  if (part.entry.send.bytes > 0 && part.entry.send.region == shm::kHostPoolRegion) {
    part.send = session.region_base(part.entry.send.region) + part.entry.send.offset;
  }
  if (part.entry.recv.bytes > 0 && part.entry.recv.region == shm::kHostPoolRegion) {
    part.recv = session.region_base(part.entry.recv.region) + part.entry.recv.offset;
  }
  // An op on GPU buffers or a stream is found again at its completion by its user_data, so
  // that must be its own among the session's ops in flight: an entry that would share it
  // with such an op, either way round, is refused and the op in flight left untouched.
  const bool keyed_by_id = part.entry.stream_ordered ||
                           part.entry.send.region != shm::kHostPoolRegion ||
                           part.entry.recv.region != shm::kHostPoolRegion;
  const bool id_in_flight = session.ops_in_flight.contains(raw.user_data);
  if (id_in_flight && (keyed_by_id || session.staged_ops.contains(raw.user_data) ||
                       session.stream_releases.contains(raw.user_data))) {
    watch_.count_bad_entry(session);
    completions_.refuse(session, raw, PLEXUS_ERR_INVALID_ARGUMENT,
                        "user_data " + std::to_string(raw.user_data) +
                            " is already in flight on GPU buffers or a stream");
    return;
  }
  // Past its job's cap, an op that would start new work is refused before it takes
  // anything (job_admission.h).
  const uint64_t charge = inflight_charge(part.entry);
  // Behind entries still waiting for GPU input it is not known what it joins: it is
  // held to the caps.
  const bool joins = session.staging.empty() && matcher_.joins_a_waiting_op(comm, part);
  if (session.job_counters() && !joins) {
    if (std::string why = refuse_inflight(*session.job_counters(), charge); !why.empty()) {
      refuse_op(PLEXUS_ERR_NO_MEMORY, why);
      return;
    }
  }
  gpu::StagedOp* staged = nullptr;
  if (part.entry.send.region != shm::kHostPoolRegion ||
      part.entry.recv.region != shm::kHostPoolRegion) {
    // A send or receive within the node needs no host copy: one copy moves it when matched.
    // Nor do a copy collective within the node (its blocks moved by the copy engines) and
    // a collective the daemon's kernel reduces on the GPU, where the spans lie.
    // A recv from any source on a communicator of this node alone matches a send here too.
    const bool direct = (shm::is_point_to_point(part.entry.opcode) && part.entry.peer >= 0 &&
                         part.entry.peer < comm.nranks() &&
                         !comm.members()[static_cast<size_t>(part.entry.peer)].remote) ||
                        (part.entry.any_source && !comm.span()) ||
                        gpu_.moves_directly(comm, part.entry);
    GpuStaging::Staged staging = gpu_.stage(session, part, direct, !joins);
    if (staging.status != PLEXUS_SUCCESS) {
      refuse_op(staging.status, staging.error);
      return;
    }
    staged = staging.op;
  }
  if (part.entry.stream_ordered) {
    session.stream_releases.emplace(
        raw.user_data, Session::StreamRelease{part.entry.stream_flags, part.entry.stream_ticket});
  }
  charge_inflight(session, raw.user_data, charge);
  // The engine goes on with other work while the copy engines bring the input in; the
  // session's later ops queue behind it.
  if (staged != nullptr) gpu_.start_input(session, *staged);
  bool waits = !session.staging.empty();
  if (!waits && staged != nullptr) {
    // One whose input copy failed waits there too, to be failed in its turn (advance).
    const common::Result<GpuStaging::Turn> turn =
        gpu_.may_leave_staging(session, &comm, *staged, part.entry);
    waits = !turn.ok() || *turn == GpuStaging::Turn::kWait;
  }
  if (waits) {
    session.staging.push_back(std::move(part));
    return;
  }
  matcher_.dispatch(comm, std::move(part));
}

// Stream-ordered ops: the client's GPU stream says when the work before an op is done by
// writing the entry's ticket to its ready flag (no kernel, no host callback); the engine
// holds the entry until then, and writes the done flag when the op ends, which lets the
// stream go on. A stream that never gets there holds only its own session's entries.
void EntryIntake::accept(Session& session, const shm::SubmissionEntry& raw) {
  if (session.held_for_stream.empty() && stream_reached(session, raw)) {
    handle(session, raw);
    return;
  }
  session.held_for_stream.push_back(raw);
  gpu_.note_new_work();
}

bool EntryIntake::release_held(Session& session) {
  bool released = false;
  while (!session.removed && !session.held_for_stream.empty() &&
         stream_reached(session, session.held_for_stream.front())) {
    const shm::SubmissionEntry raw = session.held_for_stream.front();
    session.held_for_stream.pop_front();
    handle(session, raw);
    released = true;
  }
  return released;
}

}  // namespace plexus::daemon
