// The memory RDMA pins on this node, every device and path together, held under one bound
// (plexusd's --rdma-pinned-max-bytes): a path's receive ring and bounce ring are taken from it
// when the path opens, and a client pool's window when it is registered for a zero-copy send.
// A path that cannot have its rings does not open over RDMA (the daemon offers TCP, or, with
// --transport rdma, refuses the connection naming this bound); a window that does not fit is
// not registered (its payload is copied through the bounce ring: slower, always correct).
// Windows are a cache: a path's rings are held against what other paths hold only, and whoever
// owns the windows (verbs_devices.h) drops the unused ones when a new path's rings push the
// total past the bound (windows a posted write still reads go when it completes). Knows
// nothing of libibverbs. The control thread holds a path's rings when it offers RDMA in a
// handshake (so that two offers at once cannot both count on the same room) and the links'
// thread takes that hold over with the path, or holds windows: the counts are atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"

namespace plexus::transports::rdma {

class PinnedBudget {
 public:
  enum class Use { kPath, kWindow };

  // What is held, shared with the holds (which may outlive the budget).
  struct State {
    explicit State(uint64_t max) : max_bytes(max) {}
    const uint64_t max_bytes;
    std::atomic<uint64_t> paths{0};
    std::atomic<uint64_t> windows{0};
  };

  explicit PinnedBudget(uint64_t max_bytes) : state_(std::make_shared<State>(max_bytes)) {}

  // Bytes held until the Hold goes (move-only; an empty Hold holds nothing).
  class Hold {
   public:
    Hold() = default;
    ~Hold() { release(); }
    Hold(Hold&& other) noexcept { *this = std::move(other); }
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    uint64_t bytes() const { return bytes_; }

   private:
    friend class PinnedBudget;
    void release();
    std::shared_ptr<State> state_;
    Use use_ = Use::kPath;
    uint64_t bytes_ = 0;
  };

  // `bytes` for `use`, or why not: the bound, what paths and windows hold, what was wanted.
  // A path's bytes need room beside the other paths only (windows give way); a window's,
  // beside everything held.
  common::Result<Hold> take(uint64_t bytes, Use use);
  // Whether everything held passes the bound (windows to drop).
  bool over() const { return held_by_paths() + held_by_windows() > state_->max_bytes; }

  uint64_t max_bytes() const { return state_->max_bytes; }
  uint64_t held_by_paths() const { return state_->paths.load(std::memory_order_relaxed); }
  uint64_t held_by_windows() const { return state_->windows.load(std::memory_order_relaxed); }

 private:
  std::shared_ptr<State> state_;
};

// The size of each of a path's two rings (the one the peer writes into, the bounce ring) such
// that `paths` paths, each pinning `extra` bytes besides, fit in `max_bytes` beside nothing
// else: a power of two, at most `largest`, and never below the power of two that holds
// `frame` bytes (one largest frame with its header), whatever the bound (the bound then holds
// fewer paths; the budget enforces it).
uint64_t ring_bytes_within(uint64_t max_bytes, uint64_t paths, uint64_t extra, uint64_t frame,
                           uint64_t largest);

}  // namespace plexus::transports::rdma
