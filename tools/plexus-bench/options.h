// plexus-bench's command line: nccl-tests' flag names where nccl-tests has the flag, plus
// the options for starting ranks and a daemon.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "plexus/plexus.h"
#include "tools/plexus-bench/bench_math.h"

namespace plexus::bench {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitWrongResults = 2;
inline constexpr int kExitTimeout = 124;  // as timeout(1)

struct BenchOptions {
  std::vector<Collective> collectives;
  std::string collective_text = "allreduce";
  uint64_t min_bytes = 8;
  uint64_t max_bytes = uint64_t{64} << 20;
  uint64_t step_factor = 2;
  uint64_t step_bytes = 0;  // 0: grow by step_factor
  int iters = 20;
  int warmup_iters = 5;
  int check_iters = 1;
  std::vector<plexus_dtype_t> dtypes;
  std::string dtype_text = "float";
  std::vector<plexus_redop_t> ops;
  std::string op_text = "sum";
  std::optional<int> root = 0;  // nullopt: every rank in turn (-r all)
  std::string root_text = "0";
  std::string json_path;
  std::string device = "host";  // host: plexus_alloc buffers; cuda: GPU buffers
  TimeStat stat = TimeStat::kMean;
  int spawn = 0;  // 0: this process is one rank of a job started by the user
  // Across nodes: ranks per node (node i holds the next ranks_per_node[i] ranks), which
  // node this is, and the file the nodes share the communicator id through.
  std::vector<int> ranks_per_node;
  int node = 0;
  std::string id_file;
  std::string socket_path;
  bool no_embedded = false;
  int timeout_s = 600;

  std::vector<std::string> args;   // the command line, recorded in the JSON file
  std::string daemon_description;  // which plexusd serves the run, filled in by the launcher
};

// Parses the command line. Returns the options, or the exit status to stop with right away
// (0 after --help; non-zero after a usage error, already printed).
std::variant<BenchOptions, int> parse_options(int argc, char** argv);

// What can only be checked once the rank count is known (the root). Returns a sentence
// describing the problem, or an empty string.
std::string check_options_for_ranks(const BenchOptions& options, int nranks);

}  // namespace plexus::bench
