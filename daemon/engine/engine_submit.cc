// Submissions: entries consumed from a session's ring, copied out and validated, handed to
// their communicator (after their GPU input, where they have one), and matched into ops:
// collectives once every local rank has called, sends with their receives.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "daemon/engine/engine.h"
#include "shm/dtype.h"

namespace plexus::daemon {

bool Engine::poll_session(Session& session) {
  shm::DaemonRingEnd& ring = *session.ring_end;
  uint32_t space = ring.completion_space();
  if (ring.corrupt()) {
    kill_session(session, ring.corruption());
    return true;
  }
  uint32_t allowed = space > session.inflight ? space - session.inflight : 0;
  uint32_t n = ring.consume(batch_.data(), std::min(allowed, kBatchEntries));
  if (ring.corrupt()) {
    kill_session(session, ring.corruption());
    return true;
  }
  for (uint32_t i = 0; i < n && !session.removed; ++i) {
    ++session.inflight;
    session.ops_submitted.fetch_add(1, std::memory_order_relaxed);
    accept_entry(session, batch_[i]);
  }
  return n > 0;
}

void Engine::handle_entry(Session& session, const shm::SubmissionEntry& raw) {
  Contribution part;
  part.session = &session;
  shm::ValidationResult result = shm::validate_entry_fields(raw, &part.entry);
  if (result.ok() && part.entry.stream_ordered) {
    result = shm::validate_stream_flags(part.entry.stream_flags, session.pool.size());
  }
  if (!result.ok()) {
    watch_.count_bad_entry(session);
    refuse_entry(session, raw, result.status, result.error);
    return;
  }
  // The client learnt its handle only after add_comm ran here (ControlServer::form_comm).
  auto it = session.comms.find(part.entry.comm);
  if (it == session.comms.end()) {
    watch_.count_bad_entry(session);
    refuse_entry(session, raw, PLEXUS_ERR_INVALID_ARGUMENT,
                 "communicator handle " + std::to_string(part.entry.comm) +
                     " is not a communicator of this process");
    return;
  }
  Comm& comm = *it->second.comm;
  part.rank = it->second.rank;
  if (comm.broken()) {
    refuse_entry(session, raw, comm.broken_status(), comm.broken_reason());
    return;
  }
  result = shm::validate_entry_buffers(
      raw, comm.nranks(), part.rank, [&](uint32_t region) { return session.region_bytes(region); },
      &part.entry);
  if (!result.ok()) {
    watch_.count_bad_entry(session);
    refuse_entry(session, raw, result.status,
                 std::string(shm::opcode_name(raw.opcode)) + " on rank " +
                     std::to_string(part.rank) + ": " + result.error);
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
    refuse_entry(session, raw, PLEXUS_ERR_INVALID_ARGUMENT,
                 "user_data " + std::to_string(raw.user_data) +
                     " is already in flight on GPU buffers or a stream");
    return;
  }
  gpu::StagedOp* staged = nullptr;
  if (part.entry.send.region != shm::kHostPoolRegion ||
      part.entry.recv.region != shm::kHostPoolRegion) {
    std::string error;
    // A send or receive within the node needs no host copy: one copy moves it when matched.
    // Nor do a copy collective within the node (its blocks moved by the copy engines) and
    // a collective the daemon's kernel reduces on the GPU, where the spans lie.
    const bool direct = (shm::is_point_to_point(part.entry.opcode) && part.entry.peer >= 0 &&
                         part.entry.peer < comm.nranks() &&
                         !comm.members()[static_cast<size_t>(part.entry.peer)].remote) ||
                        gpu_.moves_directly(comm, part.entry);
    if (const plexus_result_t status = gpu_.stage(session, part, direct, &staged, &error);
        status != PLEXUS_SUCCESS) {
      refuse_entry(session, raw, status,
                   std::string(shm::opcode_name(raw.opcode)) + " on rank " +
                       std::to_string(part.rank) + ": " + error);
      return;
    }
  }
  if (part.entry.stream_ordered) {
    session.stream_releases.emplace(
        raw.user_data, Session::StreamRelease{part.entry.stream_flags, part.entry.stream_ticket});
  }
  ++session.ops_in_flight[raw.user_data];
  // The engine goes on with other work while the copy engines bring the input in; the
  // session's later ops queue behind it.
  std::string copy_error;
  if (staged != nullptr) gpu_.start_input(session, *staged);
  if (!session.staging.empty() ||
      (staged != nullptr &&
       (!gpu_.may_leave_staging(session, &comm, *staged, part.entry, &copy_error) ||
        !copy_error.empty()))) {
    session.staging.push_back(std::move(part));
    return;
  }
  dispatch(comm, std::move(part));
}

void Engine::dispatch(Comm& comm, Contribution part) {
  if (is_point_to_point(part.entry.opcode)) {
    submit_p2p(comm, std::move(part));
  } else {
    submit_collective(comm, std::move(part));
  }
}

void Engine::submit_collective(Comm& comm, Contribution part) {
  const auto rank = static_cast<size_t>(part.rank);
  if (!comm.first_departure.empty() || comm.next_seq[rank] >= comm.remote_limit) {
    complete(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST,
             comm.first_departure.empty() ? comm.remote_departure : comm.first_departure);
    return;
  }
  const uint64_t seq = comm.next_seq[rank]++;
  const size_t index = seq - comm.first_seq;
  while (comm.collectives.size() <= index) {
    comm.collectives.emplace_back();
    comm.collectives.back().parts.resize(static_cast<size_t>(comm.nranks()));
  }
  PendingCollective& op = comm.collectives[index];
  op.parts[rank] = std::move(part);
  ++op.arrived;
  if (watch_.timing()) watch_.note_arrival(comm, op, static_cast<int>(rank));
  run_ready_collectives(comm);
}

void Engine::run_ready_collectives(Comm& comm) {
  if (comm.internode) {
    // One op between daemons at a time, in op order; the next starts when it finishes.
    if (comm.internode->active || comm.collectives.empty() ||
        comm.collectives.front().arrived != comm.local_ranks()) {
      return;
    }
    const std::string mismatch = find_mismatch(comm, comm.collectives.front(), comm.first_seq);
    if (!mismatch.empty()) {
      spdlog::warn("{}", mismatch);
      fail_comm(comm, PLEXUS_ERR_MISMATCH, mismatch, nullptr);
      return;
    }
    internode_.start_op(comm, comm.collectives.front());
    return;
  }
  while (!comm.collectives.empty() && comm.collectives.front().arrived == comm.nranks()) {
    execute_collective(comm, comm.collectives.front(), comm.first_seq);
    if (comm.collectives.empty()) return;  // the op failed the communicator
    comm.collectives.pop_front();
    ++comm.first_seq;
  }
}

std::string Engine::find_mismatch(const Comm& comm, const PendingCollective& op,
                                  uint64_t seq) const {
  size_t first_rank = 0;
  while (first_rank < op.parts.size() && op.parts[first_rank].session == nullptr) ++first_rank;
  if (first_rank == op.parts.size()) return {};
  const auto& first = op.parts[first_rank].entry;
  const std::string where = "collective #" + std::to_string(seq) + " of communicator " +
                            token_prefix(comm.token()) + ": ";
  const std::string first_name = "rank " + std::to_string(first_rank);
  for (size_t r = first_rank + 1; r < op.parts.size(); ++r) {
    if (op.parts[r].session == nullptr) continue;  // another node's rank
    const auto& e = op.parts[r].entry;
    const std::string ranks = first_name + " passed ";
    if (e.opcode != first.opcode) {
      return where + first_name + " called " +
             shm::opcode_name(static_cast<uint8_t>(first.opcode)) + " but rank " +
             std::to_string(r) + " called " + shm::opcode_name(static_cast<uint8_t>(e.opcode));
    }
    if (e.count != first.count) {
      return where + "count mismatch: " + ranks + std::to_string(first.count) + ", rank " +
             std::to_string(r) + " passed " + std::to_string(e.count);
    }
    if (e.dtype != first.dtype) {
      return where + "dtype mismatch: " + ranks + std::string(shm::dtype_name(first.dtype)) +
             ", rank " + std::to_string(r) + " passed " + std::string(shm::dtype_name(e.dtype));
    }
    if (uses_redop(first.opcode) && e.redop != first.redop) {
      return where + "reduction op mismatch: " + ranks + std::string(shm::redop_name(first.redop)) +
             ", rank " + std::to_string(r) + " passed " + std::string(shm::redop_name(e.redop));
    }
    if (is_rooted(first.opcode) && e.peer != first.peer) {
      return where + "root mismatch: " + ranks + std::to_string(first.peer) + ", rank " +
             std::to_string(r) + " passed " + std::to_string(e.peer);
    }
  }
  return {};
}

void Engine::execute_collective(Comm& comm, PendingCollective& op, uint64_t seq) {
  std::string mismatch = find_mismatch(comm, op, seq);
  if (!mismatch.empty()) {
    // Later collectives would be matched against the wrong calls: the communicator
    // cannot continue, as with NCCL.
    spdlog::warn("{}", mismatch);
    fail_comm(comm, PLEXUS_ERR_MISMATCH, mismatch, nullptr);
    return;
  }
  const auto& first = op.parts[0].entry;
  if (gpu_.start_collective(comm, op, seq)) return;
  CollectiveArgs args{first.opcode, first.dtype, first.redop, first.count, first.peer};
  const uint64_t bytes = executor_.run(args, op.parts);
  watch_.count_completed(comm, bytes, first);
  if (watch_.timing()) watch_.record_finished(comm, op, seq, "local", PLEXUS_SUCCESS);
  for (auto& part : op.parts) complete(part.session, part.entry.user_data, PLEXUS_SUCCESS, {});
}

void Engine::submit_p2p(Comm& comm, Contribution part) {
  const auto n = static_cast<size_t>(comm.nranks());
  if (comm.sends.size() != n * n) {
    comm.sends.resize(n * n);
    comm.recvs.resize(n * n);
  }
  const bool is_send = part.entry.opcode == shm::Opcode::kSend;
  const auto self = static_cast<size_t>(part.rank);
  const auto peer = static_cast<size_t>(part.entry.peer);
  if (comm.members()[peer].remote) {
    internode_.submit_p2p(comm, std::move(part));
    return;
  }
  if (const std::string* departure = comm.departure(part.entry.peer)) {
    complete(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST, *departure);
    return;
  }
  const size_t key = is_send ? self * n + peer : peer * n + self;
  auto& sends = comm.sends[key];
  auto& recvs = comm.recvs[key];
  (is_send ? sends : recvs).push_back(std::move(part));
  while (!sends.empty() && !recvs.empty()) {
    Contribution send = std::move(sends.front());
    Contribution recv = std::move(recvs.front());
    sends.pop_front();
    recvs.pop_front();
    if (send.entry.count != recv.entry.count || send.entry.dtype != recv.entry.dtype) {
      const std::string message =
          "send from rank " + std::to_string(send.rank) + " to rank " + std::to_string(recv.rank) +
          " carries " + std::to_string(send.entry.count) + " " +
          std::string(shm::dtype_name(send.entry.dtype)) + " but the matching recv expects " +
          std::to_string(recv.entry.count) + " " + std::string(shm::dtype_name(recv.entry.dtype));
      complete(send.session, send.entry.user_data, PLEXUS_ERR_MISMATCH, message);
      complete(recv.session, recv.entry.user_data, PLEXUS_ERR_MISMATCH, message);
      continue;
    }
    watch_.count_completed(comm, recv.entry.recv.bytes, send.entry, &recv.entry);
    if (!send.session->staged_ops.empty() || !recv.session->staged_ops.empty()) {
      if (gpu_.direct_op(send) || gpu_.direct_op(recv)) {
        gpu_.start_direct_copy(std::move(send), std::move(recv));
        continue;
      }
    }
    executor_.copy(recv.recv, send.send, recv.entry.recv.bytes);
    complete(send.session, send.entry.user_data, PLEXUS_SUCCESS, {});
    complete(recv.session, recv.entry.user_data, PLEXUS_SUCCESS, {});
  }
}

}  // namespace plexus::daemon
