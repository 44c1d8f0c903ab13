// The engine's communicators: a communicator joining (its members' sessions bound to it)
// and a rank leaving it.

#include <string>

#include "daemon/engine/engine.h"

namespace plexus::daemon {
namespace {

// Whether every rank of this node still in `comm` has parked it (plexus_comm_suspend): when
// that becomes true the memory kept for it goes, and the event says so; when it stops being
// true (`rank` resumed), the event says that. Returns the bytes released.
uint64_t settle_suspension(Comm& comm, monitor::EventLog& events, int rank) {
  int parked = 0;
  bool all = true;
  for (size_t r = 0; r < comm.presence.size(); ++r) {
    const Comm::Presence& p = comm.presence[r];
    if (comm.members()[r].remote || !p.present) continue;
    if (p.suspended) {
      ++parked;
    } else {
      all = false;
    }
  }
  all = all && parked > 0;
  const bool was = comm.suspended.exchange(all);
  const std::string name = token_prefix(comm.token());
  if (was && !all) {
    events.emit("comm_resumed", "info",
                "rank " + std::to_string(rank) + " resumed communicator " + name,
                {{"comm", name}, {"rank", rank}});
  }
  if (was || !all) return 0;
  const uint64_t released = comm.internode ? comm.internode->scratch->release() : 0;
  events.emit("comm_suspended", "info",
              "communicator " + name + " suspended by its " + std::to_string(parked) +
                  " rank(s) on this node: " + std::to_string(released) + " bytes released",
              {{"comm", name}, {"bytes", released}});
  return released;
}

}  // namespace

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
  // The one rank here that had not parked it left: the others' suspension takes effect.
  if (!comm->finished.load()) settle_suspension(*comm, *events_, rank);
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
  comm.presence[static_cast<size_t>(it->second.rank)].suspended = suspend;
  return settle_suspension(comm, *events_, it->second.rank);
}

void Engine::revoke_remote(uint64_t comm_id, const std::string& text, plexus_result_t code) {
  Comm* comm = internode_.find(comm_id);
  if (comm == nullptr || comm->broken()) return;
  events_->emit("comm_revoked", "warning", text, {{"comm", token_prefix(comm->token())}});
  matcher_.fail(*comm, code, text, nullptr);
}

}  // namespace plexus::daemon
