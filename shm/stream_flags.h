// The stream-flag protocol in shared memory (StreamFlags, ring_layout.h), behind named
// accessors as the rings' indices are: every load and store of a flag, with its ordering,
// is here and nowhere else.
//
// `ready`: the client's GPU stream writes an op's ticket once the work queued before the op
// is done; the daemon reads it with acquire, so what that work wrote is visible before the
// op reads it. `done`: the daemon writes the ticket with release once the op has ended (its
// results written first); the stream waits for it before the work queued after the op.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "shm/ring_layout.h"

namespace plexus::shm {

// The flags at `offset` within a pool mapped at `pool`: the daemon checks the offset first
// (validate_stream_flags); the client takes it from its own slots.
inline StreamFlags& stream_flags_at(std::byte* pool, uint64_t offset) {
  return *reinterpret_cast<StreamFlags*>(pool + offset);
}

// Daemon: whether the stream has reached op `ticket`.
inline bool stream_ready(const StreamFlags& flags, uint32_t ticket) {
  return flags.ready.load(std::memory_order_acquire) == ticket;
}

// Daemon (an op ended, or was refused) and client (a slot given back): the stream may go
// past op `ticket`.
inline void release_stream(StreamFlags& flags, uint32_t ticket) {
  flags.done.store(ticket, std::memory_order_release);
}

// Client, before a slot carries `ticket`: done starts just below it, so a value left from a
// use long ago cannot read as cyclically later than the ticket and let the stream go early.
inline void arm_stream_done(StreamFlags& flags, uint32_t ticket) {
  flags.done.store(ticket - 1, std::memory_order_release);
}

}  // namespace plexus::shm
