#include "daemon/comm.h"

#include <cstdio>

namespace plexus::daemon {

std::string token_prefix(const CommToken& token) {
  char text[9];
  std::snprintf(text, sizeof(text), "%02x%02x%02x%02x", token[0], token[1], token[2], token[3]);
  return text;
}

std::string Comm::broken_reason() const {
  std::lock_guard lock(reason_mutex_);
  return broken_reason_;
}

void Comm::mark_broken(plexus_result_t status, std::string reason) {
  if (broken()) return;
  {
    std::lock_guard lock(reason_mutex_);
    broken_reason_ = std::move(reason);
  }
  broken_status_ = status;
  broken_.store(true, std::memory_order_release);
}

}  // namespace plexus::daemon
