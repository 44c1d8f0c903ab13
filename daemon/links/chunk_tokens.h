// The chunks queued on the links that their peers have not released yet: per chunk, the token
// its reliable channel carries (an index reused from a free list: no allocation per chunk once
// warm), the memory the chunk is read from (kept alive until then), when it was handed to the
// channel, and its message's `done`. Owned by PeerLinks; engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "transports/channel/reliable_channel.h"

namespace plexus::daemon {

class ChunkTokens {
 public:
  using TimePoint = transports::ReliableChannel::TimePoint;

  // A chunk for `peer` handed to its channel at `now`; `keep_alive` is held and `done` kept
  // until release().
  uint64_t take(uint64_t peer, std::shared_ptr<void> keep_alive, std::function<void()> done,
                TimePoint now);

  struct Released {
    uint64_t peer = 0;
    TimePoint sent_at;
    std::function<void()> done;  // the caller runs it (it may queue more chunks)
  };
  // The peer has chunk `token`: its memory is let go and the token is free again.
  Released release(uint64_t token);
  // The link to `peer` is gone: its chunks will never be released, so their memory is let go
  // now and their `done` never runs.
  void drop_peer(uint64_t peer);

 private:
  struct Pending {
    uint64_t peer = 0;
    TimePoint sent_at;
    std::shared_ptr<void> keep_alive;
    std::function<void()> done;
    bool used = false;
  };
  std::vector<Pending> pending_;  // by token
  std::vector<uint64_t> free_tokens_;
};

}  // namespace plexus::daemon
