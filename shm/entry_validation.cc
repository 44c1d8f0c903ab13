#include "shm/entry_validation.h"

#include "shm/dtype.h"

namespace plexus::shm {
namespace {

ValidationResult fail(plexus_result_t status, std::string message) {
  return ValidationResult{status, std::move(message)};
}

ValidationResult invalid(std::string message) {
  return fail(PLEXUS_ERR_INVALID_ARGUMENT, std::move(message));
}

std::string hex_byte(uint8_t b) {
  static const char* digits = "0123456789abcdef";
  return {digits[b >> 4], digits[b & 15]};
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
bool checked_add(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

}  // namespace

const char* opcode_name(uint8_t opcode) {
  switch (static_cast<Opcode>(opcode)) {
    case Opcode::kAllReduce:
      return "allreduce";
    case Opcode::kBroadcast:
      return "broadcast";
    case Opcode::kReduce:
      return "reduce";
    case Opcode::kAllGather:
      return "allgather";
    case Opcode::kReduceScatter:
      return "reducescatter";
    case Opcode::kAllToAll:
      return "alltoall";
    case Opcode::kSend:
      return "send";
    case Opcode::kRecv:
      return "recv";
  }
  return "unknown";
}

ValidationResult validate_entry_fields(const SubmissionEntry& entry, ValidatedEntry* out) {
  out->user_data = entry.user_data;
  if (entry.opcode == 0 || entry.opcode > kMaxOpcode) {
    return invalid("opcode " + std::to_string(entry.opcode) + " is not a known operation");
  }
  out->opcode = static_cast<Opcode>(entry.opcode);
  if (!is_valid_dtype(entry.dtype)) {
    return invalid("dtype " + std::to_string(entry.dtype) + " is not a known data type");
  }
  out->dtype = static_cast<plexus_dtype_t>(entry.dtype);
  if (uses_redop(out->opcode) && !is_valid_redop(entry.redop)) {
    return invalid("redop " + std::to_string(entry.redop) + " is not a known reduction");
  }
  out->redop = uses_redop(out->opcode) ? static_cast<plexus_redop_t>(entry.redop) : PLEXUS_SUM;
  if ((entry.flags & ~(kEntryStreamOrdered | kEntryAnySource)) != 0) {
    return invalid("flags 0x" + hex_byte(entry.flags) + " has unknown bits");
  }
  out->stream_ordered = (entry.flags & kEntryStreamOrdered) != 0;
  out->any_source = (entry.flags & kEntryAnySource) != 0;
  if (out->any_source && (out->opcode != Opcode::kRecv || entry.peer != kAnySource)) {
    return invalid("the any-source flag is for a recv whose peer is " + std::to_string(kAnySource) +
                   ", not " + opcode_name(entry.opcode) + " with peer " +
                   std::to_string(entry.peer));
  }
  if (is_point_to_point(out->opcode)) out->tag = p2p_tag(entry);
  if (!out->stream_ordered && (entry.stream_ticket != 0 || entry.stream_flags != 0)) {
    return invalid("stream_ticket and stream_flags must be zero without the stream-ordered flag");
  }
  if (out->stream_ordered && entry.stream_ticket == 0) {
    return invalid("stream_ticket 0 (a stream-ordered entry's ticket is never 0)");
  }
  out->stream_ticket = entry.stream_ticket;
  out->stream_flags = entry.stream_flags;
  out->comm = entry.comm;
  out->count = entry.count;
  out->peer = entry.peer;
  return {};
}

ValidationResult validate_stream_flags(uint64_t offset, uint64_t pool_bytes) {
  if (offset % alignof(StreamFlags) != 0 || offset > pool_bytes ||
      pool_bytes - offset < sizeof(StreamFlags)) {
    return invalid("stream_flags offset " + std::to_string(offset) + " is not an aligned " +
                   std::to_string(sizeof(StreamFlags)) + "-byte slot within the " +
                   std::to_string(pool_bytes) + "-byte pool");
  }
  return {};
}

ValidationResult compute_buffer_spans(const SubmissionEntry& entry, int nranks, int rank,
                                      ValidatedEntry* out) {
  const Opcode op = out->opcode;
  if ((is_rooted(op) || is_point_to_point(op)) && !out->any_source) {
    if (entry.peer < 0 || entry.peer >= nranks) {
      return invalid(std::string(is_point_to_point(op) ? "peer " : "root ") +
                     std::to_string(entry.peer) + " is outside the communicator's ranks 0.." +
                     std::to_string(nranks - 1));
    }
  }
  const uint64_t elem = dtype_size(out->dtype);
  uint64_t block_bytes = 0;
  uint64_t all_bytes = 0;
  if (!checked_mul(entry.count, elem, &block_bytes) ||
      !checked_mul(block_bytes, static_cast<uint64_t>(nranks), &all_bytes)) {
    return invalid("count " + std::to_string(entry.count) + " of " +
                   std::string(dtype_name(out->dtype)) + " overflows the byte size");
  }
  BufferSpan send{entry.send_region, entry.send_offset, 0};
  BufferSpan recv{entry.recv_region, entry.recv_offset, 0};
  const bool is_root = entry.peer == rank;
  switch (op) {
    case Opcode::kAllReduce:
      send.bytes = recv.bytes = block_bytes;
      break;
    case Opcode::kBroadcast:
      send.bytes = is_root ? block_bytes : 0;
      recv.bytes = block_bytes;
      break;
    case Opcode::kReduce:
      send.bytes = block_bytes;
      recv.bytes = is_root ? block_bytes : 0;
      break;
    case Opcode::kAllGather:
      send.bytes = block_bytes;
      recv.bytes = all_bytes;
      break;
    case Opcode::kReduceScatter:
      send.bytes = all_bytes;
      recv.bytes = block_bytes;
      break;
    case Opcode::kAllToAll:
      send.bytes = recv.bytes = all_bytes;
      break;
    case Opcode::kSend:
      send.bytes = block_bytes;
      break;
    case Opcode::kRecv:
      recv.bytes = block_bytes;
      break;
  }
  // A send's or recv's other side carries its tag, not a buffer.
  if (op == Opcode::kSend) recv = BufferSpan{};
  if (op == Opcode::kRecv) send = BufferSpan{};
  out->send = send;
  out->recv = recv;
  return {};
}

ValidationResult check_span_in_region(const char* which, const BufferSpan& span,
                                      uint64_t region_bytes) {
  uint64_t end = 0;
  if (region_bytes == 0) {
    return invalid(std::string(which) + " buffer names region " + std::to_string(span.region) +
                   ", which this session has not registered");
  }
  if (!checked_add(span.offset, span.bytes, &end) || end > region_bytes) {
    return invalid(std::string(which) + " buffer [" + std::to_string(span.offset) + ", +" +
                   std::to_string(span.bytes) + ") lies outside its " +
                   std::to_string(region_bytes) + "-byte region " + std::to_string(span.region));
  }
  return {};
}

ValidationResult check_alignment(const ValidatedEntry& entry) {
  const uint64_t elem = dtype_size(entry.dtype);
  for (const BufferSpan* span : {&entry.send, &entry.recv}) {
    if (span->bytes > 0 && span->offset % elem != 0) {
      return invalid(std::string(span == &entry.send ? "send" : "recv") + " offset " +
                     std::to_string(span->offset) + " is not a multiple of the " +
                     std::to_string(elem) + "-byte " + std::string(dtype_name(entry.dtype)) +
                     " element");
    }
  }
  return {};
}

ValidationResult check_overlap(ValidatedEntry* entry, int rank) {
  const BufferSpan& s = entry->send;
  const BufferSpan& r = entry->recv;
  if (s.bytes == 0 || r.bytes == 0 || s.region != r.region) return {};
  // Spans are within their region, so these sums cannot overflow.
  const bool disjoint = s.offset + s.bytes <= r.offset || r.offset + r.bytes <= s.offset;
  if (disjoint) return {};
  bool in_place = false;
  const uint64_t rank_u = static_cast<uint64_t>(rank);
  switch (entry->opcode) {
    case Opcode::kAllGather:
      in_place = s.offset == r.offset + rank_u * s.bytes;
      break;
    case Opcode::kReduceScatter:
      in_place = r.offset == s.offset + rank_u * r.bytes;
      break;
    default:
      in_place = s.offset == r.offset;
      break;
  }
  if (!in_place) {
    return invalid("send buffer at offset " + std::to_string(s.offset) +
                   " and recv buffer at offset " + std::to_string(r.offset) +
                   " overlap without being in place");
  }
  entry->in_place = true;
  return {};
}

}  // namespace plexus::shm
