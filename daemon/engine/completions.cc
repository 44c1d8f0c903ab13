// Completions (completions.h): an op's stream released, its completion posted to the
// session's ring, and the rings published once per loop turn.
#include "daemon/engine/completions.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "daemon/engine/job_admission.h"
#include "shm/stream_flags.h"

namespace plexus::daemon {

void Completions::refuse(Session& session, const shm::SubmissionEntry& raw, plexus_result_t status,
                         const std::string& message) {
  // Whatever else is wrong with it, a stream waiting on the entry is let go.
  if ((raw.flags & shm::kEntryStreamOrdered) != 0 && raw.stream_ticket != 0 &&
      shm::validate_stream_flags(raw.stream_flags, session.pool().size()).ok()) {
    shm::release_stream(shm::stream_flags_at(session.pool().data(), raw.stream_flags),
                        raw.stream_ticket);
  }
  post(&session, raw.user_data, status, message);
}

void Completions::finish(Session* session, uint64_t user_data, plexus_result_t status,
                         const std::string& message) {
  if (!session->stream_releases.empty()) release_stream(*session, user_data);
  discharge_inflight(*session, user_data);
  post(session, user_data, status, message);
}

void Completions::post(Session* session, uint64_t user_data, plexus_result_t status,
                       const std::string& message) {
  if (session == nullptr || session->removed) return;
  if (status != PLEXUS_SUCCESS && session->job_counters()) {
    bump_single_writer(session->job_counters()->failed_completions, uint64_t{1});
  }
  shm::CompletionEntry entry;
  entry.user_data = user_data;
  entry.status = status;
  entry.message_len = static_cast<uint32_t>(std::min(message.size(), shm::kCompletionMessageBytes));
  entry.source = -1;
  if (auto it = session->any_source_matches.find(user_data);
      it != session->any_source_matches.end()) {
    if (status == PLEXUS_SUCCESS) entry.source = it->second;
    session->any_source_matches.erase(it);
  }
  std::memcpy(entry.message, message.data(), entry.message_len);
  session->ring_end->post(entry);
  if (session->inflight > 0) --session->inflight;
  if (!session->needs_publish) {
    session->needs_publish = true;
    to_publish_.push_back(session);
  }
}

void Completions::publish() {
  for (Session* session : to_publish_) {
    session->needs_publish = false;
    if (session->ring_end->publish()) shm::signal_eventfd(session->completion_eventfd());
  }
  to_publish_.clear();
}

void Completions::release_stream(Session& session, uint64_t user_data) {
  auto it = session.stream_releases.find(user_data);
  if (it == session.stream_releases.end()) return;
  shm::release_stream(shm::stream_flags_at(session.pool().data(), it->second.flags_offset),
                      it->second.ticket);
  session.stream_releases.erase(it);
}

}  // namespace plexus::daemon
