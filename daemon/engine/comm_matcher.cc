// Matching within communicators (comm_matcher.h): collectives once every local rank has
// called, sends with their receives, and what a rank leaving or a communicator failing
// does to the ops that wait on it.
#include "daemon/engine/comm_matcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <utility>

#include "shm/dtype.h"

namespace plexus::daemon {

CommMatcher::CommMatcher(Complete complete, OpWatch& watch, GpuStaging& gpu,
                         LocalExecutor& executor, InternodeRunner& internode)
    : complete_(std::move(complete)),
      watch_(watch),
      gpu_(gpu),
      executor_(executor),
      internode_(internode) {}

void CommMatcher::dispatch(Comm& comm, Contribution part) {
  if (is_point_to_point(part.entry.opcode)) {
    submit_p2p(comm, std::move(part));
  } else {
    submit_collective(comm, std::move(part));
  }
}

bool CommMatcher::joins_a_waiting_op(const Comm& comm, const Contribution& part) const {
  const auto rank = static_cast<size_t>(part.rank);
  if (!is_point_to_point(part.entry.opcode)) {
    if (rank >= comm.next_seq.size() || comm.next_seq[rank] < comm.first_seq) return false;
    const uint64_t index = comm.next_seq[rank] - comm.first_seq;
    return index < comm.collectives.size() && comm.collectives[index].arrived > 0;
  }
  if (part.entry.opcode == shm::Opcode::kRecv) return comm.p2p.message_waits(part);
  const auto peer = static_cast<size_t>(part.entry.peer);
  if (peer >= comm.members().size() || comm.members()[peer].remote) return false;
  return comm.p2p.recv_waits(part.entry.peer, part.rank, part.entry.tag);
}

void CommMatcher::submit_collective(Comm& comm, Contribution part) {
  const auto rank = static_cast<size_t>(part.rank);
  if (!comm.first_departure.empty() || comm.next_seq[rank] >= comm.remote_limit) {
    complete_(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST,
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
  run_ready(comm);
}

void CommMatcher::run_ready(Comm& comm) {
  if (comm.internode) {
    // One op between daemons at a time, in op order; the next starts when it finishes.
    if (comm.internode->active || comm.collectives.empty() ||
        comm.collectives.front().arrived != comm.local_ranks()) {
      return;
    }
    if (fail_on_mismatch(comm, comm.collectives.front(), comm.first_seq)) return;
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

std::string CommMatcher::find_mismatch(const Comm& comm, const PendingCollective& op,
                                       uint64_t seq) {
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

bool CommMatcher::fail_on_mismatch(Comm& comm, const PendingCollective& op, uint64_t seq) {
  const std::string mismatch = find_mismatch(comm, op, seq);
  if (mismatch.empty()) return false;
  // Later collectives would be matched against the wrong calls: the communicator cannot
  // continue, as with NCCL.
  spdlog::warn("{}", mismatch);
  fail(comm, PLEXUS_ERR_MISMATCH, mismatch, nullptr);
  return true;
}

void CommMatcher::execute_collective(Comm& comm, PendingCollective& op, uint64_t seq) {
  if (fail_on_mismatch(comm, op, seq)) return;
  const auto& first = op.parts[0].entry;
  if (gpu_.start_collective(comm, op, seq)) return;
  CollectiveArgs args{first.opcode, first.dtype, first.redop, first.count, first.peer};
  // A latency-class job's op runs whole; others may be cut so that one can go between.
  const bool may_slice = std::none_of(op.parts.begin(), op.parts.end(), [](const Contribution& p) {
    return p.session != nullptr && p.session->traffic_class() == transports::TrafficClass::kLatency;
  });
  const uint64_t bytes = executor_.run(args, op.parts, may_slice);
  watch_.count_completed(comm, bytes, first);
  if (watch_.timing()) watch_.record_finished(comm, op, seq, "local", PLEXUS_SUCCESS);
  for (auto& part : op.parts) complete_(part.session, part.entry.user_data, PLEXUS_SUCCESS, {});
}

void CommMatcher::rank_departed(Comm& comm, int rank, const std::string& reason) {
  comm.presence[static_cast<size_t>(rank)].departure = reason;
  if (comm.first_departure.empty()) comm.first_departure = reason;
  if (comm.broken()) return;  // everything pending has already failed
  auto fail_part = [&](const Contribution& part) {
    complete_(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST, reason);
  };
  // Every collective needs every rank: the pending ones can never finish.
  for (auto& op : comm.collectives) {
    for (auto& part : op.parts) fail_part(part);
  }
  comm.collectives.clear();
  // Its recvs, and its sends and those to it that wait; recvs that only it could satisfy
  // follow (fail_orphaned_recvs).
  P2pTaken taken = comm.p2p.take([&](const Contribution& r) { return r.rank == rank; },
                                 [&](const P2pMessage& m, int destination) {
                                   return destination == rank || (m.send && m.source == rank);
                                 });
  for (auto& part : taken.recvs) fail_part(part);
  for (auto& part : taken.sends) fail_part(part);
  fail_orphaned_recvs(comm, rank, reason);
}

void CommMatcher::member_gone(Comm& comm, int rank) {
  Comm::Presence& member = comm.presence[static_cast<size_t>(rank)];
  if (!member.present) return;
  member.present = false;
  if (member.departure.empty()) {
    member.departure = "rank " + std::to_string(rank) + " is no longer a member of communicator " +
                       token_prefix(comm.token());
  }
  if (comm.first_departure.empty()) comm.first_departure = member.departure;
  if (--comm.members_present == 0) {
    if (comm.span()) internode_.retire(comm);
    comm.finished.store(true, std::memory_order_release);
  }
}

void CommMatcher::fail(Comm& comm, plexus_result_t status, const std::string& reason,
                       const Session* aborting_session) {
  const bool first = !comm.broken();
  if (first && watch_.timing() && !comm.collectives.empty() &&
      comm.collectives.front().arrived > 0) {
    watch_.record_finished(comm, comm.collectives.front(), comm.first_seq,
                           comm.internode ? comm.internode->active_algorithm : "local", status);
  }
  comm.mark_broken(status, reason);
  internode_.comm_failed(comm, first, reason);
  auto fail_part = [&](const Contribution& part) {
    if (part.session == nullptr) return;
    if (part.session == aborting_session) {
      complete_(part.session, part.entry.user_data, PLEXUS_ERR_COMM_ABORTED,
                "communicator " + token_prefix(comm.token()) + " was aborted by this rank");
    } else {
      complete_(part.session, part.entry.user_data, comm.broken_status(), comm.broken_reason());
    }
  };
  for (auto& op : comm.collectives) {
    for (auto& part : op.parts) fail_part(part);
  }
  comm.collectives.clear();
  auto all = [](const auto&...) { return true; };
  P2pTaken taken = comm.p2p.take(all, all);
  for (auto& part : taken.recvs) fail_part(part);
  for (auto& part : taken.sends) fail_part(part);
}

}  // namespace plexus::daemon
