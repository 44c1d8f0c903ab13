#include "transports/rdma/work_completion.h"

#include <arpa/inet.h>

#include "transports/wire/little_endian.h"

namespace plexus::transports::rdma {
namespace {

Completion failed(std::string why) {
  Completion c;
  c.error = std::move(why);
  return c;
}

Completion of(Completion::Kind kind) {
  Completion c;
  c.kind = kind;
  return c;
}

}  // namespace

void encode_credit(const Credit& credit, std::byte* out) {
  wire::put_le<uint64_t>(out, credit.ring_consumed);
  wire::put_le<uint64_t>(out + 8, credit.frames_consumed);
}

Completion classify_completion(const ibv_wc& wc, uint64_t slots, const std::byte* slot_memory,
                               uint64_t ring_align) {
  if (wc.status != IBV_WC_SUCCESS) {
    return failed(std::string("a work completion failed: ") + ibv_wc_status_str(wc.status) +
                  " (vendor error " + std::to_string(wc.vendor_err) + ")");
  }
  switch (wr_kind(wc.wr_id)) {
    case kFrameWrite:
      return of(Completion::Kind::kFrameWritten);
    case kCreditSend:
      return of(Completion::Kind::kCreditSent);
    case kProbeWrite:
      return of(Completion::Kind::kProbeWritten);
    case kReceive:
      break;
    default:
      return failed("a completion this path never asked for (work request " +
                    std::to_string(wc.wr_id >> 56) + ")");
  }
  const uint64_t slot = wr_index(wc.wr_id);
  if (slot >= slots) return failed("a receive completion for no posted receive");
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    if (!(wc.wc_flags & IBV_WC_WITH_IMM)) return failed("a frame write without its offset");
    Completion c = of(Completion::Kind::kFrameArrived);
    c.slot = slot;
    c.ring_offset = uint64_t{ntohl(wc.imm_data)} * ring_align;
    c.bytes = wc.byte_len;
    return c;
  }
  if (wc.opcode == IBV_WC_RECV) {
    if (wc.byte_len != kCreditBytes) {
      return failed("a message from the peer that is not a credit (" + std::to_string(wc.byte_len) +
                    " bytes)");
    }
    const std::byte* in = slot_memory + slot * kReceiveSlotBytes;
    Completion c = of(Completion::Kind::kCreditArrived);
    c.slot = slot;
    c.credit.ring_consumed = wire::get_le<uint64_t>(in);
    c.credit.frames_consumed = wire::get_le<uint64_t>(in + 8);
    return c;
  }
  return failed("an unexpected receive completion (opcode " + std::to_string(wc.opcode) + ")");
}

}  // namespace plexus::transports::rdma
