// Completions to the sessions' rings: an op that ends lets its stream go and frees its
// user_data, its completion is posted, and each ring touched is published (and its client
// woken) once per engine loop turn rather than once per op. Engine thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/engine/session.h"
#include "shm/ring.h"

namespace plexus::daemon {

class Completions {
 public:
  // A submitted entry refused before it became an op (nothing staged is touched); a
  // stream-ordered one releases its stream.
  void refuse(Session& session, const shm::SubmissionEntry& raw, plexus_result_t status,
              const std::string& message);
  // Ends an op: its stream is let go, its user_data freed, its completion posted.
  void finish(Session* session, uint64_t user_data, plexus_result_t status,
              const std::string& message);
  // Publishes every ring posted to since the last call.
  void publish();
  // The session is no longer served: nothing of it is published.
  void forget(const Session* session) { std::erase(to_publish_, session); }

 private:
  void post(Session* session, uint64_t user_data, plexus_result_t status,
            const std::string& message);
  // Writes `done` of the stream-ordered op `user_data` of the session, if it is one.
  static void release_stream(Session& session, uint64_t user_data);

  std::vector<Session*> to_publish_;
};

}  // namespace plexus::daemon
