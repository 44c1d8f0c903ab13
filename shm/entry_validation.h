// Validation of submission entries. The entry has already been copied out of shared
// memory; nothing here reads the ring again. Every check is overflow-safe and a failure
// is a sentence naming the field and value at fault.
#pragma once

#include <cstdint>
#include <string>

#include "plexus/plexus_types.h"
#include "shm/ring_layout.h"

namespace plexus::shm {

struct BufferSpan {
  uint32_t region = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;  // 0: the op does not touch this buffer on this rank
};

struct ValidatedEntry {
  uint64_t user_data = 0;
  Opcode opcode{};
  plexus_dtype_t dtype{};
  plexus_redop_t redop{};
  uint32_t comm = 0;
  uint64_t count = 0;
  int32_t peer = 0;  // root or peer (kAnySource: a recv from any source); 0 where unused
  int32_t tag = 0;   // send and recv: the tag they match by
  bool any_source = false;
  BufferSpan send;
  BufferSpan recv;
  bool in_place = false;
  // Stream-ordered (SubmissionEntry::flags): its ticket and flags' pool offset, whose
  // place in the pool the engine checks (validate_stream_flags).
  bool stream_ordered = false;
  uint32_t stream_ticket = 0;
  uint64_t stream_flags = 0;
};

struct ValidationResult {
  plexus_result_t status = PLEXUS_SUCCESS;
  std::string error;  // empty on success
  bool ok() const { return status == PLEXUS_SUCCESS; }
};

// Checks what needs no communicator: opcode, dtype, redop, flags, reserved fields.
// Fills out->user_data/opcode/dtype/redop/comm/count/peer.
ValidationResult validate_entry_fields(const SubmissionEntry& entry, ValidatedEntry* out);

// Checks buffers and ranks once the communicator is known: peer/root within nranks,
// sizes for the opcode with overflow-safe arithmetic, each span within its region,
// and send/recv either disjoint or exactly in place. `region_bytes(region)` returns a
// region's mapped size, or 0 when the session has no such region.
template <typename RegionBytes>
ValidationResult validate_entry_buffers(const SubmissionEntry& entry, int nranks, int rank,
                                        RegionBytes&& region_bytes, ValidatedEntry* out);

// Non-template core of validate_entry_buffers: sizes and rank checks only.
ValidationResult compute_buffer_spans(const SubmissionEntry& entry, int nranks, int rank,
                                      ValidatedEntry* out);
ValidationResult check_span_in_region(const char* which, const BufferSpan& span,
                                      uint64_t region_bytes);
// A stream-ordered entry's flags must lie within the pool, 8-byte aligned.
ValidationResult validate_stream_flags(uint64_t offset, uint64_t pool_bytes);
// Reductions load whole elements and regions are page-aligned: an offset inside an
// element would make the daemon do misaligned loads.
ValidationResult check_alignment(const ValidatedEntry& entry);
// Sets entry->in_place when send and recv coincide as the opcode's in-place form.
ValidationResult check_overlap(ValidatedEntry* entry, int rank);

template <typename RegionBytes>
ValidationResult validate_entry_buffers(const SubmissionEntry& entry, int nranks, int rank,
                                        RegionBytes&& region_bytes, ValidatedEntry* out) {
  ValidationResult r = compute_buffer_spans(entry, nranks, rank, out);
  if (!r.ok()) return r;
  if (out->send.bytes > 0) {
    r = check_span_in_region("send", out->send, region_bytes(out->send.region));
    if (!r.ok()) return r;
  }
  if (out->recv.bytes > 0) {
    r = check_span_in_region("recv", out->recv, region_bytes(out->recv.region));
    if (!r.ok()) return r;
  }
  r = check_overlap(out, rank);
  if (!r.ok()) return r;
  return check_alignment(*out);
}

const char* opcode_name(uint8_t opcode);

}  // namespace plexus::shm
