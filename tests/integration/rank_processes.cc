#include "tests/integration/rank_processes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <exception>

namespace plexus::test {

std::vector<RankResult> run_ranks(
    const std::string& socket_path, int nranks, const RankBody& body,
    std::chrono::milliseconds timeout,
    const std::function<void(const std::vector<pid_t>&)>& on_started) {
  // The id from the test's own daemon, not whichever one answers on the default socket.
  return run_ranks_across(std::vector<std::string>(static_cast<size_t>(nranks), socket_path), body,
                          timeout, on_started);
}

std::vector<RankResult> run_ranks_across(
    const std::vector<std::string>& rank_sockets, const RankBody& body,
    std::chrono::milliseconds timeout,
    const std::function<void(const std::vector<pid_t>&)>& on_started) {
  // The id names rank 0's daemon as the root, as plexus_get_unique_id on its node would.
  // The test runs its own daemons: none may be started for it on the way.
  ::setenv("PLEXUS_AUTOSTART", "0", 0);
  const char* before = std::getenv("PLEXUS_SOCKET");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("PLEXUS_SOCKET", rank_sockets.at(0).c_str(), 1);
  plexus_unique_id_t id;
  plexus_get_unique_id(&id);
  if (before != nullptr) {
    ::setenv("PLEXUS_SOCKET", saved.c_str(), 1);
  } else {
    ::unsetenv("PLEXUS_SOCKET");
  }
  return run_ranks_with_id(rank_sockets, id, body, timeout, on_started);
}

std::vector<RankResult> run_ranks_with_id(
    const std::vector<std::string>& rank_sockets, const plexus_unique_id_t& id,
    const RankBody& body, std::chrono::milliseconds timeout,
    const std::function<void(const std::vector<pid_t>&)>& on_started) {
  const int nranks = static_cast<int>(rank_sockets.size());
  std::vector<pid_t> pids(static_cast<size_t>(nranks));
  std::vector<int> pipes(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) std::abort();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      ::setenv("PLEXUS_SOCKET", rank_sockets[static_cast<size_t>(r)].c_str(), 1);
      // The test runs its own daemons: one it killed on purpose must not be replaced by
      // libplexus starting another (unless the test asked for that itself).
      ::setenv("PLEXUS_AUTOSTART", "0", 0);
      std::string verdict;
      try {
        verdict = body(r, nranks, id);
      } catch (const std::exception& e) {
        verdict = std::string("exception: ") + e.what();
      }
      const std::string line = (verdict.empty() ? "OK" : "FAIL " + verdict);
      [[maybe_unused]] ssize_t n = ::write(fds[1], line.data(), line.size());
      ::_exit(verdict.empty() ? 0 : 1);
    }
    ::close(fds[1]);
    pids[static_cast<size_t>(r)] = pid;
    pipes[static_cast<size_t>(r)] = fds[0];
  }
  if (on_started) on_started(pids);

  std::vector<RankResult> results(static_cast<size_t>(nranks));
  std::vector<std::string> output(static_cast<size_t>(nranks));
  std::vector<bool> open(static_cast<size_t>(nranks), true);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int still_open = nranks;
  while (still_open > 0 && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t r = 0; r < pipes.size(); ++r) {
      if (open[r]) {
        fds.push_back({pipes[r], POLLIN, 0});
        which.push_back(r);
      }
    }
    if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char buffer[4096];
      ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        output[which[i]].append(buffer, static_cast<size_t>(n));
      } else {
        open[which[i]] = false;
        --still_open;
      }
    }
  }
  for (size_t r = 0; r < pids.size(); ++r) {
    RankResult& result = results[r];
    result.pid = pids[r];
    if (open[r]) {
      ::kill(pids[r], SIGKILL);
      result.message = "hung: no verdict within " + std::to_string(timeout.count()) + " ms";
    }
    int status = 0;
    ::waitpid(pids[r], &status, 0);
    ::close(pipes[r]);
    if (!result.message.empty()) continue;
    if (output[r] == "OK") {
      result.ok = true;
    } else if (output[r].rfind("FAIL ", 0) == 0) {
      result.message = output[r].substr(5);
    } else if (WIFSIGNALED(status)) {
      result.message = std::string("killed by signal ") + strsignal(WTERMSIG(status));
    } else {
      result.message =
          "exited with status " + std::to_string(WEXITSTATUS(status)) + " and no verdict";
    }
  }
  return results;
}

std::string failures(const std::vector<RankResult>& results) {
  std::string text;
  for (size_t r = 0; r < results.size(); ++r) {
    if (results[r].ok) continue;
    if (!text.empty()) text += "; ";
    text += "rank " + std::to_string(r) + ": " + results[r].message;
  }
  return text;
}

std::string describe(const char* call, plexus_result_t result) {
  return std::string(call) + ": " + plexus_result_string(result) + ": " + plexus_get_last_error();
}

}  // namespace plexus::test
