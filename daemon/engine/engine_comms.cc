// The engine's communicators: joining, a rank leaving or lost, and a communicator failing,
// with what that does to the ops that wait on it.

#include <string>

#include "daemon/engine/engine.h"

namespace plexus::daemon {

void Engine::add_comm(const std::shared_ptr<Comm>& comm) {
  const int n = comm->nranks();
  comm->next_seq.assign(static_cast<size_t>(n), 0);
  watch_.watch(comm);
  comm->members_present = comm->local_ranks();
  if (comm->span()) internode_.add(comm);
  for (int rank = 0; rank < n; ++rank) {
    auto& member = comm->mutable_members()[static_cast<size_t>(rank)];
    if (member.remote) continue;
    Session* session = find_session(member.session_id);
    member.session = session;
    if (session == nullptr) {
      // It left between joining and now: the communicator cannot run.
      fail_comm(*comm, PLEXUS_ERR_PEER_LOST,
                "rank " + std::to_string(rank) + " (pid " + std::to_string(member.pid) +
                    ") disconnected while communicator " + token_prefix(comm->token()) +
                    " was being created",
                nullptr);
      member_gone(*comm, rank);
      continue;
    }
    session->comms[member.handle] = CommMembership{comm, rank};
    if (!comm->job_counters) {
      comm->job = session->job;
      comm->job_counters = session->job_counters;
    }
  }
}

void Engine::leave_comm(uint64_t session_id, uint32_t handle, bool abort) {
  Session* session = find_session(session_id);
  if (session == nullptr) return;
  auto it = session->comms.find(handle);
  if (it == session->comms.end()) return;
  std::shared_ptr<Comm> comm = it->second.comm;
  const int rank = it->second.rank;
  session->comms.erase(it);
  session->comm_count.fetch_sub(1, std::memory_order_relaxed);
  const std::string who = "rank " + std::to_string(rank) + " (" + session->describe() + ")";
  const std::string reason =
      abort ? who + " aborted communicator " + token_prefix(comm->token())
            : who + " left communicator " + token_prefix(comm->token()) + " (destroyed it)";
  if (abort) {
    fail_comm(*comm, PLEXUS_ERR_PEER_LOST, reason, session);
  } else if (comm->internode && comm->internode->active) {
    // The other nodes are inside a collective that needs this node's part.
    fail_comm(*comm, PLEXUS_ERR_PEER_LOST, reason + " while a collective was in flight", nullptr);
  } else {
    rank_departed(*comm, rank, reason);
    if (comm->span() && !comm->broken()) internode_.send_departed(*comm, rank, reason);
  }
  member_gone(*comm, rank);
}

void Engine::rank_departed(Comm& comm, int rank, const std::string& reason) {
  comm.mutable_members()[static_cast<size_t>(rank)].departure = reason;
  if (comm.first_departure.empty()) comm.first_departure = reason;
  if (comm.broken()) return;  // everything pending has already failed
  auto fail_part = [&](const Contribution& part) {
    complete(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST, reason);
  };
  // Every collective needs every rank: the pending ones can never finish.
  for (auto& op : comm.collectives) {
    for (auto& part : op.parts) fail_part(part);
  }
  comm.collectives.clear();
  const auto n = static_cast<size_t>(comm.nranks());
  const auto gone = static_cast<size_t>(rank);
  for (size_t key = 0; key < comm.sends.size(); ++key) {
    if (key / n != gone && key % n != gone) continue;
    for (auto& part : comm.sends[key]) fail_part(part);
    for (auto& part : comm.recvs[key]) fail_part(part);
    comm.sends[key].clear();
    comm.recvs[key].clear();
  }
}

void Engine::member_gone(Comm& comm, int rank) {
  auto& member = comm.mutable_members()[static_cast<size_t>(rank)];
  if (!member.present) return;
  member.present = false;
  if (member.departure.empty()) {
    member.departure = "rank " + std::to_string(rank) + " is no longer a member of communicator " +
                       token_prefix(comm.token());
  }
  if (comm.first_departure.empty()) comm.first_departure = member.departure;
  member.session = nullptr;
  if (--comm.members_present == 0) {
    if (comm.span()) internode_.retire(comm);
    comm.finished.store(true, std::memory_order_release);
  }
}

void Engine::fail_comm(Comm& comm, plexus_result_t status, const std::string& reason,
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
      complete(part.session, part.entry.user_data, PLEXUS_ERR_COMM_ABORTED,
               "communicator " + token_prefix(comm.token()) + " was aborted by this rank");
    } else {
      complete(part.session, part.entry.user_data, comm.broken_status(), comm.broken_reason());
    }
  };
  for (auto& op : comm.collectives) {
    for (auto& part : op.parts) fail_part(part);
  }
  comm.collectives.clear();
  for (auto& queue : comm.sends) {
    for (auto& part : queue) fail_part(part);
    queue.clear();
  }
  for (auto& queue : comm.recvs) {
    for (auto& part : queue) fail_part(part);
    queue.clear();
  }
}

}  // namespace plexus::daemon
