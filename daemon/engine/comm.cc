#include "daemon/engine/comm.h"

#include <cstdio>

#include "daemon/engine/internode_state.h"

namespace plexus::daemon {

std::string token_prefix(const CommToken& token) {
  char text[9];
  std::snprintf(text, sizeof(text), "%02x%02x%02x%02x", token[0], token[1], token[2], token[3]);
  return text;
}

Comm::Comm(CommToken token, std::vector<Member> members, std::optional<NodeSpan> span,
           std::optional<Origin> origin)
    : presence(members.size()),
      token_(token),
      members_(std::move(members)),
      span_(std::move(span)),
      origin_(std::move(origin)) {
  for (const auto& m : members_) local_ranks_ += m.remote ? 0 : 1;
}

Comm::~Comm() = default;

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
