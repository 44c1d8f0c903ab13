// Chunk tokens from a free list.
#include "daemon/links/chunk_tokens.h"

namespace plexus::daemon {

uint64_t ChunkTokens::take(uint64_t peer, std::shared_ptr<void> keep_alive,
                           std::function<void()> done, TimePoint now) {
  uint64_t token;
  if (!free_tokens_.empty()) {
    token = free_tokens_.back();
    free_tokens_.pop_back();
  } else {
    token = pending_.size();
    pending_.emplace_back();
  }
  Pending& p = pending_[token];
  p.peer = peer;
  p.keep_alive = std::move(keep_alive);
  p.done = std::move(done);
  p.used = true;
  p.sent_at = now;
  return token;
}

ChunkTokens::Released ChunkTokens::release(uint64_t token) {
  Pending& p = pending_[token];
  Released released{p.peer, p.sent_at, std::move(p.done)};
  p.keep_alive.reset();
  p.done = nullptr;
  p.used = false;
  free_tokens_.push_back(token);
  return released;
}

void ChunkTokens::drop_peer(uint64_t peer) {
  for (uint64_t token = 0; token < pending_.size(); ++token) {
    Pending& p = pending_[token];
    if (!p.used || p.peer != peer) continue;
    p.keep_alive.reset();
    p.done = nullptr;
    p.used = false;
    free_tokens_.push_back(token);
  }
}

}  // namespace plexus::daemon
