// Layout of the per-session ring memfd shared by a client and plexusd.
//
// One memfd holds a header, the submission queue (client produces, daemon consumes)
// and the completion queue (daemon produces, client consumes). Producer and consumer
// indices live on separate cache lines and are free-running 32-bit counters; a slot is
// index & (entries - 1). The daemon never trusts what the client can write here: it
// keeps its own copies of the indices it produces and sanity-checks the ones it reads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace plexus::shm {

inline constexpr uint32_t kRingMagic = 0x504c5852;  // "PLXR"
// 2: a recv from any source, tags on send and recv, the source in the completion.
inline constexpr uint32_t kRingLayoutVersion = 2;
inline constexpr size_t kCacheLine = 64;

enum class Opcode : uint8_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kReduce = 3,
  kAllGather = 4,
  kReduceScatter = 5,
  kAllToAll = 6,
  kSend = 7,
  kRecv = 8,
};
inline constexpr uint8_t kMaxOpcode = 8;

constexpr bool is_point_to_point(Opcode op) { return op == Opcode::kSend || op == Opcode::kRecv; }
// Broadcast and reduce name a root rank in the entry's peer field.
constexpr bool is_rooted(Opcode op) { return op == Opcode::kBroadcast || op == Opcode::kReduce; }
constexpr bool uses_redop(Opcode op) {
  return op == Opcode::kAllReduce || op == Opcode::kReduce || op == Opcode::kReduceScatter;
}
// Collectives that only copy blocks from inputs to results (no reduction).
constexpr bool is_copy_collective(Opcode op) {
  return op == Opcode::kBroadcast || op == Opcode::kAllGather || op == Opcode::kAllToAll;
}

// Buffer regions an entry may name. Region 0 is the session's host pool; later
// regions (registered GPU allocations) get ids from the daemon.
inline constexpr uint32_t kHostPoolRegion = 0;

// SubmissionEntry::flags bits.
inline constexpr uint8_t kEntryStreamOrdered = 1;
// A recv from whichever rank sends first (its peer is kAnySource): its completion says who.
inline constexpr uint8_t kEntryAnySource = 2;
inline constexpr int32_t kAnySource = -1;

// A stream-ordered op's flags in the session's pool, shared by the client's GPU stream and
// the daemon: the stream writes the entry's ticket to `ready` once the work queued before
// the op is done (cuStreamWriteValue32); the daemon starts the op only then, and writes
// the ticket to `done` once the op has ended, in error too (the stream waits for it with
// cuStreamWaitValue32 before the work queued after the op).
struct alignas(8) StreamFlags {
  std::atomic<uint32_t> ready;
  std::atomic<uint32_t> done;
};
static_assert(sizeof(StreamFlags) == 8);

// One submitted operation, 64 bytes. Every field is hostile until validated.
struct SubmissionEntry {
  uint64_t user_data;  // echoed in the completion
  uint8_t opcode;      // Opcode
  uint8_t dtype;       // plexus_dtype_t
  uint8_t redop;       // plexus_redop_t
  uint8_t flags;       // 0 or kEntryStreamOrdered
  uint32_t comm;       // session-local communicator handle from CommInit
  uint64_t count;      // elements, meaning per opcode as in plexus.h
  uint64_t send_offset;
  uint64_t recv_offset;
  // A send or recv names one buffer; the other side's region field carries the message's
  // tag (p2p_tag below).
  uint32_t send_region;
  uint32_t recv_region;
  int32_t peer;            // root (broadcast, reduce) or peer (send, recv); else 0
  uint32_t stream_ticket;  // stream-ordered: the value of its StreamFlags (never 0); else 0
  uint64_t stream_flags;   // stream-ordered: pool offset of its StreamFlags; else 0
};
static_assert(sizeof(SubmissionEntry) == 64);

// A send's or recv's tag: messages and recvs match only with equal tags (0 by default).
inline int32_t p2p_tag(const SubmissionEntry& e) {
  return static_cast<int32_t>(static_cast<Opcode>(e.opcode) == Opcode::kSend ? e.recv_region
                                                                             : e.send_region);
}
inline void set_p2p_tag(SubmissionEntry& e, int32_t tag) {
  (static_cast<Opcode>(e.opcode) == Opcode::kSend ? e.recv_region : e.send_region) =
      static_cast<uint32_t>(tag);
}

inline constexpr size_t kCompletionMessageBytes = 236;

// One completion, 256 bytes, so an error carries its sentence inline (only the used
// part is copied).
struct CompletionEntry {
  uint64_t user_data;
  int32_t status;        // plexus_result_t
  uint32_t message_len;  // bytes of message used (0 on success)
  int32_t source;        // a recv from any source: the rank it received from; else -1
  char message[kCompletionMessageBytes];
};
static_assert(sizeof(CompletionEntry) == 256);
inline constexpr size_t kCompletionHeaderBytes = offsetof(CompletionEntry, message);

struct alignas(kCacheLine) RingIndex {
  std::atomic<uint32_t> value;
};

// Set by a consumer before it parks on the ring's eventfd; a producer that sees it
// writes the eventfd after publishing.
struct alignas(kCacheLine) WakeupFlag {
  std::atomic<uint32_t> need_wakeup;
};

struct RingHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t sq_entries;  // power of two
  uint32_t cq_entries;  // power of two
  uint64_t sq_offset;   // from the start of the memfd
  uint64_t cq_offset;
  uint64_t total_bytes;
  alignas(kCacheLine) RingIndex sq_tail;  // client writes
  RingIndex sq_head;                      // daemon writes
  WakeupFlag sq_wakeup;                   // daemon sets before parking
  RingIndex cq_tail;                      // daemon writes
  RingIndex cq_head;                      // client writes
  WakeupFlag cq_wakeup;                   // client sets before parking
};

static_assert(std::atomic<uint32_t>::is_always_lock_free);

constexpr bool is_power_of_two(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Bytes of a ring memfd for the given entry counts (page-rounded).
size_t ring_bytes(uint32_t sq_entries, uint32_t cq_entries);

}  // namespace plexus::shm
