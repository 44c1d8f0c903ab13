// Runs a function as N forked rank processes and collects each one's verdict. A rank
// reports failure by returning a non-empty sentence; a crash, an exit by signal or a
// hang past the timeout is reported for it too, so a test never hangs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "plexus/plexus.h"

namespace plexus::test {

struct RankResult {
  bool ok = false;
  std::string message;  // the rank's sentence, or how it died
  pid_t pid = 0;
};

using RankBody = std::function<std::string(int rank, int nranks, const plexus_unique_id_t& id)>;

// Forks nranks processes with PLEXUS_SOCKET=socket_path, each running body. `on_started`
// runs in the parent after the fork with the children's pids (e.g. to kill one).
std::vector<RankResult> run_ranks(
    const std::string& socket_path, int nranks, const RankBody& body,
    std::chrono::milliseconds timeout = std::chrono::seconds(120),
    const std::function<void(const std::vector<pid_t>&)>& on_started = {});

// Ranks on several daemons (one per simulated node): rank r talks to rank_sockets[r];
// the unique id is made against rank 0's daemon, which is therefore the root.
std::vector<RankResult> run_ranks_across(
    const std::vector<std::string>& rank_sockets, const RankBody& body,
    std::chrono::milliseconds timeout = std::chrono::seconds(120),
    const std::function<void(const std::vector<pid_t>&)>& on_started = {});

std::vector<RankResult> run_ranks_with_id(
    const std::vector<std::string>& rank_sockets, const plexus_unique_id_t& id,
    const RankBody& body, std::chrono::milliseconds timeout,
    const std::function<void(const std::vector<pid_t>&)>& on_started);

// "rank 1: <message>; rank 3: <message>" for the ranks that failed; "" if none.
std::string failures(const std::vector<RankResult>& results);

// A rank body's sentence for a failed call: "allreduce: peer lost: <the last error>".
std::string describe(const char* call, plexus_result_t result);

}  // namespace plexus::test
