// Collectives on GPU buffers against a real plexusd, 2 to 4 client processes sharing the
// first GPU: every collective and dtype, in place and out of place, exact; a freed buffer
// reused; a span past its allocation; a client killed while the daemon holds its handles.
// Each test skips, saying why, where there is no usable GPU.
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "shm/cuda_driver.h"
#include "tests/gpu/gpu_rank.h"
#include "tests/integration/collective_cases.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_processes.h"
#include "tests/integration/test_data.h"

namespace plexus::test {
namespace {

using ::testing::HasSubstr;

#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    const std::string why = gpu_unavailable_reason();                            \
    if (!why.empty()) GTEST_SKIP() << "needs a GPU with a CUDA driver: " << why; \
  } while (0)

std::vector<Case> every_case(int nranks) {
  std::vector<Case> cases;
  const plexus_dtype_t dtypes[] = {PLEXUS_INT8,    PLEXUS_UINT8,  PLEXUS_INT32,   PLEXUS_UINT32,
                                   PLEXUS_INT64,   PLEXUS_UINT64, PLEXUS_FLOAT16, PLEXUS_BFLOAT16,
                                   PLEXUS_FLOAT32, PLEXUS_FLOAT64};
  for (const char* collective :
       {"allreduce", "reduce", "reducescatter", "broadcast", "allgather", "alltoall", "sendrecv"}) {
    for (plexus_dtype_t dtype : dtypes) {
      for (bool in_place : {false, true}) {
        if (in_place && std::string(collective) == "sendrecv") continue;
        for (size_t count : {size_t{7}, size_t{(1 << 18) + 3}}) {
          const plexus_redop_t op =
              std::string(collective) == "allreduce" && count == 7 ? PLEXUS_MAX : PLEXUS_SUM;
          cases.push_back(Case{collective, dtype, op, count, in_place, nranks - 1});
        }
      }
    }
  }
  return cases;
}

// "" when `out` is the float sum of the test inputs of ranks `first` and `first + 1`.
std::string expect_sum_of_two(const std::vector<float>& out, int first, int round) {
  std::vector<float> a(out.size()), b(out.size());
  fill_input(a.data(), PLEXUS_FLOAT32, PLEXUS_SUM, first, out.size());
  fill_input(b.data(), PLEXUS_FLOAT32, PLEXUS_SUM, first + 1, out.size());
  for (size_t j = 0; j < out.size(); ++j) {
    if (out[j] != a[j] + b[j]) {
      return "round " + std::to_string(round) + ": element " + std::to_string(j) + " is " +
             std::to_string(out[j]) + ", expected " + std::to_string(a[j] + b[j]);
    }
  }
  return {};
}

// One in-place float allreduce of `count` elements on `device` by two ranks, checked
// exactly: rank r's input is the test input of r + 10 * round. "" or what went wrong.
std::string checked_allreduce(RankGpu& gpu, std::byte* device, size_t count, int rank, int round,
                              plexus_comm_t comm) {
  std::vector<float> host(count);
  fill_input(host.data(), PLEXUS_FLOAT32, PLEXUS_SUM, rank + round * 10, count);
  std::string error =
      gpu.copy(device, reinterpret_cast<std::byte*>(host.data()), count * sizeof(float), true);
  if (!error.empty()) return error;
  if (auto r = plexus_allreduce(device, device, count, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr)) {
    return describe("allreduce", r);
  }
  error = gpu.copy(reinterpret_cast<std::byte*>(host.data()), device, count * sizeof(float), false);
  if (!error.empty()) return error;
  return expect_sum_of_two(host, round * 10, round);  // ranks 10r and 10r + 1
}

RankBody run_gpu_cases(const std::vector<Case>& cases) {
  return [cases](int rank, int n, const plexus_unique_id_t& id) -> std::string {
    RankGpu gpu;
    if (!gpu.error().empty()) return "GPU: " + gpu.error();
    size_t bytes = 0;
    for (const Case& c : cases) {
      bytes = std::max(bytes, static_cast<size_t>(n) * c.count * 8);
    }
    std::vector<std::byte> host_a(bytes);
    std::vector<std::byte> host_b(bytes);
    Buffers buffers = gpu.buffers(host_a.data(), host_b.data(), bytes);
    if (!gpu.error().empty()) return "GPU: " + gpu.error();
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    for (const Case& c : cases) {
      std::string error = run_case(c, rank, n, comm, buffers);
      if (!error.empty()) return error;
    }
    plexus_comm_destroy(comm);
    return "";
  };
}

TEST(GpuCollectivesTest, EveryCollectiveAndDtypeOnDeviceBuffersIsExactFromTwoToFourProcesses) {
  SKIP_WITHOUT_GPU();
  DaemonProcess daemon;
  for (int n : {2, 3, 4}) {
    auto results =
        run_ranks(daemon.socket_path(), n, run_gpu_cases(every_case(n)), std::chrono::seconds(300));
    EXPECT_EQ(failures(results), "") << n << " ranks\n" << daemon.log();
  }
}

// plexusd --gpu-reduce-kernel-bytes 1: every allreduce on device buffers is reduced by the
// daemon's own kernel, exactly as the host would (every dtype and op, 2 to 4 processes, in
// place and out of place); the log shows the kernel loaded and no op sent to the host.
TEST(GpuReduceKernelTest, EveryAllreduceDtypeAndOpOnTheDaemonsKernelIsExact) {
  SKIP_WITHOUT_GPU();
  DaemonProcess daemon({"--gpu-reduce-kernel-bytes", "1"});
  for (int n : {2, 3, 4}) {
    std::vector<Case> cases;
    for (int dtype = 0; dtype < PLEXUS_NUM_DTYPES; ++dtype) {
      for (int op = 0; op < PLEXUS_NUM_REDOPS; ++op) {
        for (bool in_place : {false, true}) {
          for (size_t count : {size_t{7}, size_t{(1 << 18) + 3}}) {
            cases.push_back(Case{"allreduce", static_cast<plexus_dtype_t>(dtype),
                                 static_cast<plexus_redop_t>(op), count, in_place, 0});
          }
        }
      }
    }
    auto results =
        run_ranks(daemon.socket_path(), n, run_gpu_cases(cases), std::chrono::seconds(300));
    EXPECT_EQ(failures(results), "") << n << " ranks\n" << daemon.log();
  }
  EXPECT_THAT(daemon.log(), HasSubstr("the daemon's reduction kernels loaded"));
  EXPECT_THAT(daemon.log(), ::testing::Not(HasSubstr("not reduced on the GPU")));
}

TEST(GpuBuffersTest, AFreedBufferReusedIsRegisteredAfreshAndSpansPastTheEndAreRefused) {
  SKIP_WITHOUT_GPU();
  DaemonProcess daemon;
  auto results = run_ranks(
      daemon.socket_path(), 2, [](int rank, int n, const plexus_unique_id_t& id) -> std::string {
        RankGpu gpu;
        if (!gpu.error().empty()) return "GPU: " + gpu.error();
        plexus_comm_t comm;
        if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
        constexpr size_t kCount = 1 << 18;
        for (int round = 0; round < 3; ++round) {
          std::byte* device = gpu.allocate(kCount * sizeof(float));
          if (device == nullptr) return "GPU: " + gpu.error();
          if (std::string error = checked_allreduce(gpu, device, kCount, rank, round, comm);
              !error.empty()) {
            return error;
          }
          if (round == 2) {
            // One element past the allocation: refused before anything is sent.
            plexus_result_t r = plexus_allreduce(device, device, kCount + 1, PLEXUS_FLOAT32,
                                                 PLEXUS_SUM, comm, nullptr);
            if (r != PLEXUS_ERR_INVALID_ARGUMENT ||
                std::string(plexus_get_last_error()).find("run past the end") ==
                    std::string::npos) {
              return std::string("a span past the allocation: ") + plexus_get_last_error();
            }
            if (plexus_gpu_forget(device + 64) != PLEXUS_SUCCESS)
              return std::string("plexus_gpu_forget: ") + plexus_get_last_error();
            if (plexus_gpu_forget(device) != PLEXUS_ERR_INVALID_ARGUMENT) return "forgot twice";
          }
          gpu.free(device);  // the next round's allocation will likely take its addresses
        }
        plexus_comm_destroy(comm);
        return std::string();
      });
  EXPECT_EQ(failures(results), "") << daemon.log();
}

// cuMemCreate memory has no IPC handle: libplexus sends its POSIX file descriptor and
// plexusd imports and maps it. An allocation that did not ask for that handle type is
// refused naming what to ask for.
TEST(GpuBuffersTest, CuMemCreateAllocationsGoByTheirFileDescriptorOthersAreRefusedSayingWhy) {
  SKIP_WITHOUT_GPU();
  DaemonProcess daemon;
  auto results = run_ranks(
      daemon.socket_path(), 2, [](int rank, int n, const plexus_unique_id_t& id) -> std::string {
        RankGpu gpu;
        if (!gpu.error().empty()) return "GPU: " + gpu.error();
        plexus_comm_t comm;
        if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
        constexpr size_t kCount = (1 << 20) + 5;
        std::byte* device = gpu.allocate_vmm(kCount * sizeof(float), true);
        if (device == nullptr) return "GPU: " + gpu.error();
        for (int round = 0; round < 2; ++round) {  // the second from the cached registration
          if (std::string error = checked_allreduce(gpu, device, kCount, rank, round, comm);
              !error.empty()) {
            return "cuMemCreate memory: " + error;
          }
        }
        std::byte* private_memory = gpu.allocate_vmm(4096, false);
        if (private_memory == nullptr) return "GPU: " + gpu.error();
        const plexus_result_t r = plexus_allreduce(private_memory, private_memory, 16,
                                                   PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
        if (r != PLEXUS_ERR_INVALID_ARGUMENT ||
            std::string(plexus_get_last_error()).find("CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR") ==
                std::string::npos) {
          return describe("cuMemCreate without a shareable handle", r) + ": " +
                 plexus_get_last_error();
        }
        plexus_comm_destroy(comm);
        return std::string();
      });
  EXPECT_EQ(failures(results), "") << daemon.log();
}

TEST(GpuBuffersTest, AClientKilledWhileTheDaemonHoldsItsHandlesDisturbsNoOneElse) {
  SKIP_WITHOUT_GPU();
  DaemonProcess daemon;
  constexpr size_t kCount = 1 << 20;
  auto body = [](int rank, int n, const plexus_unique_id_t& id) -> std::string {
    RankGpu gpu;
    if (!gpu.error().empty()) return "GPU: " + gpu.error();
    std::byte* device = gpu.allocate(kCount * sizeof(float));
    if (device == nullptr) return "GPU: " + gpu.error();
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    if (auto r =
            plexus_allreduce(device, device, kCount, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr)) {
      return describe("first allreduce", r);
    }
    if (rank == 2) {
      std::this_thread::sleep_for(std::chrono::seconds(60));  // killed here, handles registered
      return std::string("rank 2 was not killed");
    }
    plexus_result_t r =
        plexus_allreduce(device, device, kCount, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
    if (r != PLEXUS_ERR_PEER_LOST) return describe("second allreduce (expected peer lost)", r);
    if (std::string(plexus_get_last_error()).find("rank 2") == std::string::npos) {
      return std::string("the error does not name rank 2: ") + plexus_get_last_error();
    }
    plexus_comm_destroy(comm);
    return std::string();
  };
  auto results = run_ranks(daemon.socket_path(), 3, body, std::chrono::seconds(60),
                           [](const std::vector<pid_t>& pids) {
                             std::this_thread::sleep_for(std::chrono::seconds(3));
                             ::kill(pids[2], SIGKILL);
                           });
  EXPECT_TRUE(results[0].ok) << results[0].message;
  EXPECT_TRUE(results[1].ok) << results[1].message;
  EXPECT_FALSE(results[2].ok);
  // The daemon serves a new job on the same GPU, exactly.
  auto after =
      run_ranks(daemon.socket_path(), 2,
                run_gpu_cases({Case{"allreduce", PLEXUS_FLOAT32, PLEXUS_SUM, 4097, false, 0}}));
  EXPECT_EQ(failures(after), "") << daemon.log();
  EXPECT_TRUE(daemon.alive());
}

TEST(GpuBuffersTest, AGpuBufferBesideAHostBufferOutsideThePoolIsRefusedClearly) {
  SKIP_WITHOUT_GPU();
  DaemonProcess daemon;
  auto results = run_ranks(
      daemon.socket_path(), 1, [](int rank, int n, const plexus_unique_id_t& id) -> std::string {
        RankGpu gpu;
        std::byte* device = gpu.allocate(4096);
        if (device == nullptr) return "GPU: " + gpu.error();
        plexus_comm_t comm;
        if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
        std::vector<float> heap(1024);
        plexus_result_t r =
            plexus_allreduce(device, heap.data(), 1024, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
        if (r != PLEXUS_ERR_INVALID_ARGUMENT ||
            std::string(plexus_get_last_error()).find("plexus_alloc") == std::string::npos) {
          return std::string("mixed buffers: ") + plexus_get_last_error();
        }
        plexus_comm_destroy(comm);
        return std::string();
      });
  EXPECT_EQ(failures(results), "") << daemon.log();
}

// Stream order: the inputs are copied to the device, reduced and copied back, all queued on
// one stream with no host wait in between; the host waits once, on the stream.
TEST(GpuStreamTest, AnAllreduceQueuedOnAStreamBetweenCopiesIsExactWithOneHostWait) {
  SKIP_WITHOUT_GPU();
  DaemonProcess daemon;
  auto results = run_ranks(
      daemon.socket_path(), 2, [](int rank, int n, const plexus_unique_id_t& id) -> std::string {
        RankGpu gpu;
        if (!gpu.error().empty()) return "GPU: " + gpu.error();
        const shm::CudaDriver* d = *shm::CudaDriver::get();
        CUstream stream = nullptr;
        if (auto e = d->check(d->stream_create(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
            !e.empty()) {
          return e;
        }
        constexpr size_t kCount = (1 << 20) + 5;
        std::byte* device = gpu.allocate(kCount * sizeof(float));
        if (device == nullptr) return "GPU: " + gpu.error();
        std::vector<float> in(kCount), out(kCount);
        plexus_comm_t comm;
        if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
        if (auto r = plexus_comm_set_stream(comm, stream)) return describe("set_stream", r);
        for (int round = 0; round < 4; ++round) {
          fill_input(in.data(), PLEXUS_FLOAT32, PLEXUS_SUM, rank + 2 * round, kCount);
          const auto dev = reinterpret_cast<CUdeviceptr>(device);
          d->memcpy_htod_async(dev, in.data(), kCount * sizeof(float), stream);
          if (auto r = plexus_allreduce(device, device, kCount, PLEXUS_FLOAT32, PLEXUS_SUM, comm,
                                        nullptr)) {
            return describe("allreduce on a stream", r);
          }
          d->memcpy_dtoh_async(out.data(), dev, kCount * sizeof(float), stream);
          if (auto e = d->check(d->stream_synchronize(stream), "cuStreamSynchronize"); !e.empty()) {
            return e;
          }
          if (std::string e = expect_sum_of_two(out, 2 * round, round); !e.empty()) return e;
        }
        plexus_comm_set_stream(comm, nullptr);
        plexus_comm_destroy(comm);
        d->stream_destroy(stream);
        return std::string();
      });
  EXPECT_EQ(failures(results), "") << daemon.log();
}

// plexusd killed while a stream waits on a stream-ordered call nobody waits for on the
// host: libplexus's watch of the daemon writes the done flag, so the stream goes on (the
// host was blocked in cuStreamSynchronize, making no call), and the next call says why.
TEST(GpuStreamTest, ADaemonKilledUnderAWaitingStreamLetsTheStreamGoAndSaysSo) {
  SKIP_WITHOUT_GPU();
  DaemonProcess daemon;
  auto results = run_ranks(
      daemon.socket_path(), 2,
      [](int rank, int n, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t comm;
        if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(30));  // never joins the op
          return {};
        }
        RankGpu gpu;
        if (!gpu.error().empty()) return "GPU: " + gpu.error();
        const shm::CudaDriver* d = *shm::CudaDriver::get();
        CUstream stream = nullptr;
        if (auto e = d->check(d->stream_create(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
            !e.empty()) {
          return e;
        }
        std::byte* device = gpu.allocate(1024 * sizeof(float));
        if (device == nullptr) return "GPU: " + gpu.error();
        if (auto r = plexus_comm_set_stream(comm, stream)) return describe("set_stream", r);
        if (auto r =
                plexus_allreduce(device, device, 1024, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr)) {
          return describe("allreduce on a stream", r);
        }
        // The daemon is killed while this waits (rank 1 never joined the op).
        const auto start = std::chrono::steady_clock::now();
        if (auto e = d->check(d->stream_synchronize(stream), "cuStreamSynchronize"); !e.empty()) {
          return e;
        }
        const auto waited = std::chrono::steady_clock::now() - start;
        if (waited > std::chrono::seconds(10)) return "the stream was held for over 10 s";
        const plexus_result_t r =
            plexus_allreduce(device, device, 1, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
        if (r != PLEXUS_ERR_DAEMON_LOST) {
          return "after the daemon died, expected DAEMON_LOST, got " + describe("allreduce", r);
        }
        return {};
      },
      std::chrono::seconds(40),
      [&](const auto& pids) {
        std::this_thread::sleep_for(std::chrono::seconds(2));
        daemon.kill_now();
        ::kill(pids[1], SIGKILL);
      });
  EXPECT_TRUE(results[0].ok) << results[0].message;
}

// Where there is no GPU, asking for stream order says why it cannot be had.
TEST(GpuStreamTest, WithoutACudaDriverStreamOrderIsRefusedSayingWhy) {
  const std::string why = gpu_unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "this machine has a GPU: the stream tests above cover it";
  DaemonProcess daemon;
  auto results = run_ranks(
      daemon.socket_path(), 1, [](int rank, int n, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t comm;
        if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
        int not_a_stream = 0;
        plexus_result_t r = plexus_comm_set_stream(comm, &not_a_stream);
        const std::string error = plexus_get_last_error();
        if (r != PLEXUS_ERR_INVALID_ARGUMENT || error.find("CUDA driver") == std::string::npos) {
          return "plexus_comm_set_stream without a driver: " + error;
        }
        // The communicator still works in host order.
        float x = 1;
        if (auto r2 = plexus_allreduce(&x, &x, 1, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr)) {
          return describe("allreduce", r2);
        }
        plexus_comm_destroy(comm);
        return std::string();
      });
  EXPECT_EQ(failures(results), "");
}

}  // namespace
}  // namespace plexus::test
