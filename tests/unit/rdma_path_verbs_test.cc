// An RDMA path's verbs objects and the frames over them, without a device: PathVerbs
// (transports/rdma/path_verbs.h) frees what it holds in the order the device needs, checked
// with fake objects and recording deleters; FrameTransfer (frame_transfer.h) posts on a fake
// queue pair whose context's calls record the work requests and hand out the completions a
// test queues: nothing goes before the peer is ready, frames go as writes at the ring's
// places, a written frame gives its token back, an arriving frame is delivered, its receive
// reposted and its credit sent, and a hostile completion fails the path, after which nothing
// more is posted.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transports/path/sendable_memory.h"
#include "transports/rdma/frame_transfer.h"
#include "transports/rdma/path_verbs.h"
#include "transports/rdma/verbs_device.h"
#include "transports/wire/little_endian.h"

namespace plexus::transports::rdma {
namespace {

std::vector<std::string>& freed() {
  static std::vector<std::string> log;
  return log;
}
int free_qp(ibv_qp*) { return freed().push_back("qp"), 0; }
int free_cq(ibv_cq*) { return freed().push_back("cq"), 0; }
int free_channel(ibv_comp_channel*) { return freed().push_back("channel"), 0; }
int free_pd(ibv_pd*) { return freed().push_back("pd"), 0; }
int free_mr(ibv_mr* mr) {
  static const std::map<uint32_t, std::string> names = {
      {1, "ring mr"}, {2, "bounce mr"}, {3, "slots mr"}, {4, "credit mr"}};
  return freed().push_back(names.at(mr->lkey)), 0;
}

RdmaSettings small_settings() {
  RdmaSettings s;
  s.ring_bytes = 8192;
  s.bounce_bytes = 8192;
  s.receive_depth = 4;
  s.send_depth = 8;
  return s;
}

// A device as a test makes it: fake context and domain that log their freeing, windows
// "registered" at their own address.
std::shared_ptr<VerbsDevice> fake_device(ibv_context* context, ibv_pd* pd) {
  return std::make_shared<VerbsDevice>(
      "fake0",
      std::shared_ptr<ibv_context>(context, [](ibv_context*) { freed().push_back("device"); }),
      VerbsPtr<ibv_pd>(pd, free_pd),
      MrCache::Calls{[](std::byte* base, size_t) -> common::Result<MrCache::Registration> {
                       return MrCache::Registration{base, {}};
                     },
                     [](void*) { freed().push_back("pool window"); }},
      4, nullptr);
}

// One path's own verbs objects, made as open() would on `device` (fakes).
struct FakePathObjects {
  ibv_mr mrs[4]{};
  ibv_comp_channel channel{};
  ibv_cq cq{};
  ibv_qp qp{};
  void give(PathVerbs& verbs, const std::shared_ptr<VerbsDevice>& device) {
    verbs.port.context = device->context();
    verbs.device = device;
    for (uint32_t i = 0; i < 4; ++i) mrs[i].lkey = i + 1;
    verbs.ring_mr = VerbsPtr<ibv_mr>(&mrs[0], free_mr);
    verbs.bounce_mr = VerbsPtr<ibv_mr>(&mrs[1], free_mr);
    verbs.slots_mr = VerbsPtr<ibv_mr>(&mrs[2], free_mr);
    verbs.credit_mr = VerbsPtr<ibv_mr>(&mrs[3], free_mr);
    verbs.channel = VerbsPtr<ibv_comp_channel>(&channel, free_channel);
    verbs.cq = VerbsPtr<ibv_cq>(&cq, free_cq);
    verbs.qp = VerbsPtr<ibv_qp>(&qp, free_qp);
    verbs.watcher.qp = &qp;
    verbs.watcher.cq = &cq;
    verbs.watch = device->watch(&verbs.watcher);
  }
};

TEST(RdmaPathVerbsTest, EverythingIsFreedQueuePairFirstDeviceLast) {
  freed().clear();
  auto sendable = std::make_shared<SendableMemory>();
  std::vector<std::byte> pool(64 * 1024);
  auto announced = sendable->announce(pool);
  ibv_context context{};
  ibv_pd pd{};
  FakePathObjects objects;
  {
    PathVerbs verbs(small_settings());
    objects.give(verbs, fake_device(&context, &pd));
    verbs.pool_windows.emplace(sendable, verbs.device->windows(), 1024, 16384);
    // A posted frame still holds its window when the path goes.
    verbs.pool_windows->posted(
        verbs.pool_windows->pin(std::span<const std::byte>(pool.data(), 4096)));
  }
  // The path's own objects, then (it was the device's last user) the device's: its window
  // registrations, its domain, its context.
  EXPECT_EQ(freed(),
            (std::vector<std::string>{"qp", "cq", "channel", "ring mr", "bounce mr", "slots mr",
                                      "credit mr", "pool window", "pd", "device"}));
}

TEST(RdmaPathVerbsTest, PathsShareTheirDeviceWhichGoesWithTheLast) {
  freed().clear();
  ibv_context context{};
  ibv_pd pd{};
  auto device = fake_device(&context, &pd);
  FakePathObjects first_objects;
  FakePathObjects second_objects;
  auto first = std::make_unique<PathVerbs>(small_settings());
  auto second = std::make_unique<PathVerbs>(small_settings());
  first_objects.give(*first, device);
  second_objects.give(*second, device);
  EXPECT_EQ(device->watchers(), 2u);
  device.reset();
  first.reset();
  EXPECT_EQ(freed(), (std::vector<std::string>{"qp", "cq", "channel", "ring mr", "bounce mr",
                                               "slots mr", "credit mr"}))
      << "the other path still uses the device: its domain and context stay";
  EXPECT_EQ(second->device->watchers(), 1u) << "the first path's interest went with it";
  second.reset();
  EXPECT_EQ(freed().size(), 16u);
  EXPECT_EQ(freed().back(), "device");
}

TEST(RdmaPathVerbsTest, AnAsyncEventReachesThePathItConcernsWhoeverReadsIt) {
  ibv_context context{};
  ibv_pd pd{};
  auto device = fake_device(&context, &pd);
  ibv_qp qps[2]{};
  ibv_cq cqs[2]{};
  int wake[2] = {::eventfd(0, EFD_NONBLOCK), ::eventfd(0, EFD_NONBLOCK)};
  ASSERT_TRUE(wake[0] >= 0 && wake[1] >= 0);
  VerbsDevice::Watcher watchers[2];
  std::vector<VerbsDevice::Watch> watches;
  for (int i = 0; i < 2; ++i) {
    watchers[i] = {.qp = &qps[i],
                   .cq = &cqs[i],
                   .port = static_cast<uint8_t>(i + 1),
                   .wake_fd = wake[i],
                   .why = {}};
    watches.push_back(device->watch(&watchers[i]));
  }
  auto woken = [&](int i) {
    uint64_t n = 0;
    return ::read(wake[i], &n, sizeof n) == static_cast<ssize_t>(sizeof n) && n > 0;
  };
  ibv_async_event event{};
  event.event_type = IBV_EVENT_QP_FATAL;
  event.element.qp = &qps[1];
  device->dispatch(event);
  EXPECT_TRUE(watchers[0].why.empty()) << "another path's queue pair";
  EXPECT_FALSE(woken(0));
  EXPECT_EQ(watchers[1].why, ibv_event_type_str(IBV_EVENT_QP_FATAL));
  EXPECT_TRUE(woken(1)) << "woken, though another path may have read the event";
  event.event_type = IBV_EVENT_CQ_ERR;
  event.element.cq = &cqs[0];
  device->dispatch(event);
  EXPECT_NE(watchers[0].why.find("completion queue overran"), std::string::npos);
  EXPECT_TRUE(woken(0));
  watchers[0].why.clear();
  watchers[1].why.clear();
  event.event_type = IBV_EVENT_PORT_ERR;
  event.element.port_num = 1;
  device->dispatch(event);
  EXPECT_NE(watchers[0].why.find("port went down"), std::string::npos);
  EXPECT_TRUE(watchers[1].why.empty()) << "on port 2";
  watchers[0].why.clear();
  event.event_type = IBV_EVENT_DEVICE_FATAL;
  device->dispatch(event);
  for (auto& w : watchers) EXPECT_NE(w.why.find("device fake0 failed"), std::string::npos);
  watches.clear();
  EXPECT_EQ(device->watchers(), 0u);
  for (int fd : wake) ::close(fd);
}

// A queue pair whose context's calls record what is posted and return queued completions.
struct FakeQueuePair {
  static FakeQueuePair* current;  // the verbs calls are plain function pointers
  ibv_context context{};
  ibv_qp qp{};
  ibv_cq cq{};
  ibv_comp_channel channel{};
  ibv_mr mr{};
  int pipe_fds[2] = {-1, -1};
  struct Send {
    ibv_send_wr wr;
    std::vector<ibv_sge> sge;
  };
  std::vector<Send> sends;
  std::vector<uint64_t> receives;  // slots, in the order posted
  std::deque<ibv_wc> completions;

  FakeQueuePair() {
    current = this;
    context.ops.post_send = [](ibv_qp*, ibv_send_wr* wr, ibv_send_wr**) {
      current->sends.push_back({*wr, std::vector<ibv_sge>(wr->sg_list, wr->sg_list + wr->num_sge)});
      return 0;
    };
    context.ops.post_recv = [](ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr**) {
      current->receives.push_back(wr_index(wr->wr_id));
      return 0;
    };
    context.ops.poll_cq = [](ibv_cq*, int n, ibv_wc* wc) {
      int taken = 0;
      for (; taken < n && !current->completions.empty(); ++taken) {
        wc[taken] = current->completions.front();
        current->completions.pop_front();
      }
      return taken;
    };
    context.ops.req_notify_cq = [](ibv_cq*, int) { return 0; };
    qp.context = &context;
    cq.context = &context;
    // No completion events: an empty pipe reads as none.
    EXPECT_EQ(::pipe2(pipe_fds, O_NONBLOCK), 0);
    channel.fd = pipe_fds[0];
    mr.lkey = 42;
  }
  ~FakeQueuePair() {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
  }
  // Lends its objects to `verbs`, freed by no one.
  void lend(PathVerbs& verbs) {
    verbs.qp = VerbsPtr<ibv_qp>(&qp, [](ibv_qp*) { return 0; });
    verbs.cq = VerbsPtr<ibv_cq>(&cq, [](ibv_cq*) { return 0; });
    verbs.channel = VerbsPtr<ibv_comp_channel>(&channel, [](ibv_comp_channel*) { return 0; });
    for (auto* m : {&verbs.ring_mr, &verbs.bounce_mr, &verbs.slots_mr, &verbs.credit_mr}) {
      *m = VerbsPtr<ibv_mr>(&mr, [](ibv_mr*) { return 0; });
    }
  }
};
FakeQueuePair* FakeQueuePair::current = nullptr;

struct RdmaFrameTransferTest : ::testing::Test {
  RdmaSettings settings = small_settings();
  wire::DataFrameLimits limits;
  FakeQueuePair fake;
  PathVerbs verbs{settings};
  std::vector<std::string> failures;
  std::vector<std::pair<uint64_t, size_t>> sent;
  std::vector<std::string> frames;
  std::optional<FrameTransfer> transfer;
  FrameTransfer::Clock::time_point heard{};

  void SetUp() override {
    fake.lend(verbs);
    transfer.emplace(
        verbs, settings, limits,
        FrameTransfer::Hooks{
            .on_frame =
                [this](const wire::DataFrameHeader&, std::span<const std::byte> p) {
                  frames.emplace_back(reinterpret_cast<const char*>(p.data()), p.size());
                  return std::string();
                },
            .on_sent = [this](uint64_t token, size_t bytes) { sent.emplace_back(token, bytes); },
            .fail =
                [this](std::string why) {
                  failures.push_back(std::move(why));
                  transfer->stop();
                  return false;
                }});
  }
  Hello peer() const {
    Hello h;
    h.ring_address = 0x10000;
    h.ring_rkey = 77;
    h.ring_bytes = 4096;
    h.receive_depth = 4;
    return h;
  }
  void complete(uint64_t id, ibv_wc_opcode opcode, uint32_t bytes = 0, uint32_t imm = 0) {
    ibv_wc wc{};
    wc.wr_id = id;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = opcode;
    wc.byte_len = bytes;
    if (opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = htonl(imm);
    }
    fake.completions.push_back(wc);
  }
};

TEST_F(RdmaFrameTransferTest, FramesGoOnceThePeerIsReadyAsWritesAtTheRingsPlaces) {
  ASSERT_TRUE(transfer->post_receives());
  EXPECT_EQ(fake.receives.size(), receive_slots(settings));
  const std::string payload(100, 'p');
  wire::DataFrameHeader header;
  header.length = 100;
  transfer->queue(header, std::as_bytes(std::span(payload)), 9);
  EXPECT_TRUE(fake.sends.empty()) << "nothing goes before the peer is ready";
  EXPECT_EQ(transfer->unsent_bytes(), wire::kDataFrameHeaderBytes + 100);
  transfer->connect(peer());
  ASSERT_TRUE(transfer->start());
  ASSERT_EQ(fake.sends.size(), 1u);
  const auto& first = fake.sends[0];
  EXPECT_EQ(first.wr.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
  EXPECT_EQ(first.wr.wr.rdma.remote_addr, 0x10000u);
  EXPECT_EQ(first.wr.wr.rdma.rkey, 77u);
  EXPECT_EQ(ntohl(first.wr.imm_data), 0u);
  ASSERT_EQ(first.sge.size(), 1u) << "a small payload is copied behind its header";
  EXPECT_EQ(first.sge[0].length, wire::kDataFrameHeaderBytes + 100);
  EXPECT_EQ(std::memcmp(verbs.bounce.data() + wire::kDataFrameHeaderBytes, payload.data(), 100), 0);
  EXPECT_EQ(transfer->unsent_bytes(), 0u);
  EXPECT_EQ(transfer->backlog_bytes(), wire::kDataFrameHeaderBytes + 100);

  transfer->queue(header, std::as_bytes(std::span(payload)), 10);
  ASSERT_EQ(fake.sends.size(), 2u);
  const uint64_t second_at = ring_align_up(wire::kDataFrameHeaderBytes + 100);
  EXPECT_EQ(fake.sends[1].wr.wr.rdma.remote_addr, 0x10000u + second_at);
  EXPECT_EQ(ntohl(fake.sends[1].wr.imm_data), second_at / kRingAlign);

  complete(wr_id(kFrameWrite, 0), IBV_WC_RDMA_WRITE);
  ASSERT_TRUE(transfer->take_completions(&heard));
  EXPECT_NE(heard, FrameTransfer::Clock::time_point{});
  EXPECT_EQ(sent, (std::vector<std::pair<uint64_t, size_t>>{{9, 100}}));
  EXPECT_EQ(transfer->backlog_bytes(), wire::kDataFrameHeaderBytes + 100);
  EXPECT_EQ(transfer->bytes_sent(), 2 * (wire::kDataFrameHeaderBytes + 100));
  EXPECT_TRUE(failures.empty());
}

TEST_F(RdmaFrameTransferTest, AnArrivingFrameIsDeliveredItsReceiveRepostedAndItsCreditSent) {
  ASSERT_TRUE(transfer->post_receives());
  transfer->connect(peer());
  ASSERT_TRUE(transfer->start());
  wire::DataFrameHeader header;
  header.length = 16;
  wire::encode_data_frame_header(header, std::span<std::byte, wire::kDataFrameHeaderBytes>(
                                             verbs.ring.data(), wire::kDataFrameHeaderBytes));
  std::memcpy(verbs.ring.data() + wire::kDataFrameHeaderBytes, "sixteen bytes!!!", 16);
  complete(wr_id(kReceive, 3), IBV_WC_RECV_RDMA_WITH_IMM, wire::kDataFrameHeaderBytes + 16, 0);
  ASSERT_TRUE(transfer->take_completions(&heard));
  EXPECT_EQ(frames, (std::vector<std::string>{"sixteen bytes!!!"}));
  EXPECT_EQ(fake.receives.back(), 3u) << "its receive posted again";
  ASSERT_EQ(fake.sends.size(), 1u);
  EXPECT_EQ(fake.sends[0].wr.opcode, IBV_WR_SEND);
  const std::byte* credit = reinterpret_cast<const std::byte*>(fake.sends[0].sge[0].addr);
  EXPECT_EQ(wire::get_le<uint64_t>(credit), ring_align_up(wire::kDataFrameHeaderBytes + 16));
  EXPECT_EQ(wire::get_le<uint64_t>(credit + 8), 1u);
  EXPECT_EQ(transfer->bytes_received(), wire::kDataFrameHeaderBytes + 16);
}

TEST_F(RdmaFrameTransferTest, AHostileCompletionFailsThePathAndNothingMoreIsPosted) {
  complete(wr_id(kReceive, 0), IBV_WC_RECV, kCreditBytes);
  EXPECT_FALSE(transfer->take_completions(&heard));
  EXPECT_EQ(failures, (std::vector<std::string>{"credit from the peer before its setup"}));
  transfer->connect(peer());
  EXPECT_FALSE(transfer->start()) << "a failed path stays failed";
  wire::DataFrameHeader header;
  transfer->queue(header, {}, 1);
  EXPECT_TRUE(fake.sends.empty()) << "a stopped transfer posts nothing";
}

}  // namespace
}  // namespace plexus::transports::rdma
