// The RDMA path's verbs-facing decisions, without a device (built where libibverbs-dev is):
// the setup message round-trips and refuses every unusable field by name; the queue pair's
// state changes carry the attribute masks RC needs at each step (a device checks them only
// at run time) and the peer's values; completions map to what the path must do, failed and
// hostile ones to an error naming why; credits round-trip through the receive slot.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "transports/rdma/qp_transitions.h"
#include "transports/rdma/rdma_hello.h"
#include "transports/rdma/remote_ring.h"
#include "transports/rdma/work_completion.h"

namespace plexus::transports::rdma {
namespace {

using ::testing::HasSubstr;

Hello sample_hello() {
  Hello h;
  h.qpn = 0x123456;
  h.psn = 0xabcdef;
  for (int i = 0; i < 16; ++i) h.gid.raw[i] = static_cast<uint8_t>(i * 17);
  h.ring_address = 0x7f0012345000;
  h.ring_rkey = 0xdeadbeef;
  h.ring_bytes = 16u << 20;
  h.receive_depth = 256;
  h.mtu = IBV_MTU_4096;
  return h;
}

TEST(RdmaHelloTest, EveryFieldRoundTrips) {
  const Hello sent = sample_hello();
  const auto bytes = encode_hello(sent);
  const auto decoded = decode_hello(bytes.data());
  ASSERT_EQ(decoded.error(), "");
  const Hello& got = *decoded;
  EXPECT_EQ(got.qpn, sent.qpn);
  EXPECT_EQ(got.psn, sent.psn);
  EXPECT_EQ(std::memcmp(got.gid.raw, sent.gid.raw, 16), 0);
  EXPECT_EQ(got.ring_address, sent.ring_address);
  EXPECT_EQ(got.ring_rkey, sent.ring_rkey);
  EXPECT_EQ(got.ring_bytes, sent.ring_bytes);
  EXPECT_EQ(got.receive_depth, sent.receive_depth);
  EXPECT_EQ(got.mtu, sent.mtu);
  // Little-endian on the wire, whatever the host: the queue pair number at byte 8.
  EXPECT_EQ(bytes[8], std::byte{0x56});
  EXPECT_EQ(bytes[10], std::byte{0x12});
}

TEST(RdmaHelloTest, UnusableFieldsAreRefusedByName) {
  struct Case {
    const char* why;
    void (*spoil)(Hello*);
    const char* says;
  };
  const Case cases[] = {
      {"ring too small", [](Hello* h) { h->ring_bytes = kRingAlign; }, "receive ring of 64 bytes"},
      {"ring unaligned", [](Hello* h) { h->ring_bytes = (1 << 20) + 8; }, "is unusable"},
      {"ring too large", [](Hello* h) { h->ring_bytes = kMaxRingBytes * 2; }, "is unusable"},
      {"one receive", [](Hello* h) { h->receive_depth = 1; }, "advertises 1 receives"},
      {"too many receives", [](Hello* h) { h->receive_depth = kMaxReceiveDepth + 1; },
       "advertises 65537 receives"},
      {"MTU below 256", [](Hello* h) { h->mtu = 0; }, "path MTU (0) is unknown"},
      {"MTU above 4096", [](Hello* h) { h->mtu = IBV_MTU_4096 + 1; }, "path MTU (6) is unknown"},
  };
  for (const Case& c : cases) {
    Hello h = sample_hello();
    c.spoil(&h);
    const auto bytes = encode_hello(h);
    EXPECT_THAT(decode_hello(bytes.data()).error(), HasSubstr(c.says)) << c.why;
  }
  auto bytes = encode_hello(sample_hello());
  bytes[0] = std::byte{0};
  EXPECT_EQ(decode_hello(bytes.data()).error(), "the peer's RDMA setup has a bad magic number");
  bytes = encode_hello(sample_hello());
  bytes[4] = std::byte{9};
  EXPECT_EQ(decode_hello(bytes.data()).error(),
            "the peer speaks RDMA setup version 9, this daemon 1");
  // The queue pair number and PSN are 24 bits: the top byte of a hostile value is dropped.
  Hello wide = sample_hello();
  wide.qpn = 0xff123456;
  wide.psn = 0xffabcdef;
  bytes = encode_hello(wide);
  const auto narrowed = decode_hello(bytes.data());
  ASSERT_EQ(narrowed.error(), "");
  EXPECT_EQ(narrowed->qpn, 0x123456u);
  EXPECT_EQ(narrowed->psn, 0xabcdefu);
}

TEST(RdmaQpTransitionTest, EachStepCarriesTheMaskRcNeedsAndThePeersValues) {
  const QpTransition init = init_transition(1);
  EXPECT_EQ(init.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(init.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  EXPECT_EQ(init.attr.port_num, 1);
  // The peer may write into this side's ring, and do nothing else (no reads, no atomics).
  EXPECT_EQ(init.attr.qp_access_flags, unsigned{IBV_ACCESS_REMOTE_WRITE});

  const Hello peer = sample_hello();
  const QpTransition rtr = rtr_transition(peer, 2, 3, IBV_MTU_1024);
  EXPECT_EQ(rtr.attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(rtr.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  EXPECT_EQ(rtr.attr.dest_qp_num, peer.qpn);
  EXPECT_EQ(rtr.attr.rq_psn, peer.psn);
  EXPECT_EQ(rtr.attr.path_mtu, IBV_MTU_1024);  // the smaller of the two
  EXPECT_EQ(rtr_transition(peer, 2, 3, IBV_MTU_4096).attr.path_mtu, IBV_MTU_4096);
  Hello small = peer;
  small.mtu = IBV_MTU_512;
  EXPECT_EQ(rtr_transition(small, 2, 3, IBV_MTU_4096).attr.path_mtu, IBV_MTU_512);
  EXPECT_EQ(rtr.attr.ah_attr.is_global, 1);  // RoCE is routed by GID
  EXPECT_EQ(std::memcmp(rtr.attr.ah_attr.grh.dgid.raw, peer.gid.raw, 16), 0);
  EXPECT_EQ(rtr.attr.ah_attr.grh.sgid_index, 3);
  EXPECT_EQ(rtr.attr.ah_attr.port_num, 2);
  EXPECT_GT(rtr.attr.ah_attr.grh.hop_limit, 1);

  const QpTransition rts = rts_transition(14, 7, 0x42);
  EXPECT_EQ(rts.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(rts.mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  EXPECT_EQ(rts.attr.timeout, 14);
  EXPECT_EQ(rts.attr.retry_cnt, 7);
  EXPECT_EQ(rts.attr.sq_psn, 0x42u);
  EXPECT_EQ(rts.attr.rnr_retry, 7);  // a receiver not ready is waited for, not an error

  const QpTransition error = error_transition();
  EXPECT_EQ(error.attr.qp_state, IBV_QPS_ERR);
  EXPECT_EQ(error.mask, IBV_QP_STATE);
}

ibv_wc completion(uint64_t id, ibv_wc_opcode opcode = IBV_WC_RDMA_WRITE,
                  ibv_wc_status status = IBV_WC_SUCCESS) {
  ibv_wc wc{};
  wc.wr_id = id;
  wc.opcode = opcode;
  wc.status = status;
  return wc;
}

TEST(RdmaCompletionTest, EachKindOfWorkRequestMapsToWhatThePathDoes) {
  std::vector<std::byte> slots(4 * kReceiveSlotBytes);
  using K = Completion::Kind;
  EXPECT_EQ(classify_completion(completion(wr_id(kFrameWrite, 9)), 4, slots.data(), 64).kind,
            K::kFrameWritten);
  EXPECT_EQ(
      classify_completion(completion(wr_id(kCreditSend, 0), IBV_WC_SEND), 4, slots.data(), 64).kind,
      K::kCreditSent);
  EXPECT_EQ(classify_completion(completion(wr_id(kProbeWrite, 0)), 4, slots.data(), 64).kind,
            K::kProbeWritten);

  // A frame: its ring offset from the immediate (network order, in ring_align units).
  ibv_wc frame = completion(wr_id(kReceive, 2), IBV_WC_RECV_RDMA_WITH_IMM);
  frame.wc_flags = IBV_WC_WITH_IMM;
  frame.imm_data = htonl(5);
  frame.byte_len = 4096;
  const Completion f = classify_completion(frame, 4, slots.data(), 64);
  EXPECT_EQ(f.kind, K::kFrameArrived);
  EXPECT_EQ(f.slot, 2u);
  EXPECT_EQ(f.ring_offset, 320u);
  EXPECT_EQ(f.bytes, 4096u);

  // A credit, as the peer encodes it, read from the slot it landed in.
  encode_credit(Credit{123456789, 42}, slots.data() + 3 * kReceiveSlotBytes);
  ibv_wc credit = completion(wr_id(kReceive, 3), IBV_WC_RECV);
  credit.byte_len = kCreditBytes;
  const Completion c = classify_completion(credit, 4, slots.data(), 64);
  EXPECT_EQ(c.kind, K::kCreditArrived);
  EXPECT_EQ(c.slot, 3u);
  EXPECT_EQ(c.credit.ring_consumed, 123456789u);
  EXPECT_EQ(c.credit.frames_consumed, 42u);
}

TEST(RdmaCompletionTest, FailedAndHostileCompletionsFailThePathSayingWhy) {
  std::vector<std::byte> slots(4 * kReceiveSlotBytes);
  auto error_of = [&](const ibv_wc& wc) {
    const Completion c = classify_completion(wc, 4, slots.data(), 64);
    EXPECT_EQ(c.kind, Completion::Kind::kFailed);
    return c.error;
  };
  // A queue pair in the error state flushes what was posted: the first flush fails the path.
  ibv_wc flushed = completion(wr_id(kReceive, 0), IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR);
  EXPECT_THAT(error_of(flushed), HasSubstr("a work completion failed: Work Request Flushed Error"));
  ibv_wc retries = completion(wr_id(kFrameWrite, 1), IBV_WC_RDMA_WRITE, IBV_WC_RETRY_EXC_ERR);
  retries.vendor_err = 0x81;
  EXPECT_THAT(error_of(retries), HasSubstr("(vendor error 129)"));
  EXPECT_THAT(error_of(completion(uint64_t{9} << 56)), HasSubstr("never asked for"));
  ibv_wc no_slot = completion(wr_id(kReceive, 4), IBV_WC_RECV);
  no_slot.byte_len = kCreditBytes;
  EXPECT_EQ(error_of(no_slot), "a receive completion for no posted receive");
  ibv_wc no_imm = completion(wr_id(kReceive, 1), IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(error_of(no_imm), "a frame write without its offset");
  ibv_wc long_send = completion(wr_id(kReceive, 1), IBV_WC_RECV);
  long_send.byte_len = 40;
  EXPECT_EQ(error_of(long_send), "a message from the peer that is not a credit (40 bytes)");
  EXPECT_THAT(error_of(completion(wr_id(kReceive, 1), IBV_WC_RDMA_READ)),
              HasSubstr("an unexpected receive completion"));
}

}  // namespace
}  // namespace plexus::transports::rdma
