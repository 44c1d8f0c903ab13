#include "tools/plexus-bench/launcher.h"

#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/config.h"
#include "daemon/daemon.h"
#include "shm/framing.h"
#include "shm/unix_socket.h"
#include "tools/plexus-bench/atomic_file.h"
#include "tools/plexus-bench/bench_rank.h"
#include "tools/plexus-bench/self_timeout.h"
#include "tools/plexus-bench/unique_id_file.h"

namespace plexus::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A failed rank usually makes the others fail too (plexusd reports the lost peer); this is
// how long they get to do so before they are killed.
constexpr auto kFailureGrace = std::chrono::seconds(30);
constexpr auto kPollInterval = std::chrono::milliseconds(10);
constexpr auto kUniqueIdWait = std::chrono::seconds(60);
// libplexus retries connecting for PLEXUS_CONNECT_TIMEOUT_MS (1 s by default); the embedded
// daemon starts only after the ranks are forked, so give a loaded machine more slack.
constexpr const char* kEmbeddedConnectTimeoutMs = "10000";
constexpr int kExitInterrupted = 130;

std::atomic<int> g_interrupt_signal{0};

void note_interrupt(int signal_number) { g_interrupt_signal.store(signal_number); }

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = note_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

struct RankProcess {
  int rank = 0;
  pid_t pid = -1;
  bool exited = false;
  int wait_status = 0;
  std::string killed_because;  // set when plexus-bench killed it
};

bool exited_cleanly(int wait_status) {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == kExitOk;
}

void kill_running(std::vector<RankProcess>& ranks, const std::string& reason) {
  for (RankProcess& process : ranks) {
    if (process.exited) continue;
    kill(process.pid, SIGKILL);
    process.killed_because = reason;
  }
  for (RankProcess& process : ranks) {
    if (process.exited) continue;
    while (waitpid(process.pid, &process.wait_status, 0) < 0 && errno == EINTR) {
    }
    process.exited = true;
  }
}

enum class WaitEnd { kAllExited, kTimedOut, kInterrupted };

// Reaps the ranks as they finish, killing the rest on the deadline, on SIGINT/SIGTERM, or
// when they outlive a failed rank by kFailureGrace.
WaitEnd wait_for_ranks(std::vector<RankProcess>& ranks, Clock::time_point deadline, int timeout_s) {
  std::optional<Clock::time_point> first_failure;
  for (;;) {
    bool all_exited = true;
    for (RankProcess& process : ranks) {
      if (process.exited) continue;
      const pid_t reaped = waitpid(process.pid, &process.wait_status, WNOHANG);
      if (reaped == process.pid) {
        process.exited = true;
        if (!exited_cleanly(process.wait_status) && !first_failure) first_failure = Clock::now();
      } else if (reaped < 0 && errno != EINTR) {
        // Not ours to wait for any more (cannot happen unless SIGCHLD is ignored).
        process.exited = true;
        process.killed_because = std::string("waitpid failed: ") + std::strerror(errno);
        if (!first_failure) first_failure = Clock::now();
      } else {
        all_exited = false;
      }
    }
    if (all_exited) return WaitEnd::kAllExited;

    const Clock::time_point now = Clock::now();
    if (const int signal_number = g_interrupt_signal.load(); signal_number != 0) {
      kill_running(ranks, std::string("plexus-bench received ") + strsignal(signal_number));
      return WaitEnd::kInterrupted;
    }
    if (now >= deadline) {
      kill_running(ranks, "the run exceeded --timeout-s " + std::to_string(timeout_s));
      return WaitEnd::kTimedOut;
    }
    if (first_failure && now - *first_failure >= kFailureGrace) {
      kill_running(
          ranks, "still running " +
                     std::to_string(
                         std::chrono::duration_cast<std::chrono::seconds>(kFailureGrace).count()) +
                     " s after another rank failed");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

// Prints one line per rank that did not succeed; returns the run's exit status.
int report_ranks(const std::vector<RankProcess>& ranks, WaitEnd end, int timeout_s) {
  if (end == WaitEnd::kTimedOut) {
    std::fprintf(stderr,
                 "plexus-bench: timed out: the run took longer than --timeout-s %d; every rank "
                 "still running was killed\n",
                 timeout_s);
  }
  bool any_error = false;
  bool any_wrong = false;
  for (const RankProcess& process : ranks) {
    if (!process.killed_because.empty()) {
      std::fprintf(stderr, "plexus-bench: rank %d failed: killed because %s\n", process.rank,
                   process.killed_because.c_str());
      any_error = true;
    } else if (WIFEXITED(process.wait_status)) {
      const int code = WEXITSTATUS(process.wait_status);
      if (code == kExitOk) continue;
      if (code == kExitWrongResults) {
        std::fprintf(stderr,
                     "plexus-bench: rank %d failed: results were wrong (see the #wrong "
                     "column)\n",
                     process.rank);
        any_wrong = true;
      } else {
        std::fprintf(stderr,
                     "plexus-bench: rank %d failed: exit status %d (its error is printed "
                     "above)\n",
                     process.rank, code);
        any_error = true;
      }
    } else if (WIFSIGNALED(process.wait_status)) {
      const int signal_number = WTERMSIG(process.wait_status);
      std::fprintf(stderr, "plexus-bench: rank %d failed: killed by signal %d (%s)\n", process.rank,
                   signal_number, strsignal(signal_number));
      any_error = true;
    }
  }
  if (end == WaitEnd::kTimedOut) return kExitTimeout;
  if (end == WaitEnd::kInterrupted) return kExitInterrupted;
  if (any_error) return kExitError;
  return any_wrong ? kExitWrongResults : kExitOk;
}

// A fresh private directory for the embedded daemon's socket. $TMPDIR is used when short
// enough for a unix socket path (108 bytes), else /tmp.
std::string make_private_directory() {
  std::string base = "/tmp";
  if (const char* tmpdir = std::getenv("TMPDIR");
      tmpdir != nullptr && tmpdir[0] != '\0' && std::strlen(tmpdir) < 64) {
    base = tmpdir;
  }
  std::string path = base + "/plexus-bench-XXXXXX";
  if (mkdtemp(path.data()) == nullptr) {
    throw std::runtime_error("cannot create a directory for the embedded plexusd's socket (" +
                             path + "): " + std::strerror(errno));
  }
  return path;
}

// First thing in a forked rank: die with the parent, so a killed plexus-bench leaves no rank
// behind.
void become_rank_process(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kExitError);  // the parent died before prctl took effect
}

// The embedded daemon shares this process's stdout with rank 0's table: keep its log on
// stderr and to warnings.
void route_daemon_log_to_stderr() {
  // Not registered under a name, so this cannot clash with a logger the daemon registers.
  auto logger = std::make_shared<spdlog::logger>(
      "plexusd", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_pattern("plexusd (embedded) [%l] %v");
  spdlog::set_default_logger(std::move(logger));
  spdlog::set_level(spdlog::level::warn);
}

std::optional<int> parse_env_int(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || text[0] == '\0') return std::nullopt;
  int value = 0;
  const char* end = text + std::strlen(text);
  const auto [stop, error] = std::from_chars(text, end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

}  // namespace

int run_spawned(BenchOptions options) {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(options.timeout_s);
  // Across nodes this node's ranks are a slice of the whole.
  int nranks = options.spawn;
  int first_rank = 0;
  if (!options.ranks_per_node.empty()) {
    nranks = 0;
    for (size_t n = 0; n < options.ranks_per_node.size(); ++n) {
      if (static_cast<int>(n) < options.node) first_rank += options.ranks_per_node[n];
      nranks += options.ranks_per_node[n];
    }
  }
  if (const std::string problem = check_options_for_ranks(options, nranks); !problem.empty()) {
    std::fprintf(stderr, "plexus-bench: %s\n", problem.c_str());
    return kExitError;
  }
  if (!options.socket_path.empty() && !options.ranks_per_node.empty()) {
    setenv("PLEXUS_SOCKET", options.socket_path.c_str(), 1);  // the id names this daemon
  }
  plexus_unique_id_t unique_id{};
  try {
    if (options.ranks_per_node.empty() || options.node == 0) {
      if (plexus_get_unique_id(&unique_id) != PLEXUS_SUCCESS) {
        std::fprintf(stderr, "plexus-bench: plexus_get_unique_id failed: %s\n",
                     plexus_get_last_error());
        return kExitError;
      }
      if (!options.ranks_per_node.empty()) publish_unique_id(options.id_file, unique_id);
    } else {
      unique_id = wait_for_unique_id(
          options.id_file,
          std::min<Clock::duration>(kUniqueIdWait, std::chrono::seconds(options.timeout_s)));
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "plexus-bench: node %d: %s\n", options.node, error.what());
    return kExitError;
  }

  const std::string requested =
      options.socket_path.empty() ? shm::default_socket_path() : options.socket_path;
  std::string socket_path = requested;
  std::string private_directory;
  const bool embed = !shm::unix_socket_answers(requested);
  if (embed) {
    if (options.no_embedded) {
      std::fprintf(stderr,
                   "plexus-bench: no plexusd answers on %s (and --no-embedded forbids starting "
                   "one)\n",
                   requested.c_str());
      return kExitError;
    }
    try {
      private_directory = make_private_directory();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "plexus-bench: %s\n", error.what());
      return kExitError;
    }
    socket_path = private_directory + "/plexusd.sock";
    setenv("PLEXUS_CONNECT_TIMEOUT_MS", kEmbeddedConnectTimeoutMs, /*overwrite=*/0);
  }
  // The ranks find the daemon through the environment they inherit.
  setenv("PLEXUS_SOCKET", socket_path.c_str(), /*overwrite=*/1);
  options.daemon_description = (embed ? "embedded plexusd on " : "plexusd on ") + socket_path;
  if (first_rank == 0) std::printf("# using %s\n", options.daemon_description.c_str());
  // Anything still buffered would be printed again by every child.
  std::fflush(stdout);
  std::fflush(stderr);

  auto remove_private_directory = [&private_directory] {
    if (private_directory.empty()) return;
    std::error_code ignored;
    std::filesystem::remove_all(private_directory, ignored);
  };

  // Fork before this process has any thread (the embedded daemon's come after): a child of
  // a threaded parent may only call async-signal-safe functions.
  std::vector<RankProcess> ranks;
  const pid_t parent = getpid();
  for (int rank = first_rank; rank < first_rank + options.spawn; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      become_rank_process(parent);
      RankIdentity identity;
      identity.rank = rank;
      identity.nranks = nranks;
      identity.unique_id = unique_id;
      const int status = run_rank(options, identity);
      std::fflush(stdout);
      std::fflush(stderr);
      // Skip this process image's static destructors: they belong to the parent's state.
      _exit(status);
    }
    if (pid < 0) {
      std::fprintf(stderr, "plexus-bench: fork for rank %d failed: %s\n", rank,
                   std::strerror(errno));
      kill_running(ranks, "plexus-bench could not fork every rank");
      report_ranks(ranks, WaitEnd::kAllExited, options.timeout_s);
      remove_private_directory();
      return kExitError;
    }
    RankProcess process;
    process.rank = rank;
    process.pid = pid;
    ranks.push_back(process);
  }
  install_interrupt_handlers();

  std::unique_ptr<daemon::Daemon> embedded;
  if (embed) {
    try {
      route_daemon_log_to_stderr();
      daemon::Config config;
      config.socket_path = socket_path;
      config.log_level = "warn";
      config.metrics = common::OnOff::kOff;  // a private daemon for one run: nothing scrapes it
      embedded = std::make_unique<daemon::Daemon>(std::move(config));
      embedded->start();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "plexus-bench: cannot start the embedded plexusd on %s: %s\n",
                   socket_path.c_str(), error.what());
      kill_running(ranks, "the embedded plexusd did not start");
      embedded.reset();
      remove_private_directory();
      return kExitError;
    }
  }

  const WaitEnd end = wait_for_ranks(ranks, deadline, options.timeout_s);
  if (embedded) {
    embedded->stop();
    embedded.reset();
  }
  remove_private_directory();
  return report_ranks(ranks, end, options.timeout_s);
}

int run_from_environment(BenchOptions options) {
  const std::optional<int> rank = parse_env_int("PLEXUS_RANK");
  const std::optional<int> nranks = parse_env_int("PLEXUS_NRANKS");
  const char* id_file = std::getenv("PLEXUS_UNIQUE_ID_FILE");
  if (!rank || !nranks || *nranks < 1 || *rank < 0 || *rank >= *nranks) {
    std::fprintf(stderr,
                 "plexus-bench: without --spawn, run one plexus-bench per rank with PLEXUS_RANK "
                 "(0..n-1), PLEXUS_NRANKS (n) and PLEXUS_UNIQUE_ID_FILE set (or pass --spawn N "
                 "to start the ranks here)\n");
    return kExitError;
  }
  // Without --spawn nothing watches this process from outside, so it bounds itself.
  arm_self_timeout("plexus-bench: rank " + std::to_string(*rank) +
                       ": timed out: the run took longer than --timeout-s " +
                       std::to_string(options.timeout_s),
                   static_cast<unsigned>(options.timeout_s));
  if (const std::string problem = check_options_for_ranks(options, *nranks); !problem.empty()) {
    std::fprintf(stderr, "plexus-bench: rank %d: %s\n", *rank, problem.c_str());
    return kExitError;
  }
  const bool has_id_file = id_file != nullptr && id_file[0] != '\0';
  if (*nranks > 1 && !has_id_file) {
    std::fprintf(stderr,
                 "plexus-bench: rank %d: PLEXUS_UNIQUE_ID_FILE is not set; the ranks need it to "
                 "share the communicator's id\n",
                 *rank);
    return kExitError;
  }
  if (!options.socket_path.empty()) setenv("PLEXUS_SOCKET", options.socket_path.c_str(), 1);
  options.daemon_description = "plexusd on " + shm::default_socket_path();
  if (*rank == 0) {
    std::printf("# using %s\n", options.daemon_description.c_str());
    std::fflush(stdout);
  }

  RankIdentity identity;
  identity.rank = *rank;
  identity.nranks = *nranks;
  try {
    if (*rank == 0) {
      if (plexus_get_unique_id(&identity.unique_id) != PLEXUS_SUCCESS) {
        std::fprintf(stderr, "plexus-bench: rank 0: plexus_get_unique_id failed: %s\n",
                     plexus_get_last_error());
        return kExitError;
      }
      if (has_id_file) publish_unique_id(id_file, identity.unique_id);
    } else {
      identity.unique_id = wait_for_unique_id(
          id_file,
          std::min<Clock::duration>(kUniqueIdWait, std::chrono::seconds(options.timeout_s)));
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "plexus-bench: rank %d: %s\n", *rank, error.what());
    return kExitError;
  }
  return run_rank(options, identity);
}

}  // namespace plexus::bench
