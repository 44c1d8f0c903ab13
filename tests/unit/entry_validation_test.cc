// Tests for shm/entry_validation: every field of a submission entry is hostile until
// validated. Each rejection must carry PLEXUS_ERR_INVALID_ARGUMENT and a sentence naming
// the field and value at fault; each legal form must produce the right buffer spans.
#include "shm/entry_validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "plexus/plexus.h"
#include "shm/ring_layout.h"

namespace plexus::shm {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kRegion0Bytes = 1 << 20;
constexpr uint64_t kRegion1Bytes = 4096;

// The session's regions: 0 (host pool, 1 MiB) and 1 (4 KiB); nothing else registered.
uint64_t region_bytes(uint32_t region) {
  switch (region) {
    case 0:
      return kRegion0Bytes;
    case 1:
      return kRegion1Bytes;
    default:
      return 0;
  }
}

SubmissionEntry make_entry(Opcode op, plexus_dtype_t dtype, uint64_t count) {
  SubmissionEntry e{};
  e.user_data = 0xabcdef;
  e.opcode = static_cast<uint8_t>(op);
  e.dtype = static_cast<uint8_t>(dtype);
  e.redop = PLEXUS_SUM;
  e.comm = 3;
  e.count = count;
  e.send_offset = 0;
  e.recv_offset = kRegion0Bytes / 2;
  return e;
}

// Both validation stages, as the daemon runs them.
ValidationResult validate(const SubmissionEntry& e, int nranks, int rank, ValidatedEntry* out) {
  ValidationResult r = validate_entry_fields(e, out);
  if (!r.ok()) return r;
  return validate_entry_buffers(e, nranks, rank, region_bytes, out);
}

void expect_invalid(const ValidationResult& r, const std::string& substring) {
  EXPECT_EQ(r.status, PLEXUS_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.error, HasSubstr(substring));
}

const std::vector<Opcode> kAllOpcodes = {
    Opcode::kAllReduce,     Opcode::kBroadcast, Opcode::kReduce, Opcode::kAllGather,
    Opcode::kReduceScatter, Opcode::kAllToAll,  Opcode::kSend,   Opcode::kRecv};

// ---------------------------------------------------------------------------------------
// Fields

TEST(EntryFieldsTest, AcceptsEveryKnownOpcodeAndCopiesTheFields) {
  for (Opcode op : kAllOpcodes) {
    SubmissionEntry e = make_entry(op, PLEXUS_FLOAT32, 17);
    e.peer = 1;
    ValidatedEntry out;
    ValidationResult r = validate_entry_fields(e, &out);
    ASSERT_TRUE(r.ok()) << opcode_name(e.opcode) << ": " << r.error;
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(out.opcode, op);
    EXPECT_EQ(out.user_data, 0xabcdefu);
    EXPECT_EQ(out.dtype, PLEXUS_FLOAT32);
    EXPECT_EQ(out.comm, 3u);
    EXPECT_EQ(out.count, 17u);
    EXPECT_EQ(out.peer, 1);
  }
}

TEST(EntryFieldsTest, RejectsUnknownOpcodes) {
  for (int opcode : {0, 9, 10, 128, 255}) {
    SubmissionEntry e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, 1);
    e.opcode = static_cast<uint8_t>(opcode);
    e.user_data = 4242;
    ValidatedEntry out;
    ValidationResult r = validate_entry_fields(e, &out);
    expect_invalid(r, "opcode " + std::to_string(opcode) + " is not a known operation");
    // user_data is known even for a rejected entry, so the error can be completed.
    EXPECT_EQ(out.user_data, 4242u);
  }
}

TEST(EntryFieldsTest, OpcodeIsCheckedBeforeDtype) {
  SubmissionEntry e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, 1);
  e.opcode = 0;
  e.dtype = 200;
  ValidatedEntry out;
  ValidationResult r = validate_entry_fields(e, &out);
  expect_invalid(r, "opcode 0");
  EXPECT_THAT(r.error, ::testing::Not(HasSubstr("dtype")));
}

TEST(EntryFieldsTest, AcceptsEveryKnownDtype) {
  for (int dtype = 0; dtype < PLEXUS_NUM_DTYPES; ++dtype) {
    SubmissionEntry e = make_entry(Opcode::kAllReduce, static_cast<plexus_dtype_t>(dtype), 1);
    ValidatedEntry out;
    ASSERT_TRUE(validate_entry_fields(e, &out).ok()) << "dtype " << dtype;
    EXPECT_EQ(out.dtype, dtype);
  }
}

TEST(EntryFieldsTest, RejectsUnknownDtypes) {
  for (int dtype : {10, 11, 127, 255}) {
    for (Opcode op : kAllOpcodes) {
      SubmissionEntry e = make_entry(op, PLEXUS_FLOAT32, 1);
      e.dtype = static_cast<uint8_t>(dtype);
      ValidatedEntry out;
      expect_invalid(validate_entry_fields(e, &out),
                     "dtype " + std::to_string(dtype) + " is not a known data type");
    }
  }
}

TEST(EntryFieldsTest, RejectsUnknownRedopForReductions) {
  for (Opcode op : {Opcode::kAllReduce, Opcode::kReduce, Opcode::kReduceScatter}) {
    for (int redop : {5, 6, 255}) {
      SubmissionEntry e = make_entry(op, PLEXUS_INT32, 1);
      e.redop = static_cast<uint8_t>(redop);
      ValidatedEntry out;
      expect_invalid(validate_entry_fields(e, &out),
                     "redop " + std::to_string(redop) + " is not a known reduction");
    }
  }
}

TEST(EntryFieldsTest, KeepsAValidRedopForReductions) {
  for (Opcode op : {Opcode::kAllReduce, Opcode::kReduce, Opcode::kReduceScatter}) {
    for (int redop = 0; redop < PLEXUS_NUM_REDOPS; ++redop) {
      SubmissionEntry e = make_entry(op, PLEXUS_INT32, 1);
      e.redop = static_cast<uint8_t>(redop);
      ValidatedEntry out;
      ASSERT_TRUE(validate_entry_fields(e, &out).ok());
      EXPECT_EQ(out.redop, redop);
    }
  }
}

TEST(EntryFieldsTest, IgnoresRedopForNonReductions) {
  for (Opcode op :
       {Opcode::kBroadcast, Opcode::kAllGather, Opcode::kAllToAll, Opcode::kSend, Opcode::kRecv}) {
    for (int redop : {static_cast<int>(PLEXUS_MAX), 5, 255}) {
      SubmissionEntry e = make_entry(op, PLEXUS_INT32, 1);
      e.redop = static_cast<uint8_t>(redop);
      ValidatedEntry out;
      ValidationResult r = validate_entry_fields(e, &out);
      EXPECT_TRUE(r.ok()) << opcode_name(e.opcode) << " redop " << redop << ": " << r.error;
      EXPECT_EQ(out.redop, PLEXUS_SUM) << "the ignored redop must not leak into the entry";
    }
  }
}

TEST(EntryFieldsTest, RejectsUnknownFlagsAndStreamFieldsWithoutTheStreamFlag) {
  auto check = [](auto mutate, const char* what, const char* message) {
    SubmissionEntry e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, 1);
    mutate(e);
    ValidatedEntry out;
    ValidationResult r = validate_entry_fields(e, &out);
    SCOPED_TRACE(what);
    expect_invalid(r, message);
  };
  check([](SubmissionEntry& e) { e.flags = 4; }, "flags 4", "flags 0x04 has unknown bits");
  check([](SubmissionEntry& e) { e.flags = 0x81; }, "flags 0x81", "flags 0x81 has unknown bits");
  const char* zero = "must be zero without the stream-ordered flag";
  check([](SubmissionEntry& e) { e.stream_ticket = 1; }, "ticket 1", zero);
  check([](SubmissionEntry& e) { e.stream_ticket = 0x80000000u; }, "ticket high bit", zero);
  check([](SubmissionEntry& e) { e.stream_flags = 1; }, "flags offset 1", zero);
  check([](SubmissionEntry& e) { e.stream_flags = 1ull << 63; }, "flags offset high bit", zero);
  check([](SubmissionEntry& e) { e.flags = kEntryStreamOrdered; }, "ticket 0", "stream_ticket 0");
}

TEST(EntryFieldsTest, AStreamOrderedEntryCarriesItsTicketAndFlagsWhichMustFitThePool) {
  SubmissionEntry e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, 1);
  e.flags = kEntryStreamOrdered;
  e.stream_ticket = 77;
  e.stream_flags = 4096;
  ValidatedEntry out;
  ASSERT_TRUE(validate_entry_fields(e, &out).ok());
  EXPECT_TRUE(out.stream_ordered);
  EXPECT_EQ(out.stream_ticket, 77u);
  EXPECT_EQ(out.stream_flags, 4096u);
  EXPECT_TRUE(validate_stream_flags(4096, 8192).ok());
  EXPECT_TRUE(validate_stream_flags(8184, 8192).ok());
  expect_invalid(validate_stream_flags(8188, 8192), "not an aligned 8-byte slot");
  expect_invalid(validate_stream_flags(8192, 8192), "within the 8192-byte pool");
  expect_invalid(validate_stream_flags(4, 8192), "stream_flags offset 4");
  expect_invalid(validate_stream_flags(UINT64_MAX - 7, 8192), "not an aligned");
}

TEST(EntryFieldsTest, OpcodeNames) {
  EXPECT_STREQ(opcode_name(1), "allreduce");
  EXPECT_STREQ(opcode_name(2), "broadcast");
  EXPECT_STREQ(opcode_name(3), "reduce");
  EXPECT_STREQ(opcode_name(4), "allgather");
  EXPECT_STREQ(opcode_name(5), "reducescatter");
  EXPECT_STREQ(opcode_name(6), "alltoall");
  EXPECT_STREQ(opcode_name(7), "send");
  EXPECT_STREQ(opcode_name(8), "recv");
  EXPECT_STREQ(opcode_name(0), "unknown");
  EXPECT_STREQ(opcode_name(9), "unknown");
  EXPECT_STREQ(opcode_name(255), "unknown");
}

// ---------------------------------------------------------------------------------------
// Ranks

TEST(EntryBuffersTest, RejectsRootOutsideTheCommunicator) {
  for (Opcode op : {Opcode::kBroadcast, Opcode::kReduce}) {
    for (int32_t root :
         {-1, 4, 5, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()}) {
      SubmissionEntry e = make_entry(op, PLEXUS_FLOAT32, 4);
      e.peer = root;
      ValidatedEntry out;
      expect_invalid(validate(e, 4, 0, &out),
                     "root " + std::to_string(root) + " is outside the communicator's ranks 0..3");
    }
    SubmissionEntry e = make_entry(op, PLEXUS_FLOAT32, 4);
    e.peer = 3;
    ValidatedEntry out;
    EXPECT_TRUE(validate(e, 4, 0, &out).ok());
    EXPECT_EQ(out.peer, 3);
  }
}

TEST(EntryBuffersTest, RejectsPeerOutsideTheCommunicator) {
  for (Opcode op : {Opcode::kSend, Opcode::kRecv}) {
    for (int32_t peer : {-1, 2, 1000}) {
      SubmissionEntry e = make_entry(op, PLEXUS_FLOAT32, 4);
      e.peer = peer;
      ValidatedEntry out;
      expect_invalid(validate(e, 2, 0, &out),
                     "peer " + std::to_string(peer) + " is outside the communicator's ranks 0..1");
    }
  }
}

TEST(EntryBuffersTest, PeerIsNotCheckedForUnrootedCollectives) {
  for (Opcode op :
       {Opcode::kAllReduce, Opcode::kAllGather, Opcode::kReduceScatter, Opcode::kAllToAll}) {
    SubmissionEntry e = make_entry(op, PLEXUS_FLOAT32, 4);
    e.peer = -7;
    ValidatedEntry out;
    ValidationResult r = validate(e, 4, 1, &out);
    EXPECT_TRUE(r.ok()) << opcode_name(e.opcode) << ": " << r.error;
  }
}

// ---------------------------------------------------------------------------------------
// Sizes and overflow

TEST(EntryBuffersTest, RejectsCountWhoseByteSizeOverflows) {
  SubmissionEntry e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT64, uint64_t{1} << 62);
  ValidatedEntry out;
  ValidationResult r = validate(e, 2, 0, &out);
  expect_invalid(r, "count 4611686018427387904 of double overflows the byte size");

  e = make_entry(Opcode::kSend, PLEXUS_FLOAT16, std::numeric_limits<uint64_t>::max());
  e.peer = 1;
  expect_invalid(validate(e, 2, 0, &out), "count 18446744073709551615 of half overflows");
}

TEST(EntryBuffersTest, RejectsCountTimesNranksOverflowForGatherAndAllToAll) {
  // 2^61 one-byte elements fit in a block, but 8 blocks do not fit in 64 bits.
  const uint64_t count = uint64_t{1} << 61;
  for (Opcode op : {Opcode::kAllGather, Opcode::kReduceScatter, Opcode::kAllToAll}) {
    SubmissionEntry e = make_entry(op, PLEXUS_INT8, count);
    ValidatedEntry out;
    ValidationResult r = validate(e, 8, 0, &out);
    expect_invalid(r, "count 2305843009213693952 of int8 overflows");
  }
  // With 7 ranks the product fits, and the failure is the region bound instead.
  SubmissionEntry e = make_entry(Opcode::kAllGather, PLEXUS_INT8, count);
  ValidatedEntry out;
  expect_invalid(validate(e, 7, 0, &out), "lies outside");
}

TEST(EntryBuffersTest, RejectsOffsetPastTheRegion) {
  SubmissionEntry e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, 1);
  e.send_offset = kRegion0Bytes;
  ValidatedEntry out;
  expect_invalid(validate(e, 2, 0, &out),
                 "send buffer [1048576, +4) lies outside its 1048576-byte region 0");

  e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, 1);
  e.recv_offset = kRegion0Bytes - 3;  // 3 bytes left, 4 needed
  expect_invalid(validate(e, 2, 0, &out),
                 "recv buffer [1048573, +4) lies outside its 1048576-byte region 0");

  e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, 1);
  e.recv_region = 1;
  e.recv_offset = kRegion1Bytes;
  expect_invalid(validate(e, 2, 0, &out), "lies outside its 4096-byte region 1");

  // The last element exactly at the end is fine.
  e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, 1);
  e.recv_offset = kRegion0Bytes - 4;
  EXPECT_TRUE(validate(e, 2, 0, &out).ok());
  e.recv_region = 1;
  e.recv_offset = kRegion1Bytes - 4;
  EXPECT_TRUE(validate(e, 2, 0, &out).ok());
}

TEST(EntryBuffersTest, RejectsBufferLargerThanItsRegion) {
  SubmissionEntry e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, kRegion0Bytes / 4 + 1);
  e.recv_region = 1;
  e.recv_offset = 0;
  ValidatedEntry out;
  expect_invalid(validate(e, 2, 0, &out), "send buffer [0, +1048580) lies outside");
}

TEST(EntryBuffersTest, RejectsOffsetPlusBytesOverflow) {
  const uint64_t offset = std::numeric_limits<uint64_t>::max() - 3;
  SubmissionEntry e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT64, 1);
  e.send_offset = offset;
  ValidatedEntry out;
  expect_invalid(validate(e, 2, 0, &out),
                 "send buffer [18446744073709551612, +8) lies outside its 1048576-byte region 0");

  e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT64, 1);
  e.recv_offset = offset;
  expect_invalid(validate(e, 2, 0, &out), "recv buffer [18446744073709551612, +8) lies outside");

  // An offset that wraps to exactly 0 must not look like "ends at 0".
  e = make_entry(Opcode::kAllReduce, PLEXUS_INT32, 2);
  e.send_offset = std::numeric_limits<uint64_t>::max() - 7;  // + 8 == 2^64
  expect_invalid(validate(e, 2, 0, &out), "send buffer [18446744073709551608, +8) lies outside");
}

// reduce_arrays (daemon/local/reduce.h) loads whole elements and region bases are
// page-aligned, so offsets must be multiples of the element size; otherwise a client
// could make the daemon do misaligned typed loads.
TEST(EntryBuffersTest, RejectsOffsetsNotAlignedToTheElementSize) {
  for (Opcode op : {Opcode::kAllReduce, Opcode::kReduce, Opcode::kReduceScatter}) {
    SubmissionEntry e = make_entry(op, PLEXUS_FLOAT64, 4);
    e.send_offset = 1;
    ValidatedEntry out;
    expect_invalid(validate(e, 2, 0, &out), "send");
    e = make_entry(op, PLEXUS_FLOAT64, 4);
    e.recv_offset = kRegion0Bytes / 2 + 4;
    expect_invalid(validate(e, 2, 0, &out), "recv");
  }
  // Byte-sized elements have no alignment requirement.
  SubmissionEntry e = make_entry(Opcode::kAllReduce, PLEXUS_INT8, 4);
  e.send_offset = 1;
  ValidatedEntry out;
  EXPECT_TRUE(validate(e, 2, 0, &out).ok());
}

TEST(EntryBuffersTest, RejectsUnregisteredRegion) {
  SubmissionEntry e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, 1);
  e.send_region = 5;
  ValidatedEntry out;
  expect_invalid(validate(e, 2, 0, &out),
                 "send buffer names region 5, which this session has not registered");

  e = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, 1);
  e.recv_region = 0xffffffffu;
  expect_invalid(validate(e, 2, 0, &out),
                 "recv buffer names region 4294967295, which this session has not registered");
}

// ---------------------------------------------------------------------------------------
// Overlap and in-place forms (nranks 4, rank 2, blocks of 16 bytes)

constexpr int kNranks = 4;
constexpr int kRank = 2;
constexpr uint64_t kCount = 4;  // float32: 16-byte blocks
constexpr uint64_t kBlock = 16;

SubmissionEntry overlap_entry(Opcode op, uint64_t send_offset, uint64_t recv_offset) {
  SubmissionEntry e = make_entry(op, PLEXUS_FLOAT32, kCount);
  e.send_offset = send_offset;
  e.recv_offset = recv_offset;
  return e;
}

TEST(EntryOverlapTest, AllReduceSendEqualsRecvIsInPlace) {
  ValidatedEntry out;
  ValidationResult r = validate(overlap_entry(Opcode::kAllReduce, 256, 256), kNranks, kRank, &out);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(out.in_place);
}

TEST(EntryOverlapTest, AllReducePartialOverlapIsRejected) {
  for (uint64_t recv : {uint64_t{8}, uint64_t{4}, uint64_t{15}}) {
    ValidatedEntry out;
    expect_invalid(validate(overlap_entry(Opcode::kAllReduce, 0, recv), kNranks, kRank, &out),
                   "send buffer at offset 0 and recv buffer at offset " + std::to_string(recv) +
                       " overlap without being in place");
    EXPECT_FALSE(out.in_place);
  }
  ValidatedEntry out;
  expect_invalid(validate(overlap_entry(Opcode::kAllReduce, 8, 0), kNranks, kRank, &out),
                 "overlap without being in place");
}

TEST(EntryOverlapTest, AdjacentOrSeparateBuffersAreNotInPlace) {
  ValidatedEntry out;
  ASSERT_TRUE(validate(overlap_entry(Opcode::kAllReduce, 0, kBlock), kNranks, kRank, &out).ok());
  EXPECT_FALSE(out.in_place);
  ASSERT_TRUE(validate(overlap_entry(Opcode::kAllReduce, kBlock, 0), kNranks, kRank, &out).ok());
  EXPECT_FALSE(out.in_place);
  // Same offsets in different regions do not alias.
  SubmissionEntry e = overlap_entry(Opcode::kAllReduce, 64, 64);
  e.recv_region = 1;
  ValidatedEntry other;
  ASSERT_TRUE(validate(e, kNranks, kRank, &other).ok());
  EXPECT_FALSE(other.in_place);
}

TEST(EntryOverlapTest, AllGatherInPlaceIsSendAtRankBlockOfRecv) {
  const uint64_t recv = 1024;
  ValidatedEntry out;
  ValidationResult r = validate(overlap_entry(Opcode::kAllGather, recv + kRank * kBlock, recv),
                                kNranks, kRank, &out);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(out.in_place);
  EXPECT_EQ(out.send.bytes, kBlock);
  EXPECT_EQ(out.recv.bytes, kNranks * kBlock);
}

TEST(EntryOverlapTest, AllGatherOverlapAtAnotherPositionIsRejected) {
  const uint64_t recv = 1024;
  // Another rank's slot, the start of recv, and straddling two slots.
  for (uint64_t send : {recv, recv + kBlock, recv + 3 * kBlock, recv + kRank * kBlock + 4,
                        recv + kRank * kBlock - 8, recv - 8}) {
    ValidatedEntry out;
    expect_invalid(validate(overlap_entry(Opcode::kAllGather, send, recv), kNranks, kRank, &out),
                   "send buffer at offset " + std::to_string(send) + " and recv buffer at offset " +
                       std::to_string(recv) + " overlap without being in place");
  }
  // Rank 0's in-place position is send == recv.
  ValidatedEntry out;
  ASSERT_TRUE(validate(overlap_entry(Opcode::kAllGather, recv, recv), kNranks, 0, &out).ok());
  EXPECT_TRUE(out.in_place);
}

TEST(EntryOverlapTest, ReduceScatterInPlaceIsRecvAtRankBlockOfSend) {
  const uint64_t send = 2048;
  ValidatedEntry out;
  ValidationResult r = validate(overlap_entry(Opcode::kReduceScatter, send, send + kRank * kBlock),
                                kNranks, kRank, &out);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(out.in_place);
  EXPECT_EQ(out.send.bytes, kNranks * kBlock);
  EXPECT_EQ(out.recv.bytes, kBlock);

  for (uint64_t recv : {send, send + kBlock, send + 3 * kBlock, send + kRank * kBlock + 4}) {
    ValidatedEntry bad;
    expect_invalid(
        validate(overlap_entry(Opcode::kReduceScatter, send, recv), kNranks, kRank, &bad),
        "overlap without being in place");
  }
}

TEST(EntryOverlapTest, AllToAllSendEqualsRecvIsInPlaceAndPartialOverlapIsNot) {
  ValidatedEntry out;
  ASSERT_TRUE(validate(overlap_entry(Opcode::kAllToAll, 512, 512), kNranks, kRank, &out).ok());
  EXPECT_TRUE(out.in_place);
  ValidatedEntry bad;
  expect_invalid(
      validate(overlap_entry(Opcode::kAllToAll, 512, 512 + kBlock), kNranks, kRank, &bad),
      "overlap without being in place");
}

// ---------------------------------------------------------------------------------------
// Per-opcode buffer sizes

struct SizeCase {
  Opcode op;
  bool root;  // this rank is the root (rooted ops only)
  uint64_t send_bytes;
  uint64_t recv_bytes;
};

TEST(EntrySizesTest, EachOpcodeTouchesTheDocumentedBytes) {
  constexpr uint64_t kDoubleCount = 10;
  constexpr uint64_t b = kDoubleCount * 8;
  constexpr uint64_t n = kNranks;
  const std::vector<SizeCase> cases = {
      {Opcode::kAllReduce, false, b, b},
      {Opcode::kBroadcast, true, b, b},
      {Opcode::kBroadcast, false, 0, b},
      {Opcode::kReduce, true, b, b},
      {Opcode::kReduce, false, b, 0},
      {Opcode::kAllGather, false, b, n * b},
      {Opcode::kReduceScatter, false, n * b, b},
      {Opcode::kAllToAll, false, n * b, n * b},
      {Opcode::kSend, false, b, 0},
      {Opcode::kRecv, false, 0, b},
  };
  for (const SizeCase& c : cases) {
    SubmissionEntry e = make_entry(c.op, PLEXUS_FLOAT64, kDoubleCount);
    e.send_region = 0;
    e.send_offset = 1000;
    e.recv_region = 1;
    e.recv_offset = 8;
    e.peer = c.root ? kRank : (c.op == Opcode::kSend || c.op == Opcode::kRecv ? 3 : 0);
    ValidatedEntry out;
    ValidationResult r = validate(e, kNranks, kRank, &out);
    SCOPED_TRACE(std::string(opcode_name(e.opcode)) + (c.root ? " root" : ""));
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(out.send.bytes, c.send_bytes);
    EXPECT_EQ(out.recv.bytes, c.recv_bytes);
    // A send's or recv's other side is no buffer (its region field is the tag): empty.
    const bool no_send = c.op == Opcode::kRecv;
    const bool no_recv = c.op == Opcode::kSend;
    EXPECT_EQ(out.send.region, 0u);
    EXPECT_EQ(out.send.offset, no_send ? 0u : 1000u);
    EXPECT_EQ(out.recv.region, no_recv ? 0u : 1u);
    EXPECT_EQ(out.recv.offset, no_recv ? 0u : 8u);
    EXPECT_FALSE(out.in_place);
  }
}

TEST(EntrySizesTest, BuffersAnOpDoesNotTouchAreNotChecked) {
  const uint64_t wild = std::numeric_limits<uint64_t>::max();
  // Broadcast non-root never reads its send buffer.
  SubmissionEntry e = make_entry(Opcode::kBroadcast, PLEXUS_FLOAT32, 8);
  e.peer = 0;
  e.send_region = 5;
  e.send_offset = wild;
  ValidatedEntry out;
  ValidationResult r = validate(e, kNranks, kRank, &out);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(out.send.bytes, 0u);
  // ... but the root does.
  e.peer = kRank;
  expect_invalid(validate(e, kNranks, kRank, &out), "send buffer names region 5");

  // Reduce non-root never writes its recv buffer.
  e = make_entry(Opcode::kReduce, PLEXUS_FLOAT32, 8);
  e.peer = 0;
  e.recv_region = 9;
  e.recv_offset = wild;
  r = validate(e, kNranks, kRank, &out);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(out.recv.bytes, 0u);
  e.peer = kRank;
  expect_invalid(validate(e, kNranks, kRank, &out), "recv buffer names region 9");

  // Send has no recv buffer; recv has no send buffer.
  e = make_entry(Opcode::kSend, PLEXUS_FLOAT32, 8);
  e.peer = 1;
  e.recv_region = 9;
  e.recv_offset = wild;
  EXPECT_TRUE(validate(e, kNranks, kRank, &out).ok());
  e = make_entry(Opcode::kRecv, PLEXUS_FLOAT32, 8);
  e.peer = 1;
  e.send_region = 9;
  e.send_offset = wild;
  EXPECT_TRUE(validate(e, kNranks, kRank, &out).ok());
}

TEST(EntrySizesTest, BroadcastRootWithSendEqualsRecvIsInPlace) {
  SubmissionEntry e = make_entry(Opcode::kBroadcast, PLEXUS_FLOAT32, 8);
  e.peer = kRank;
  e.send_offset = e.recv_offset = 64;
  ValidatedEntry out;
  ASSERT_TRUE(validate(e, kNranks, kRank, &out).ok());
  EXPECT_TRUE(out.in_place);
  // A non-root with the same offsets does not read send at all, so nothing overlaps.
  e.peer = 0;
  ValidatedEntry non_root;
  ASSERT_TRUE(validate(e, kNranks, kRank, &non_root).ok());
  EXPECT_FALSE(non_root.in_place);
}

TEST(EntrySizesTest, CountZeroPassesWithZeroByteSpansRegardlessOfOffsets) {
  const uint64_t wild = std::numeric_limits<uint64_t>::max();
  for (Opcode op : kAllOpcodes) {
    SubmissionEntry e = make_entry(op, PLEXUS_FLOAT64, 0);
    e.send_region = 5;
    e.send_offset = wild;
    e.recv_region = 77;
    e.recv_offset = wild - 3;
    e.peer = 1;
    ValidatedEntry out;
    ValidationResult r = validate(e, kNranks, kRank, &out);
    ASSERT_TRUE(r.ok()) << opcode_name(e.opcode) << ": " << r.error;
    EXPECT_EQ(out.send.bytes, 0u) << opcode_name(e.opcode);
    EXPECT_EQ(out.recv.bytes, 0u) << opcode_name(e.opcode);
    EXPECT_FALSE(out.in_place);
  }
}

TEST(EntrySizesTest, StatusIsSuccessAndErrorEmptyForAValidEntry) {
  SubmissionEntry e = make_entry(Opcode::kAllGather, PLEXUS_BFLOAT16, 100);
  e.send_offset = 0;
  e.recv_offset = 4096;
  ValidatedEntry out;
  ValidationResult r = validate(e, kNranks, kRank, &out);
  EXPECT_EQ(r.status, PLEXUS_SUCCESS);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(out.send.bytes, 200u);
  EXPECT_EQ(out.recv.bytes, 800u);
}

}  // namespace
}  // namespace plexus::shm

namespace plexus::shm {
namespace {

TEST(EntryPointToPointTest, ATagTravelsInTheRegionFieldOfTheSideTheOpDoesNotUse) {
  for (Opcode op : {Opcode::kSend, Opcode::kRecv}) {
    SubmissionEntry e = make_entry(op, PLEXUS_FLOAT32, 16);
    e.peer = 1;
    set_p2p_tag(e, -77);
    EXPECT_EQ(op == Opcode::kSend ? e.recv_region : e.send_region, static_cast<uint32_t>(-77));
    ValidatedEntry out;
    ValidationResult r = validate(e, 2, 0, &out);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(out.tag, -77);
    EXPECT_FALSE(out.any_source);
    // The buffer the op uses is still region 0.
    EXPECT_EQ(op == Opcode::kSend ? out.send.region : out.recv.region, kHostPoolRegion);
  }
}

TEST(EntryPointToPointTest, ARecvFromAnySourceNamesNoPeerAndIsTheOnlyOpWithTheFlag) {
  SubmissionEntry e = make_entry(Opcode::kRecv, PLEXUS_FLOAT32, 16);
  e.flags = kEntryAnySource;
  e.peer = kAnySource;
  set_p2p_tag(e, 9);
  ValidatedEntry out;
  ValidationResult r = validate(e, 4, 2, &out);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(out.any_source);
  EXPECT_EQ(out.tag, 9);
  EXPECT_EQ(out.recv.bytes, 64u);

  e.peer = 1;  // a named peer beside the flag
  expect_invalid(validate(e, 4, 2, &out), "any-source flag");
  SubmissionEntry send = make_entry(Opcode::kSend, PLEXUS_FLOAT32, 16);
  send.flags = kEntryAnySource;
  send.peer = kAnySource;
  expect_invalid(validate(send, 4, 2, &out), "not send");
  SubmissionEntry all = make_entry(Opcode::kAllReduce, PLEXUS_FLOAT32, 16);
  all.flags = kEntryAnySource;
  all.peer = kAnySource;
  expect_invalid(validate(all, 4, 2, &out), "not allreduce");
  // Without the flag, -1 is a peer outside the communicator.
  SubmissionEntry plain = make_entry(Opcode::kRecv, PLEXUS_FLOAT32, 16);
  plain.peer = kAnySource;
  expect_invalid(validate(plain, 4, 2, &out), "peer -1");
}

}  // namespace
}  // namespace plexus::shm
