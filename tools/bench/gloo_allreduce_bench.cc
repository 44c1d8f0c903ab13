// Gloo allreduce peer benchmark: the same float-sum sweep and nccl-tests table as plexus-bench,
// run over Gloo's TCP transport on loopback. The program forks its own ranks and rendezvouses
// them through a FileStore in a private temporary directory, so it needs no launcher.
#include <gloo/allreduce.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "peer_bench_common.h"

namespace {

using plexus::peer_bench::Communicator;
using plexus::peer_bench::SweepOptions;

// Distinct tags keep the benchmark's own helper reductions apart from the measured allreduce.
constexpr std::uint32_t kMeasuredAllreduceTag = 1;
constexpr std::uint32_t kMaxTag = 2;
constexpr std::uint32_t kSumTag = 3;

template <typename T>
void sum_elements(void* output, const void* lhs, const void* rhs, std::size_t count) {
  auto* out = static_cast<T*>(output);
  const auto* a = static_cast<const T*>(lhs);
  const auto* b = static_cast<const T*>(rhs);
  for (std::size_t index = 0; index < count; ++index) out[index] = a[index] + b[index];
}

void max_doubles(void* output, const void* lhs, const void* rhs, std::size_t count) {
  auto* out = static_cast<double*>(output);
  const auto* a = static_cast<const double*>(lhs);
  const auto* b = static_cast<const double*>(rhs);
  for (std::size_t index = 0; index < count; ++index)
    out[index] = a[index] > b[index] ? a[index] : b[index];
}

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(std::shared_ptr<gloo::Context> context)
      : context_(std::move(context)) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  void allreduce_sum_out_of_place(const float* input, float* output, std::size_t count) override {
    gloo::allreduce(options_for(input, output, count));
  }

  void allreduce_sum_in_place(float* data, std::size_t count) override {
    gloo::allreduce(options_for(nullptr, data, count));
  }

  double max_across_ranks(double value) override {
    gloo::AllreduceOptions options(context_);
    options.setOutput(&value, 1);
    options.setReduceFunction(&max_doubles);
    options.setTag(kMaxTag);
    gloo::allreduce(options);
    return value;
  }

  std::int64_t sum_across_ranks(std::int64_t value) override {
    gloo::AllreduceOptions options(context_);
    options.setOutput(&value, 1);
    options.setReduceFunction(&sum_elements<std::int64_t>);
    options.setTag(kSumTag);
    gloo::allreduce(options);
    return value;
  }

 private:
  struct CachedOptions {
    const float* input;
    float* output;
    std::size_t count;
    std::unique_ptr<gloo::AllreduceOptions> options;
  };

  // Options are built once per buffer pair and reused by every iteration, so the timed loop
  // measures the collective rather than Gloo's per-call buffer bookkeeping. A null input means
  // in place: Gloo then reduces the output buffer's own contents.
  gloo::AllreduceOptions& options_for(const float* input, float* output, std::size_t count) {
    for (CachedOptions& cached : cache_) {
      if (cached.input == input && cached.output == output && cached.count == count) {
        return *cached.options;
      }
    }
    if (cache_.size() >= kMaxCachedOptions) cache_.clear();
    auto options = std::make_unique<gloo::AllreduceOptions>(context_);
    options->setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    // Gloo takes non-const input pointers but only reads them.
    if (input != nullptr) options->setInput(const_cast<float*>(input), count);
    options->setOutput(output, count);
    options->setReduceFunction(&sum_elements<float>);
    options->setTag(kMeasuredAllreduceTag);
    cache_.push_back(CachedOptions{input, output, count, std::move(options)});
    return *cache_.back().options;
  }

  // The sweep only ever uses two buffer pairs per size (out-of-place and in-place).
  static constexpr std::size_t kMaxCachedOptions = 4;

  std::shared_ptr<gloo::Context> context_;
  std::vector<CachedOptions> cache_;
};

int run_rank(int rank, const SweepOptions& options, const std::string& store_directory) {
  // Loopback unless a node address is given (the namespace cluster's benchmarks).
  gloo::transport::tcp::attr device_attributes;
  device_attributes.hostname = options.hostname;
  device_attributes.ai_family = AF_INET;
  std::shared_ptr<gloo::transport::Device> device =
      gloo::transport::tcp::CreateDevice(device_attributes);

  gloo::rendezvous::FileStore store(store_directory);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, options.world);
  context->setTimeout(std::chrono::seconds(options.timeout_seconds));
  context->connectFullMesh(store, device);

  GlooCommunicator communicator(context);
  const std::string description =
      "gloo_allreduce_bench: gloo::allreduce (ring) float sum, tcp " + options.hostname +
      ", Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
      "." + std::to_string(GLOO_VERSION_PATCH);
  return plexus::peer_bench::run_allreduce_sweep(communicator, options, description.c_str());
}

[[noreturn]] void child_main(int rank, const SweepOptions& options,
                             const std::string& store_directory, pid_t parent_pid) {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  // Die with the parent (e.g. when `timeout` kills it) instead of lingering as orphans.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent_pid) _exit(EXIT_FAILURE);
  alarm(static_cast<unsigned>(options.timeout_seconds));

  int exit_status = EXIT_FAILURE;
  try {
    exit_status = run_rank(rank, options, store_directory);
  } catch (const std::exception& exception) {
    std::fprintf(stderr, "gloo_allreduce_bench: rank %d: %s\n", rank, exception.what());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // _exit: the parent's atexit handlers and stdio buffers belong to the parent.
  _exit(exit_status);
}

volatile std::sig_atomic_t stop_signal = 0;

void request_stop(int signal_number) { stop_signal = signal_number; }

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int signal_number = WTERMSIG(status);
    return "was killed by signal " + std::to_string(signal_number) + " (" +
           strsignal(signal_number) + (signal_number == SIGALRM ? ", timeout" : "") + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

// Waits for every rank. The first failure, a signal to the parent, or the deadline stops the
// remaining ranks, so one broken rank cannot leave the others blocked in a collective.
bool wait_for_ranks(std::vector<pid_t>& rank_pids, std::chrono::steady_clock::time_point deadline) {
  bool all_succeeded = true;
  bool stopping = false;
  std::size_t running = rank_pids.size();
  const auto stop_remaining = [&](const std::string& reason) {
    if (stopping) return;
    stopping = true;
    all_succeeded = false;
    std::fprintf(stderr, "gloo_allreduce_bench: %s; stopping the remaining ranks\n",
                 reason.c_str());
    for (const pid_t pid : rank_pids) {
      if (pid > 0) kill(pid, SIGKILL);
    }
  };

  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (std::size_t rank = 0; rank < rank_pids.size(); ++rank) {
        if (rank_pids[rank] != pid) continue;
        rank_pids[rank] = -1;
        --running;
        const bool succeeded = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!succeeded && !stopping) {
          stop_remaining("rank " + std::to_string(rank) + " " + describe_status(status));
        }
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) {
      stop_remaining(std::string("waitpid failed: ") + std::strerror(errno));
      break;
    }
    if (stop_signal != 0) {
      stop_remaining("received signal " + std::to_string(stop_signal));
    } else if (std::chrono::steady_clock::now() > deadline) {
      stop_remaining("timed out");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return all_succeeded;
}

}  // namespace

int main(int argc, char** argv) {
  std::string error;
  const auto options =
      plexus::peer_bench::parse_sweep_options(argc, argv, /*with_ranks=*/true, error);
  if (!options) {
    if (!error.empty()) std::fprintf(stderr, "gloo_allreduce_bench: %s\n", error.c_str());
    std::fputs(plexus::peer_bench::usage_text("gloo_allreduce_bench", true).c_str(),
               error.empty() ? stdout : stderr);
    return error.empty() ? 0 : 2;
  }

  // A fresh directory per run, so stale keys from an earlier (crashed) run cannot be read.
  std::error_code filesystem_error;
  std::string store_template =
      (std::filesystem::temp_directory_path(filesystem_error) / "plexus-gloo-bench-XXXXXX")
          .string();
  if (filesystem_error) store_template = "/tmp/plexus-gloo-bench-XXXXXX";
  if (mkdtemp(store_template.data()) == nullptr) {
    std::fprintf(stderr, "gloo_allreduce_bench: mkdtemp %s: %s\n", store_template.c_str(),
                 std::strerror(errno));
    return 1;
  }
  std::string store_directory = store_template;
  if (!options->store_directory.empty()) {
    std::filesystem::remove(store_template);
    store_directory = options->store_directory;
  }

  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  std::signal(SIGHUP, request_stop);
  // The parent stops the ranks slightly after their own alarm() would have fired.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(options->timeout_seconds) + std::chrono::seconds(5);

  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent_pid = getpid();
  std::vector<pid_t> rank_pids;
  bool fork_failed = false;
  for (int rank = options->first_rank; rank < options->first_rank + options->ranks; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) child_main(rank, *options, store_directory, parent_pid);
    if (pid < 0) {
      std::fprintf(stderr, "gloo_allreduce_bench: fork: %s\n", std::strerror(errno));
      fork_failed = true;
      for (const pid_t started : rank_pids) kill(started, SIGKILL);
      break;
    }
    rank_pids.push_back(pid);
  }

  const bool ranks_succeeded = wait_for_ranks(rank_pids, deadline);
  if (options->store_directory.empty())
    std::filesystem::remove_all(store_directory, filesystem_error);
  if (filesystem_error) {
    std::fprintf(stderr, "gloo_allreduce_bench: could not remove %s: %s\n", store_directory.c_str(),
                 filesystem_error.message().c_str());
  }
  return ranks_succeeded && !fork_failed ? 0 : 1;
}
