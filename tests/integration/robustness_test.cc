// Bad input and failures against a real plexusd: killed clients, mismatched calls,
// garbage on the socket, unsealed pools, hostile ring entries, init timeouts, aborts,
// a vanished daemon. After each, the daemon must still serve a healthy job.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "shm/control.capnp.h"
#include "shm/framing.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_processes.h"
#include "tests/integration/raw_client.h"
#include "tests/integration/shared_daemon_test.h"
#include "tests/integration/test_data.h"

namespace plexus::test {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// A correct n-rank job: a few allreduces, checked exactly.
std::string healthy_job(const std::string& socket_path, int nranks) {
  auto results = run_ranks(socket_path, nranks, [](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    float* buf;
    if (auto r = plexus_alloc(reinterpret_cast<void**>(&buf), 4096 * sizeof(float))) {
      return describe("alloc", r);
    }
    for (int iter = 0; iter < 10; ++iter) {
      fill_input(buf, PLEXUS_FLOAT32, PLEXUS_SUM, rank, 4096);
      if (auto r = plexus_allreduce(buf, buf, 4096, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr)) {
        return describe("allreduce", r);
      }
      std::string error = compare(buf, PLEXUS_FLOAT32, 4096, [&](size_t j) {
        return reduced_bits(PLEXUS_FLOAT32, PLEXUS_SUM, n, j);
      });
      if (!error.empty()) return error;
    }
    plexus_comm_destroy(comm);
    return {};
  });
  return failures(results);
}

// After each test the daemon still serves a new job.
class RobustnessTest : public SharedDaemonTest {
 protected:
  void TearDown() override {
    SharedDaemonTest::TearDown();
    if (HasFatalFailure()) return;  // the daemon died: nothing serves a next job
    EXPECT_EQ(healthy_job(socket(), 2), "") << "the next job was not served";
  }
};

TEST_F(RobustnessTest, TwoJobsRunAtOnceWithoutSeeingEachOther) {
  // Ranks 0-1 are job A and ranks 2-3 job B: two communicators from two unique ids.
  auto results = run_ranks(socket(), 4, [](int rank, int, const auto& shared_id) -> std::string {
    plexus_unique_id_t id = shared_id;
    const int job = rank / 2;
    id.internal[8] = static_cast<char>(id.internal[8] ^ (job + 1));  // job B's own token
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, 2, id, rank % 2)) return describe("init", r);
    const size_t count = job == 0 ? 65536 : 1000;
    int32_t* buf;
    plexus_alloc(reinterpret_cast<void**>(&buf), count * 4);
    for (int iter = 0; iter < 200; ++iter) {
      fill_input(buf, PLEXUS_INT32, PLEXUS_SUM, rank % 2, count, static_cast<size_t>(iter));
      if (auto r = plexus_allreduce(buf, buf, count, PLEXUS_INT32, PLEXUS_SUM, comm, nullptr)) {
        return describe("allreduce", r);
      }
      std::string error = compare(buf, PLEXUS_INT32, count, [&](size_t j) {
        return reduced_bits(PLEXUS_INT32, PLEXUS_SUM, 2, j + static_cast<size_t>(iter));
      });
      if (!error.empty()) return "job " + std::to_string(job) + ": " + error;
    }
    return plexus_comm_destroy(comm) == PLEXUS_SUCCESS ? "" : "destroy failed";
  });
  EXPECT_EQ(failures(results), "");
}

// A process forked after it allocated from its pool (a DataLoader worker beside a torch
// rank) inherits the pool privately: it reads what was there, what it writes reaches
// neither its parent's buffer nor the daemon, and freeing it there does nothing; the
// parent's collectives in it afterwards are exact.
TEST_F(RobustnessTest, ChildForkedAfterAllocWritesItsOwnCopyNotTheParentsPool) {
  auto results = run_ranks(socket(), 2, [](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    constexpr size_t kCount = 1 << 16;
    float* buf;
    if (auto r = plexus_alloc(reinterpret_cast<void**>(&buf), kCount * sizeof(float))) {
      return describe("alloc", r);
    }
    std::fill_n(buf, kCount, 1.0f);
    const pid_t child = ::fork();
    if (child == 0) {
      // The inherited buffer: the parent's values, then overwritten here only.
      const bool saw_parent = std::all_of(buf, buf + kCount, [](float v) { return v == 1.0f; });
      std::fill_n(buf, kCount, 7.0f);
      if (plexus_free(buf) != PLEXUS_SUCCESS) ::_exit(4);
      ::_exit(saw_parent ? 0 : 3);
    }
    if (child < 0) return "fork failed";
    int status = 0;
    if (::waitpid(child, &status, 0) != child) return "waitpid failed";
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return "the child did not read the parent's values in its inherited buffer, or could not "
             "free it (status " +
             std::to_string(status) + ")";
    }
    if (!std::all_of(buf, buf + kCount, [](float v) { return v == 1.0f; })) {
      return "the child's writes reached the parent's pool buffer";
    }
    // The parent's pool is still the one the daemon sees: an allreduce in it is exact.
    if (auto r = plexus_allreduce(buf, buf, kCount, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr)) {
      return describe("allreduce", r);
    }
    if (!std::all_of(buf, buf + kCount, [n](float v) { return v == static_cast<float>(n); })) {
      return "allreduce after the fork gave a wrong sum";
    }
    plexus_free(buf);
    return plexus_comm_destroy(comm) == PLEXUS_SUCCESS ? "" : "destroy failed";
  });
  EXPECT_EQ(failures(results), "");
}

// A rank that exits while a child it forked lives on (a DataLoader worker) is gone for the
// daemon at once: the child holds none of its session's descriptors.
TEST_F(RobustnessTest, RankThatExitsWhileItsForkedChildLivesIsLostAtOnce) {
  auto results = run_ranks(socket(), 2, [](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    if (rank == 1) {
      if (::fork() == 0) {
        // It keeps whatever libplexus left it but lets go of the harness's verdict pipe,
        // so that rank 1's verdict is read as rank 1 ends.
        for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
          std::error_code ec;
          const auto target = std::filesystem::read_symlink(fd.path(), ec).string();
          if (target.rfind("pipe:", 0) == 0) ::close(std::stoi(fd.path().filename().string()));
        }
        ::sleep(8);  // outlives its parent by far more than the bound below
        ::_exit(0);
      }
      return {};  // no destroy: the process just ends
    }
    float* buf;
    if (auto r = plexus_alloc(reinterpret_cast<void**>(&buf), 1024 * sizeof(float))) {
      return describe("alloc", r);
    }
    const auto start = Clock::now();
    const plexus_result_t r =
        plexus_allreduce(buf, buf, 1024, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    if (r == PLEXUS_SUCCESS) return "the allreduce succeeded without rank 1";
    const std::string error = plexus_get_last_error();
    if (error.find("rank 1") == std::string::npos)
      return "the error does not name rank 1: " + error;
    if (waited > std::chrono::seconds(3)) {
      return "rank 1 was found gone only after " + std::to_string(waited.count()) +
             " ms (its child held the session open?)";
    }
    plexus_comm_destroy(comm);
    return {};
  });
  EXPECT_EQ(failures(results), "");
}

TEST_F(RobustnessTest, RankThatDiesBeforeSubmittingFailsTheOthersNamingIt) {
  auto results = run_ranks(socket(), 3, [](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    if (rank == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ::kill(::getpid(), SIGKILL);
    }
    float* buf;
    plexus_alloc(reinterpret_cast<void**>(&buf), 1024 * sizeof(float));
    const auto start = Clock::now();
    plexus_result_t r = plexus_allreduce(buf, buf, 1024, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    if (r != PLEXUS_ERR_PEER_LOST) return "expected PEER_LOST, got " + describe("allreduce", r);
    const std::string message = plexus_get_last_error();
    if (message.find("rank 2") == std::string::npos)
      return "error does not name rank 2: " + message;
    if (waited > std::chrono::seconds(5)) return "took " + std::to_string(waited.count()) + " ms";
    // The communicator is broken: the next op fails at once, not hangs.
    r = plexus_allreduce(buf, buf, 1024, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
    if (r != PLEXUS_ERR_PEER_LOST) return "second op: " + describe("allreduce", r);
    plexus_comm_destroy(comm);
    return {};
  });
  EXPECT_TRUE(results[0].ok) << results[0].message;
  EXPECT_TRUE(results[1].ok) << results[1].message;
  EXPECT_THAT(results[2].message, HasSubstr("Killed"));
}

TEST_F(RobustnessTest, ClientKilledWhileLargeCollectivesRunLosesNothingElse) {
  // Every rank loops over 16 MiB allreduces; rank 2 is SIGKILLed from outside mid-loop.
  auto body = [](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    const size_t count = 4u << 20;
    float* buf;
    plexus_alloc(reinterpret_cast<void**>(&buf), count * sizeof(float));
    for (int iter = 0; iter < 100000; ++iter) {
      fill_input(buf, PLEXUS_FLOAT32, PLEXUS_SUM, rank, 64);
      plexus_result_t r =
          plexus_allreduce(buf, buf, count, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
      if (r == PLEXUS_ERR_PEER_LOST) {
        const std::string message = plexus_get_last_error();
        return message.find("rank 2") != std::string::npos
                   ? ""
                   : "error does not name rank 2: " + message;
      }
      if (r != PLEXUS_SUCCESS) return describe("allreduce", r);
      std::string error = compare(buf, PLEXUS_FLOAT32, 64, [&](size_t j) {
        return reduced_bits(PLEXUS_FLOAT32, PLEXUS_SUM, n, j);
      });
      if (!error.empty()) return "iteration " + std::to_string(iter) + ": " + error;
    }
    return "rank 2 was never reported lost";
  };
  auto results = run_ranks(socket(), 3, body, std::chrono::seconds(60), [](const auto& pids) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::kill(pids[2], SIGKILL);
  });
  EXPECT_TRUE(results[0].ok) << results[0].message;
  EXPECT_TRUE(results[1].ok) << results[1].message;
}

// Runs one collective where `deviant` rank calls differently; every rank must fail
// with PLEXUS_ERR_MISMATCH and a message containing `expected`.
void expect_mismatch(const std::string& socket_path, const std::string& what,
                     const std::string& expected) {
  auto results = run_ranks(socket_path, 3, [&](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    float* buf;
    plexus_alloc(reinterpret_cast<void**>(&buf), 4096 * sizeof(double));
    const bool deviant = rank == 1;
    size_t count = 100;
    plexus_dtype_t dtype = PLEXUS_FLOAT32;
    plexus_redop_t op = PLEXUS_SUM;
    int root = 0;
    if (deviant && what == "count") count = 101;
    if (deviant && what == "dtype") dtype = PLEXUS_INT32;
    if (deviant && what == "op") op = PLEXUS_MAX;
    if (deviant && what == "root") root = 2;
    plexus_result_t r;
    if (what == "root") {
      r = plexus_broadcast(buf, buf, count, dtype, root, comm, nullptr);
    } else if (deviant && what == "collective") {
      r = plexus_allgather(buf, buf + 1000, 10, dtype, comm, nullptr);
    } else {
      r = plexus_allreduce(buf, buf, count, dtype, op, comm, nullptr);
    }
    if (r != PLEXUS_ERR_MISMATCH) return what + ": expected MISMATCH, got " + describe("op", r);
    const std::string message = plexus_get_last_error();
    if (message.find(expected) == std::string::npos ||
        message.find("rank 1") == std::string::npos) {
      return what + ": message does not name the mismatch: " + message;
    }
    // The next op on the broken communicator fails at once.
    r = plexus_allreduce(buf, buf, 10, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
    if (r != PLEXUS_ERR_MISMATCH) return what + ": follow-up op: " + describe("allreduce", r);
    plexus_comm_destroy(comm);
    return {};
  });
  EXPECT_EQ(failures(results), "") << what;
}

TEST_F(RobustnessTest, MismatchedCallsFailEveryRankNamingTheMismatch) {
  expect_mismatch(socket(), "count", "count mismatch: rank 0 passed 100, rank 1 passed 101");
  expect_mismatch(socket(), "dtype", "dtype mismatch");
  expect_mismatch(socket(), "op", "reduction op mismatch: rank 0 passed sum, rank 1 passed max");
  expect_mismatch(socket(), "root", "root mismatch");
  expect_mismatch(socket(), "collective", "rank 0 called allreduce but rank 1 called allgather");
}

TEST_F(RobustnessTest, GarbageAndTruncatedMessagesCloseOnlyThatConnection) {
  const std::string path = socket();
  RawClient admin(path);
  admin.hello_admin();
  const uint64_t bad_before = admin.status().bad_messages;
  // Not a frame: a length that is not a multiple of 8.
  EXPECT_TRUE(daemon_closes_after(path, "GET / HTTP/1.1\r\n\r\n", 2000));
  // A length beyond the limit.
  EXPECT_TRUE(daemon_closes_after(path, std::string("\xff\xff\xff\x7f", 4) + "x", 2000));
  // A valid length holding garbage words.
  std::string garbage(4 + 64, '\xab');
  const uint32_t len = 64;
  std::memcpy(garbage.data(), &len, 4);
  EXPECT_TRUE(daemon_closes_after(path, garbage, 2000));
  // A request other than hello first.
  {
    capnp::MallocMessageBuilder message;
    message.initRoot<shm::control::ClientMessage>().setStatus();
    auto frame = common::encode_frame(message);
    EXPECT_TRUE(daemon_closes_after(
        path, std::string(reinterpret_cast<char*>(frame.data()), frame.size()), 2000));
  }
  // A truncated frame, then the client goes away: nothing to close, the daemon moves on.
  {
    capnp::MallocMessageBuilder message;
    auto hello = message.initRoot<shm::control::ClientMessage>().initHello();
    hello.setProtocolVersion(shm::kProtocolVersion);
    auto frame = common::encode_frame(message);
    RawClient raw(path);
    ASSERT_EQ(shm::send_frame(raw.socket_fd(), std::span(frame).first(frame.size() / 2)), "");
  }
  // An admin hello carrying descriptors.
  {
    capnp::MallocMessageBuilder message;
    auto hello = message.initRoot<shm::control::ClientMessage>().initHello();
    hello.setProtocolVersion(shm::kProtocolVersion);
    hello.setRole(shm::control::Role::ADMIN);
    auto frame = common::encode_frame(message);
    int fds[] = {0, 1};
    EXPECT_TRUE(daemon_closes_after(
        path, std::string(reinterpret_cast<char*>(frame.data()), frame.size()), 2000, fds));
  }
  EXPECT_GE(admin.status().bad_messages, bad_before + 5);
}

TEST_F(RobustnessTest, UnsealedUndersizedOrForeignPoolDescriptorsAreRefused) {
  {
    RawClient raw(socket());
    common::UniqueFd unsealed(::memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    ASSERT_EQ(::ftruncate(unsealed.get(), 1 << 20), 0);
    EXPECT_THAT(raw.hello_with_fd(unsealed.get(), 1 << 20),
                HasSubstr("not sealed against shrinking"));
    EXPECT_TRUE(raw.closed_by_daemon(2000));
  }
  {
    RawClient raw(socket());
    common::UniqueFd small = shm::create_sealed_memfd("small", 4096);
    EXPECT_THAT(raw.hello_with_fd(small.get(), 1 << 20), HasSubstr("were declared"));
  }
  {
    RawClient raw(socket());
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    common::UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
    EXPECT_THAT(raw.hello_with_fd(read_end.get(), 4096), HasSubstr("not a sealable memfd"));
  }
}

// CPU time (user + system) a process has used, from /proc/PID/stat.
double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 1; i <= 13 && fields >> field; ++i) {
    if (i == 12) utime = std::stoull(field);
    if (i == 13) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

class HostileRingTest : public RobustnessTest {
 protected:
  void SetUp() override {
    raw_ = std::make_unique<RawClient>(socket());
    raw_->hello_with_pool(1 << 20);
    uint8_t token[16];
    for (int i = 0; i < 16; ++i) token[i] = static_cast<uint8_t>(0xa0 + i + counter_ * 16);
    ++counter_;
    handle_ = raw_->comm_init(token, 1, 0, 5000);
  }
  shm::SubmissionEntry valid_allreduce(uint64_t user_data) {
    shm::SubmissionEntry e{};
    e.user_data = user_data;
    e.opcode = static_cast<uint8_t>(shm::Opcode::kAllReduce);
    e.dtype = PLEXUS_FLOAT32;
    e.redop = PLEXUS_SUM;
    e.comm = handle_;
    e.count = 16;
    e.send_offset = 4096;
    e.recv_offset = 8192;
    return e;
  }
  std::unique_ptr<RawClient> raw_;
  uint32_t handle_ = 0;
  static inline int counter_ = 0;
};

TEST_F(HostileRingTest, EveryHostileFieldCompletesWithAnErrorAndTheSessionGoesOn) {
  struct Hostile {
    const char* name;
    std::function<void(shm::SubmissionEntry&)> mutate;
    const char* message;
  };
  const std::vector<Hostile> cases = {
      {"opcode 0", [](auto& e) { e.opcode = 0; }, "opcode 0 is not a known operation"},
      {"opcode 200", [](auto& e) { e.opcode = 200; }, "opcode 200"},
      {"dtype 77", [](auto& e) { e.dtype = 77; }, "dtype 77"},
      {"redop 9", [](auto& e) { e.redop = 9; }, "redop 9"},
      {"flags", [](auto& e) { e.flags = 4; }, "flags 0x04 has unknown bits"},
      {"stream fields", [](auto& e) { e.stream_flags = 42; }, "must be zero"},
      {"stream flags outside the pool",
       [](auto& e) {
         e.flags = shm::kEntryStreamOrdered;
         e.stream_ticket = 1;
         e.stream_flags = 1 << 20;
       },
       "stream_flags offset 1048576"},
      {"unknown comm", [](auto& e) { e.comm = 999; }, "communicator handle 999"},
      {"offset past pool", [](auto& e) { e.send_offset = 1 << 20; },
       "outside its 1048576-byte region"},
      {"offset overflow", [](auto& e) { e.recv_offset = UINT64_MAX - 3; }, "outside"},
      {"count overflow", [](auto& e) { e.count = 1ull << 62; }, "overflows"},
      {"region", [](auto& e) { e.send_region = 7; }, "region 7"},
      {"root",
       [](auto& e) {
         e.opcode = static_cast<uint8_t>(shm::Opcode::kBroadcast);
         e.peer = 5;
       },
       "root 5 is outside"},
      {"peer",
       [](auto& e) {
         e.opcode = static_cast<uint8_t>(shm::Opcode::kSend);
         e.peer = -1;
       },
       "peer -1 is outside"},
      {"overlap", [](auto& e) { e.recv_offset = e.send_offset + 8; },
       "overlap without being in place"},
      {"misaligned", [](auto& e) { e.send_offset += 2; }, "not a multiple of the 4-byte float"},
  };
  const uint64_t bad_before = raw_->status().bad_entries;
  uint64_t id = 1;
  for (const auto& c : cases) {
    shm::SubmissionEntry e = valid_allreduce(id);
    c.mutate(e);
    raw_->submit(e);
    auto cqe = raw_->next_completion(5000);
    ASSERT_TRUE(cqe.has_value()) << c.name << ": no completion";
    EXPECT_EQ(cqe->user_data, id) << c.name;
    EXPECT_NE(cqe->status, PLEXUS_SUCCESS) << c.name;
    EXPECT_THAT(std::string(cqe->message, cqe->message_len), HasSubstr(c.message)) << c.name;
    ++id;
  }
  // The session still works: a valid entry completes.
  raw_->submit(valid_allreduce(id));
  auto cqe = raw_->next_completion(5000);
  ASSERT_TRUE(cqe.has_value());
  EXPECT_EQ(cqe->status, PLEXUS_SUCCESS) << std::string(cqe->message, cqe->message_len);
  EXPECT_EQ(raw_->status().bad_entries, bad_before + cases.size());
}

// The daemon's answer to a GPU registration request as raw bytes: the region, or the error.
std::string gpu_request(RawClient& raw, size_t handle_bytes, size_t uuid_bytes,
                        uint32_t release_region = 0) {
  if (release_region != 0) return raw.release_gpu_memory(release_region);
  const std::vector<uint8_t> handle(handle_bytes, 0x5a);
  const std::vector<uint8_t> uuid(uuid_bytes, 0x17);
  return raw.register_gpu_memory(handle, uuid, 1 << 20);
}

// Forged GPU registrations: malformed ones are refused naming the field, a handle no
// driver made (or a daemon without GPUs) is refused saying why, releasing what was never
// registered is an error; the session goes on serving.
TEST_F(HostileRingTest, ForgedGpuRegistrationsAreRefusedAndTheSessionGoesOn) {
  EXPECT_THAT(gpu_request(*raw_, 10, 16), HasSubstr("64-byte ipcHandle"));
  EXPECT_THAT(gpu_request(*raw_, 64, 3), HasSubstr("16-byte deviceUuid"));
  const std::string forged = gpu_request(*raw_, 64, 16);
  EXPECT_THAT(forged, ::testing::Not(HasSubstr("region"))) << forged;
  // Without a GPU: "cannot take GPU buffers: no CUDA driver ..."; with one: the device
  // with that uuid is not on this node.
  EXPECT_THAT(forged, ::testing::AnyOf(HasSubstr("cannot take GPU buffers"),
                                       HasSubstr("is not one of this node's")));
  EXPECT_THAT(gpu_request(*raw_, 0, 0, 3), HasSubstr("GPU region 3 is not registered"));
  // An entry naming a region never registered is refused like any other bad field.
  shm::SubmissionEntry e = valid_allreduce(1);
  e.recv_region = 1;
  raw_->submit(e);
  auto bad = raw_->next_completion(5000);
  ASSERT_TRUE(bad.has_value());
  EXPECT_THAT(std::string(bad->message, bad->message_len), HasSubstr("region 1"));
  raw_->submit(valid_allreduce(2));
  auto cqe = raw_->next_completion(5000);
  ASSERT_TRUE(cqe.has_value());
  EXPECT_EQ(cqe->status, PLEXUS_SUCCESS) << std::string(cqe->message, cqe->message_len);
}

size_t open_fds(pid_t pid) {
  size_t n = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

// A VMM (cuMemCreate) registration carries its allocation's shareable handle as one file
// descriptor: a wrong count or a handle where none belongs is refused naming it, an
// unknown handle type too, and a descriptor that is no allocation (/dev/null) is refused
// by the driver, or by a daemon without one. None of the descriptors is kept.
TEST_F(HostileRingTest, ForgedVmmRegistrationsAreRefusedAndTheirDescriptorsClosed) {
  const std::vector<uint8_t> uuid(16, 0x17);
  const std::vector<uint8_t> ipc(64, 0x5a);
  const size_t fds_before = open_fds(daemon().pid());
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  const int two[] = {null_fd, null_fd};
  EXPECT_THAT(raw_->register_gpu_memory({}, uuid, 1 << 21, 1),
              HasSubstr("posixFd GPU registration carries one file descriptor, not 0"));
  EXPECT_THAT(raw_->register_gpu_memory({}, uuid, 1 << 21, 1, two),
              HasSubstr("carries one file descriptor, not 2"));
  EXPECT_THAT(raw_->register_gpu_memory(ipc, uuid, 1 << 21, 0, std::span(two, 1)),
              HasSubstr("cudaIpc GPU registration carries no file descriptor, not 1"));
  EXPECT_THAT(raw_->register_gpu_memory(ipc, uuid, 1 << 21, 1, std::span(two, 1)),
              HasSubstr("needs a 0-byte ipcHandle"));
  EXPECT_THAT(raw_->register_gpu_memory({}, uuid, 1 << 21, 9, std::span(two, 1)),
              HasSubstr("GPU handle type 9 is not one this daemon knows"));
  const std::string forged = raw_->register_gpu_memory({}, uuid, 1 << 21, 1, std::span(two, 1));
  EXPECT_THAT(forged, ::testing::AnyOf(HasSubstr("cannot take GPU buffers"),
                                       HasSubstr("cuMemImportFromShareableHandle")))
      << forged;
  ::close(null_fd);
  // The engine drops its copy of the last one just after the reply: give it a moment.
  size_t fds_after = open_fds(daemon().pid());
  for (int i = 0; i < 200 && fds_after != fds_before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    fds_after = open_fds(daemon().pid());
  }
  EXPECT_EQ(fds_after, fds_before) << "a descriptor sent with a registration stayed open";
  raw_->submit(valid_allreduce(1));
  auto cqe = raw_->next_completion(5000);
  ASSERT_TRUE(cqe.has_value());
  EXPECT_EQ(cqe->status, PLEXUS_SUCCESS) << std::string(cqe->message, cqe->message_len);
}

// The daemon's side of stream ordering, with this test writing the ready flag as a GPU
// stream would: a stream-ordered entry, and the entries behind it, wait for their ready
// flag; the done flag is written when the op ends, and when a stream-ordered entry is
// refused, so a stream is never left waiting.
TEST_F(HostileRingTest, StreamOrderedEntriesWaitForTheirReadyFlagAndReleaseTheirStream) {
  auto* flags = static_cast<shm::StreamFlags*>(raw_->pool().allocate(sizeof(shm::StreamFlags)));
  ASSERT_NE(flags, nullptr);
  flags->ready.store(0);
  flags->done.store(0);
  shm::SubmissionEntry ordered = valid_allreduce(1);
  ordered.flags = shm::kEntryStreamOrdered;
  ordered.stream_ticket = 5;
  ordered.stream_flags = raw_->pool().offset_of(flags);
  raw_->submit(ordered);
  raw_->submit(valid_allreduce(2));  // after it in the ring: waits behind it
  EXPECT_FALSE(raw_->next_completion(300).has_value()) << "ran before its stream got there";
  EXPECT_EQ(flags->done.load(), 0u);
  flags->ready.store(4);  // an older ticket of the same slot is not this one
  EXPECT_FALSE(raw_->next_completion(100).has_value());
  flags->ready.store(5, std::memory_order_release);
  auto first = raw_->next_completion(5000);
  auto second = raw_->next_completion(5000);
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(first->user_data, 1u);
  EXPECT_EQ(first->status, PLEXUS_SUCCESS) << std::string(first->message, first->message_len);
  EXPECT_EQ(second->user_data, 2u);
  EXPECT_EQ(flags->done.load(std::memory_order_acquire), 5u);

  // Refused (a bad dtype), it still lets its stream go, once its turn comes.
  shm::SubmissionEntry bad = ordered;
  bad.user_data = 3;
  bad.stream_ticket = 6;
  bad.dtype = 99;
  flags->ready.store(6, std::memory_order_release);
  raw_->submit(bad);
  auto refused = raw_->next_completion(5000);
  ASSERT_TRUE(refused.has_value());
  EXPECT_THAT(std::string(refused->message, refused->message_len), HasSubstr("dtype 99"));
  EXPECT_EQ(flags->done.load(std::memory_order_acquire), 6u);

  // Ready before it is submitted: it runs at once.
  shm::SubmissionEntry early = ordered;
  early.user_data = 9;
  early.stream_ticket = 7;
  flags->ready.store(7, std::memory_order_release);
  raw_->submit(early);
  auto done = raw_->next_completion(5000);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->status, PLEXUS_SUCCESS);
  EXPECT_EQ(flags->done.load(), 7u);
  raw_->submit(valid_allreduce(10));
  auto after = raw_->next_completion(5000);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->status, PLEXUS_SUCCESS);
}

// user_data finds a stream-ordered (or GPU) op again at its completion, so it must be that
// op's own: an op on a stream with the user_data of a plain op still in flight is refused
// (its stream released), and the plain op completes as it should.
TEST_F(RobustnessTest, AStreamOrderedEntryReusingTheIdOfAnOpInFlightIsRefused) {
  RawClient a(socket());
  RawClient b(socket());
  a.hello_with_pool(1 << 20);
  b.hello_with_pool(1 << 20);
  const uint8_t token[16] = {0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
                             0x59, 0x5a, 0x5b, 0x5c, 0x5d, 0x5e, 0x5f, 0x60};
  uint32_t handle_b = 0;
  std::thread join_b([&] { handle_b = b.comm_init(token, 2, 1, 5000); });
  const uint32_t handle_a = a.comm_init(token, 2, 0, 5000);
  join_b.join();
  auto allreduce = [](uint32_t handle, uint64_t user_data) {
    shm::SubmissionEntry e{};
    e.user_data = user_data;
    e.opcode = static_cast<uint8_t>(shm::Opcode::kAllReduce);
    e.dtype = PLEXUS_FLOAT32;
    e.redop = PLEXUS_SUM;
    e.comm = handle;
    e.count = 16;
    e.send_offset = 4096;
    e.recv_offset = 8192;
    return e;
  };
  a.submit(allreduce(handle_a, 5));  // in flight: rank 1 has not submitted
  auto* flags = static_cast<shm::StreamFlags*>(a.pool().allocate(sizeof(shm::StreamFlags)));
  ASSERT_NE(flags, nullptr);
  flags->done.store(0);
  flags->ready.store(3);
  shm::SubmissionEntry ordered = allreduce(handle_a, 5);
  ordered.flags = shm::kEntryStreamOrdered;
  ordered.stream_ticket = 3;
  ordered.stream_flags = a.pool().offset_of(flags);
  a.submit(ordered);
  auto refused = a.next_completion(5000);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->user_data, 5u);
  EXPECT_THAT(std::string(refused->message, refused->message_len),
              HasSubstr("user_data 5 is already in flight"));
  EXPECT_EQ(flags->done.load(std::memory_order_acquire), 3u) << "its stream was left waiting";
  b.submit(allreduce(handle_b, 1));
  auto first = a.next_completion(5000);
  auto other = b.next_completion(5000);
  ASSERT_TRUE(first.has_value() && other.has_value());
  EXPECT_EQ(first->status, PLEXUS_SUCCESS) << std::string(first->message, first->message_len);
  EXPECT_EQ(other->status, PLEXUS_SUCCESS) << std::string(other->message, other->message_len);
}

TEST_F(HostileRingTest, CorruptSubmissionTailClosesOnlyThatSession) {
  raw_->submit(valid_allreduce(1));
  ASSERT_TRUE(raw_->next_completion(2000).has_value());
  // Written behind libplexus's back; a parked daemon sees it at its next bounded wake.
  auto& tail = raw_->ring_header()->sq_tail.value;
  tail.store(tail.load() + 100000);
  EXPECT_TRUE(raw_->closed_by_daemon(3000));
}

TEST_F(HostileRingTest, CorruptCompletionHeadClosesOnlyThatSession) {
  raw_->ring_header()->cq_head.value.store(123456);
  raw_->submit(valid_allreduce(1));
  EXPECT_TRUE(raw_->closed_by_daemon(3000));
}

TEST_F(HostileRingTest, ClientThatNeverReadsCompletionsIsHeldBackNotServedForever) {
  // Fill far past the completion ring without reading it: the daemon stops taking
  // entries when the CQ would overflow, and keeps serving others meanwhile.
  int submitted = 0;
  try {
    for (; submitted < 2000; ++submitted)
      raw_->submit(valid_allreduce(static_cast<uint64_t>(submitted)));
  } catch (const std::exception&) {
    // The SQ stayed full: the back-pressure we expect.
  }
  EXPECT_LT(submitted, 2000);
  // Held back, the session is no work: the daemon sleeps rather than spin on it. A spin
  // would cost about a second of CPU per second; allow a tenth of that.
  const double cpu_before = cpu_seconds(daemon().pid());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_LT(cpu_seconds(daemon().pid()) - cpu_before, 0.1) << "plexusd spins on a stuck client";
  EXPECT_EQ(healthy_job(socket(), 2), "");
  // Reading completions releases the rest.
  int completed = 0;
  while (auto cqe = raw_->next_completion(2000)) {
    EXPECT_EQ(cqe->status, PLEXUS_SUCCESS);
    ++completed;
  }
  EXPECT_EQ(completed, submitted);
}

TEST_F(RobustnessTest, CommInitTimeoutNamesTheRanksThatNeverArrived) {
  auto results = run_ranks(socket(), 2, [](int rank, int, const auto& id) -> std::string {
    plexus_comm_t comm;
    plexus_result_t r = plexus_comm_init_rank_timeout(&comm, 4, id, rank, 300);
    if (r != PLEXUS_ERR_TIMEOUT) return "expected TIMEOUT, got " + describe("init", r);
    const std::string message = plexus_get_last_error();
    if (message.find("rank(s) 2,3 of 4 never joined") == std::string::npos) {
      return "message does not name the missing ranks: " + message;
    }
    return {};
  });
  EXPECT_EQ(failures(results), "");
}

TEST_F(RobustnessTest, AbortFailsTheOtherRanksWithPeerLost) {
  auto results = run_ranks(socket(), 2, [](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    float* buf;
    plexus_alloc(reinterpret_cast<void**>(&buf), 1024);
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return plexus_comm_abort(comm) == PLEXUS_SUCCESS ? ""
                                                       : describe("abort", PLEXUS_ERR_INTERNAL);
    }
    plexus_result_t r = plexus_allreduce(buf, buf, 16, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
    const std::string message = plexus_get_last_error();
    if (r != PLEXUS_ERR_PEER_LOST || message.find("rank 0") == std::string::npos ||
        message.find("aborted") == std::string::npos) {
      return "expected PEER_LOST naming rank 0's abort, got " + describe("allreduce", r);
    }
    plexus_comm_destroy(comm);
    return {};
  });
  EXPECT_EQ(failures(results), "");
}

// A rank that destroys its communicator fails only what needs it: the others' sends among
// themselves still complete (before, the ranks still finishing a sendrecv ring were failed
// by the one that finished first).
TEST_F(RobustnessTest, DestroyFailsOnlyOpsThatNeedTheDepartedRank) {
  auto results = run_ranks(socket(), 3, [](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    if (rank == 2) return plexus_comm_destroy(comm) == PLEXUS_SUCCESS ? "" : "destroy failed";
    constexpr size_t kCount = 4097;
    double* buf;
    if (auto r = plexus_alloc(reinterpret_cast<void**>(&buf), 2 * kCount * sizeof(double))) {
      return describe("alloc", r);
    }
    auto expect_peer_lost = [&](const char* what, plexus_result_t r) -> std::string {
      const std::string message = plexus_get_last_error();
      if (r != PLEXUS_ERR_PEER_LOST || message.find("rank 2") == std::string::npos ||
          message.find("destroyed it") == std::string::npos) {
        return std::string(what) + ": expected PEER_LOST naming rank 2's destroy, got " +
               describe(what, r);
      }
      return {};
    };
    for (int round = 0; round < 3; ++round) {
      fill_input(buf, PLEXUS_FLOAT64, PLEXUS_SUM, rank, kCount);
      plexus_result_t r = rank == 0
                              ? plexus_send(buf, kCount, PLEXUS_FLOAT64, 1, comm, nullptr)
                              : plexus_recv(buf + kCount, kCount, PLEXUS_FLOAT64, 0, comm, nullptr);
      if (r != PLEXUS_SUCCESS) return describe("send/recv between ranks 0 and 1", r);
      if (rank == 1) {
        std::string error = compare(buf + kCount, PLEXUS_FLOAT64, kCount, [](size_t j) {
          return input_bits(PLEXUS_FLOAT64, PLEXUS_SUM, 0, j);
        });
        if (!error.empty()) return error;
      }
    }
    std::string error = expect_peer_lost(
        "send to rank 2", plexus_send(buf, kCount, PLEXUS_FLOAT64, 2, comm, nullptr));
    if (!error.empty()) return error;
    error = expect_peer_lost(
        "allreduce", plexus_allreduce(buf, buf, kCount, PLEXUS_FLOAT64, PLEXUS_SUM, comm, nullptr));
    if (!error.empty()) return error;
    plexus_comm_destroy(comm);
    return {};
  });
  EXPECT_EQ(failures(results), "");
}

TEST(DaemonLifecycleTest, ClientsLearnTheDaemonWentAway) {
  DaemonProcess daemon;
  auto results = run_ranks(
      daemon.socket_path(), 2,
      [](int rank, int n, const auto& id) -> std::string {
        plexus_comm_t comm;
        if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(30));  // never joins the op
          return {};
        }
        float* buf;
        plexus_alloc(reinterpret_cast<void**>(&buf), 1024);
        plexus_result_t r =
            plexus_allreduce(buf, buf, 16, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
        if (r != PLEXUS_ERR_DAEMON_LOST)
          return "expected DAEMON_LOST, got " + describe("allreduce", r);
        return {};
      },
      std::chrono::seconds(20),
      [&](const auto& pids) {
        std::this_thread::sleep_for(std::chrono::milliseconds(800));
        daemon.kill_now();
        ::kill(pids[1], SIGKILL);
      });
  EXPECT_TRUE(results[0].ok) << results[0].message;
}

TEST(DaemonLifecycleTest, NoDaemonIsAClearErrorNamingTheSocket) {
  auto results = run_ranks(
      "/tmp/plexus-test-no-such-dir/plexusd.sock", 1, [](int, int, const auto& id) -> std::string {
        ::setenv("PLEXUS_CONNECT_TIMEOUT_MS", "0", 1);
        plexus_comm_t comm;
        plexus_result_t r = plexus_comm_init_rank(&comm, 1, id, 0);
        const std::string message = plexus_get_last_error();
        if (r != PLEXUS_ERR_DAEMON_UNAVAILABLE ||
            message.find("/tmp/plexus-test-no-such-dir/plexusd.sock") == std::string::npos) {
          return "got " + describe("init", r);
        }
        return {};
      });
  EXPECT_EQ(failures(results), "");
}

}  // namespace
}  // namespace plexus::test
