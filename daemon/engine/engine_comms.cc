// The engine's communicators: a communicator joining (its members' sessions bound to it)
// and a rank leaving it.

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
    const Comm::Member& member = comm->members()[static_cast<size_t>(rank)];
    if (member.remote) continue;
    Session* session = sessions_.find(member.session_id);
    if (session == nullptr) {
      // It left between joining and now: the communicator cannot run.
      matcher_.fail(*comm, PLEXUS_ERR_PEER_LOST,
                    "rank " + std::to_string(rank) + " (pid " + std::to_string(member.pid) +
                        ") disconnected while communicator " + token_prefix(comm->token()) +
                        " was being created",
                    nullptr);
      matcher_.member_gone(*comm, rank);
      continue;
    }
    session->comms[member.handle] = CommMembership{comm, rank};
    session->comm_count.store(static_cast<uint32_t>(session->comms.size()),
                              std::memory_order_relaxed);
    if (!comm->job_counters) {
      comm->job = session->job();
      comm->job_counters = session->job_counters();
    }
  }
  // Its frames to other nodes are its job's flow in the send schedulers.
  if (comm->span() && comm->job_counters) {
    internode_.links().set_comm_flow(comm->span()->comm_id, comm->job_counters->flow);
  }
}

void Engine::leave_comm(uint64_t session_id, uint32_t handle, bool abort) {
  Session* session = sessions_.find(session_id);
  if (session == nullptr) return;
  auto it = session->comms.find(handle);
  if (it == session->comms.end()) return;
  std::shared_ptr<Comm> comm = it->second.comm;
  const int rank = it->second.rank;
  session->comms.erase(it);
  session->comm_count.store(static_cast<uint32_t>(session->comms.size()),
                            std::memory_order_relaxed);
  const std::string who = "rank " + std::to_string(rank) + " (" + session->describe() + ")";
  const std::string reason =
      abort ? who + " aborted communicator " + token_prefix(comm->token())
            : who + " left communicator " + token_prefix(comm->token()) + " (destroyed it)";
  if (abort) {
    matcher_.fail(*comm, PLEXUS_ERR_PEER_LOST, reason, session);
  } else if (comm->internode && comm->internode->active) {
    // The other nodes are inside a collective that needs this node's part.
    matcher_.fail(*comm, PLEXUS_ERR_PEER_LOST, reason + " while a collective was in flight",
                  nullptr);
  } else {
    matcher_.rank_departed(*comm, rank, reason);
    if (comm->span() && !comm->broken()) internode_.send_departed(*comm, rank, reason);
  }
  matcher_.member_gone(*comm, rank);
}

void Engine::revoke_comm(uint64_t session_id, uint32_t handle, const std::string& text) {
  Session* session = sessions_.find(session_id);
  if (session == nullptr) return;
  auto it = session->comms.find(handle);
  if (it == session->comms.end()) return;
  Comm& comm = *it->second.comm;
  if (comm.broken()) return;  // the first reason stays
  events_->emit("comm_revoked", "warning", text,
                {{"comm", token_prefix(comm.token())}, {"rank", it->second.rank}});
  matcher_.fail(comm, PLEXUS_ERR_REVOKED, text, nullptr);
}

uint64_t Engine::suspend_comm(uint64_t session_id, uint32_t handle, bool suspend) {
  Session* session = sessions_.find(session_id);
  if (session == nullptr) return 0;
  auto it = session->comms.find(handle);
  if (it == session->comms.end()) return 0;
  Comm& comm = *it->second.comm;
  const int rank = it->second.rank;
  comm.presence[static_cast<size_t>(rank)].suspended = suspend;
  bool all = true;
  for (size_t r = 0; r < comm.presence.size(); ++r) {
    const Comm::Presence& p = comm.presence[r];
    if (!comm.members()[r].remote && p.present && !p.suspended) all = false;
  }
  const bool was = comm.suspended.exchange(all);
  if (!all) {
    if (was) {
      events_->emit(
          "comm_resumed", "info",
          "rank " + std::to_string(rank) + " resumed communicator " + token_prefix(comm.token()),
          {{"comm", token_prefix(comm.token())}, {"rank", rank}});
    }
    return 0;
  }
  if (was) return 0;
  // Scratch a slice still holds (an op that failed, its sends not yet released) stays.
  const uint64_t released = comm.internode ? comm.internode->scratch->release_idle() : 0;
  events_->emit("comm_suspended", "info",
                "communicator " + token_prefix(comm.token()) + " suspended by its " +
                    std::to_string(comm.local_ranks()) +
                    " rank(s) on this node: " + std::to_string(released) + " bytes released",
                {{"comm", token_prefix(comm.token())}, {"bytes", released}});
  return released;
}

void Engine::revoke_remote(uint64_t comm_id, const std::string& text, plexus_result_t code) {
  Comm* comm = internode_.find(comm_id);
  if (comm == nullptr || comm->broken()) return;
  events_->emit("comm_revoked", "warning", text, {{"comm", token_prefix(comm->token())}});
  matcher_.fail(*comm, code, text, nullptr);
}

}  // namespace plexus::daemon
