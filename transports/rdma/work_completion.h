// What an RDMA path's completions mean (rdma_path.cc), decided apart from the verbs calls so
// that it is tested without a device: work request ids (the kind in the top byte, an index
// below), the credit message a receiver sends back, and classify_completion, which turns a
// work completion into what the path must do or why it must fail: a failed status (a flushed
// queue pair, retries exceeded) names the status and vendor error; a receive for no posted
// slot, a frame write without its offset, a SEND that is not a credit, an opcode never asked
// for are refused by name.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "transports/rdma/rdma_path.h"

namespace plexus::transports::rdma {

enum WrKind : uint64_t { kFrameWrite = 1, kCreditSend = 2, kReceive = 3, kProbeWrite = 4 };
constexpr uint64_t wr_id(WrKind kind, uint64_t index) { return uint64_t{kind} << 56 | index; }
constexpr WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
constexpr uint64_t wr_index(uint64_t id) { return id & ((uint64_t{1} << 56) - 1); }

// The credit a receiver sends back: bytes of its ring and frames consumed in all.
struct Credit {
  uint64_t ring_consumed = 0;
  uint64_t frames_consumed = 0;
};
inline constexpr size_t kCreditBytes = 16;
void encode_credit(const Credit& credit, std::byte* out);

struct Completion {
  enum class Kind {
    kFailed,         // `error` says why; the path fails
    kFrameWritten,   // the oldest posted frame is acknowledged by the peer's device
    kCreditSent,     // this side's credit SEND is out: another may go
    kProbeWritten,   // the liveness probe is acknowledged
    kFrameArrived,   // a frame lies in the receive ring at `ring_offset`, `bytes` long
    kCreditArrived,  // the peer's `credit`
  };
  Kind kind = Kind::kFailed;
  std::string error;
  uint64_t slot = 0;  // the receive slot to post again (kFrameArrived, kCreditArrived)
  uint64_t ring_offset = 0;
  uint32_t bytes = 0;
  Credit credit;
};

// `slots`: receive slots posted (ids 0 .. slots-1); `slot_memory`: their buffers,
// kReceiveSlotBytes each; `ring_align`: what a frame write's immediate counts in.
Completion classify_completion(const ibv_wc& wc, uint64_t slots, const std::byte* slot_memory,
                               uint64_t ring_align);

}  // namespace plexus::transports::rdma
