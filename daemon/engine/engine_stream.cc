// Stream-ordered ops: the client's GPU stream says when the work before an op is done by
// writing the entry's ticket to its ready flag (no kernel, no host callback); the engine
// holds the entry until then, and writes the done flag when the op ends, which lets the
// stream go on. A stream that never gets there holds only its own session's entries.
#include "daemon/engine/engine.h"
#include "shm/stream_flags.h"

namespace plexus::daemon {

namespace {

// Whether the entry's stream has reached it (any entry not stream-ordered has).
bool stream_reached(const Session& session, const shm::SubmissionEntry& raw) {
  if ((raw.flags & shm::kEntryStreamOrdered) == 0) return true;
  // A malformed one goes on at once, to be refused by handle_entry.
  if (raw.stream_ticket == 0 ||
      !shm::validate_stream_flags(raw.stream_flags, session.pool().size()).ok()) {
    return true;
  }
  return shm::stream_ready(shm::stream_flags_at(session.pool().data(), raw.stream_flags),
                           raw.stream_ticket);
}

}  // namespace

void Engine::accept_entry(Session& session, const shm::SubmissionEntry& raw) {
  if (session.held_for_stream.empty() && stream_reached(session, raw)) {
    handle_entry(session, raw);
    return;
  }
  session.held_for_stream.push_back(raw);
  gpu_.note_new_work();
}

bool Engine::release_held_entries(Session& session) {
  bool released = false;
  while (!session.removed && !session.held_for_stream.empty() &&
         stream_reached(session, session.held_for_stream.front())) {
    const shm::SubmissionEntry raw = session.held_for_stream.front();
    session.held_for_stream.pop_front();
    handle_entry(session, raw);
    released = true;
  }
  return released;
}

bool Engine::sessions_wait_on_gpu() const {
  for (const auto& session : sessions_) {
    if (!session->held_for_stream.empty() || !session->staging.empty() ||
        !session->copying_back.empty()) {
      return true;
    }
  }
  return false;
}

}  // namespace plexus::daemon
