// Parking a communicator (plexus_comm_suspend, _resume) across two nodes (plexusd processes
// on loopback): the daemon releases the scratch it kept for it, ops on it are refused until
// it is resumed, and after resuming its collectives are exact again.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/integration/collective_cases.h"
#include "tests/integration/command_output.h"
#include "tests/integration/loopback_nodes.h"
#include "tests/integration/rank_processes.h"

namespace plexus::test {
namespace {

// An allreduce of `count` floats, each rank giving rank + 1: "" when every element is the sum.
std::string exact_allreduce(plexus_comm_t comm, int rank, int nranks, size_t count) {
  std::vector<float> data(count, static_cast<float>(rank + 1));
  plexus_request_t req = nullptr;
  if (std::string e = wait_for(
          plexus_allreduce(data.data(), data.data(), count, PLEXUS_FLOAT32, PLEXUS_SUM, comm, &req),
          &req, "allreduce");
      !e.empty()) {
    return e;
  }
  const auto want = static_cast<float>(nranks * (nranks + 1) / 2);
  for (size_t j = 0; j < count; ++j) {
    if (data[j] != want) return "allreduce element " + std::to_string(j) + " is wrong";
  }
  return "";
}

// An allgather of `count` floats from each rank, each giving rank + 1: "" when exact.
std::string exact_allgather(plexus_comm_t comm, int rank, int nranks, size_t count) {
  std::vector<float> in(count, static_cast<float>(rank + 1));
  std::vector<float> out(count * static_cast<size_t>(nranks));
  plexus_request_t req = nullptr;
  if (std::string e =
          wait_for(plexus_allgather(in.data(), out.data(), count, PLEXUS_FLOAT32, comm, &req), &req,
                   "allgather");
      !e.empty()) {
    return e;
  }
  for (size_t j = 0; j < out.size(); ++j) {
    if (out[j] != static_cast<float>(j / count + 1)) {
      return "allgather element " + std::to_string(j) + " is wrong";
    }
  }
  return "";
}

// "" when `plexusctl comms` on the daemon at `socket` shows a communicator in `state`.
std::string comms_show(const std::string& socket, const std::string& state) {
  const CommandOutput out = run_command({PLEXUSCTL_PATH, "--socket", socket, "comms"});
  if (out.out.find(" " + state + " ") != std::string::npos) return "";
  return "plexusctl comms does not show '" + state + "':\n" + out.out + out.err;
}

TEST(SuspendTest, ASuspendedCommunicatorReleasesItsScratchRefusesOpsAndWorksAfterResume) {
  auto nodes = start_nodes(2);
  const std::vector<std::string> sockets = sockets_for(nodes, {0, 1});
  auto results = run_ranks_across(
      sockets,
      [&](int rank, int nranks, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t comm = nullptr;
        if (plexus_result_t r = plexus_comm_init_rank(&comm, nranks, id, rank);
            r != PLEXUS_SUCCESS) {
          return call_failed("init", r);
        }
        // 4 MiB: the allgather between nodes gathers its slices in the communicator's scratch
        // (an allreduce of one rank per node works in the rank's own buffer).
        constexpr size_t kCount = size_t{1} << 20;
        if (std::string e = exact_allgather(comm, rank, nranks, kCount); !e.empty()) return e;
        uint64_t released = 0;
        if (plexus_comm_suspend(comm, 0x2, &released) != PLEXUS_ERR_INVALID_ARGUMENT) {
          return "flags 0x2 were accepted";
        }
        if (plexus_result_t r = plexus_comm_suspend(comm, PLEXUS_SUSPEND_MEM, &released);
            r != PLEXUS_SUCCESS) {
          return call_failed("plexus_comm_suspend", r);
        }
        // This node's only rank of the communicator: its scratch goes now.
        if (released == 0) return "suspending released no memory";
        const std::string& socket = sockets[static_cast<size_t>(rank)];
        if (std::string e = comms_show(socket, "suspended"); !e.empty()) return e;
        float one = 1;
        plexus_request_t req = nullptr;
        plexus_result_t r = plexus_allreduce(&one, &one, 1, PLEXUS_FLOAT32, PLEXUS_SUM, comm, &req);
        if (r != PLEXUS_ERR_INVALID_ARGUMENT ||
            std::string(plexus_get_last_error()).find("suspended") == std::string::npos) {
          return "an allreduce on a suspended communicator: " + describe("allreduce", r);
        }
        if (r = plexus_comm_resume(comm); r != PLEXUS_SUCCESS) {
          return call_failed("plexus_comm_resume", r);
        }
        if (std::string e = comms_show(socket, "ready"); !e.empty()) return "after resume: " + e;
        if (std::string e = exact_allgather(comm, rank, nranks, kCount); !e.empty()) {
          return "after resume: " + e;
        }
        if (std::string e = exact_allreduce(comm, rank, nranks, kCount); !e.empty()) {
          return "after resume: " + e;
        }
        return plexus_comm_destroy(comm) == PLEXUS_SUCCESS ? "" : "destroy failed";
      },
      std::chrono::seconds(60));
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

}  // namespace
}  // namespace plexus::test
