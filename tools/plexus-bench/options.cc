// GCC 12 at -O2 reports a null dereference inside CLI11's string splitting (inlined
// std::string code, so the warning lands in <string>, not in CLI11's own header): a false
// positive that -Werror would turn into a build failure. Silenced for this file only, before
// any header is read.
#pragma GCC diagnostic ignored "-Wnull-dereference"

#include "tools/plexus-bench/options.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <string_view>

#include "shm/dtype.h"

namespace plexus::bench {
namespace {

constexpr std::string_view kAll = "all";
constexpr int kMaxRanks = 4096;

// A CLI11 check from a predicate, with the type shown in --help taken from type_name() and
// not from the check.
CLI::Validator check_that(bool (*accepts)(const std::string&), std::string what) {
  return CLI::Validator(
      [accepts, what](std::string& value) -> std::string {
        return accepts(value) ? std::string() : "'" + value + "' is not " + what;
      },
      "");
}

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool is_size(const std::string& text) { return parse_byte_size(text).has_value(); }
bool is_collective(const std::string& text) {
  return text == kAll || parse_collective(text).has_value();
}
bool is_dtype(const std::string& text) {
  return text == kAll || shm::parse_dtype(text).has_value();
}
bool is_redop(const std::string& text) {
  return text == kAll || shm::parse_redop(text).has_value();
}
bool is_root(const std::string& text) {
  const auto root = parse_int(text);
  return text == kAll || (root.has_value() && *root >= 0 && *root < kMaxRanks);
}
bool is_stat(const std::string& text) { return text == "mean" || text == "median"; }

constexpr const char* kDescription =
    "plexus-bench: the nccl-tests equivalent for Plexus. Sweeps message sizes for one or\n"
    "every collective through plexusd, timing an out-of-place and an in-place variant per\n"
    "size and checking the results exactly. Rank 0 prints an nccl-tests style table.";

constexpr const char* kFooter =
    "Ranks:\n"
    "  With --spawn N this process forks N rank processes and waits for them. Without it,\n"
    "  start one plexus-bench per rank yourself with PLEXUS_RANK (0..n-1), PLEXUS_NRANKS (n)\n"
    "  and PLEXUS_UNIQUE_ID_FILE (a path every rank can read, fresh for each run: rank 0\n"
    "  writes the communicator id there and the others wait up to 60 s for it); a plexusd\n"
    "  must then already answer on the socket.\n"
    "  Across nodes: on each node run plexus-bench --nodes 2,1,3 --node I --id-file PATH\n"
    "  (ranks per node, this node's index, a path every node can read; node 0 writes the\n"
    "  communicator id there). Node I forks its ranks, the next ones in rank order; each\n"
    "  node's plexusd must answer on the socket and run with --peer-listen.\n"
    "\n"
    "Columns (as nccl-tests):\n"
    "  size    bytes of the larger buffer: the gathered result for allgather, the input for\n"
    "          reducescatter, all nranks blocks for alltoall, the message otherwise\n"
    "  count   the count argument of the call: per rank for allgather, reducescatter and\n"
    "          alltoall (each rank's block is rounded down to whole 16-byte units; rows whose\n"
    "          count comes out 0 are skipped)\n"
    "  redop   the reduction, or none; root: the root, or -1\n"
    "  time    microseconds per iteration (--stat), the largest over the ranks\n"
    "  algbw   size / time in GB/s (1 GB = 1e9 bytes)\n"
    "  busbw   algbw x 2(n-1)/n for allreduce, x (n-1)/n for allgather, reducescatter and\n"
    "          alltoall, x 1 for broadcast, reduce and sendrecv\n"
    "  #wrong  wrong elements summed over the ranks (N/A with -c 0); sendrecv has no in-place\n"
    "          variant, its in-place columns read N/A\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 wrong results, 124 the --timeout-s expired.";

}  // namespace

std::variant<BenchOptions, int> parse_options(int argc, char** argv) {
  BenchOptions options;
  for (int index = 0; index < argc; ++index) options.args.emplace_back(argv[index]);

  CLI::App app(kDescription, "plexus-bench");
  app.footer(kFooter);
  app.get_formatter()->column_width(30);

  std::string min_text = "8";
  std::string max_text = "64M";
  std::string step_bytes_text;
  std::string stat_text = "mean";

  app.add_option("-C,--collective", options.collective_text,
                 "Collective to run: allreduce, broadcast, reduce, allgather,\n"
                 "reducescatter, alltoall, sendrecv, or all (each in turn, one table\n"
                 "each). sendrecv: rank r sends to r+1 and receives from r-1 (mod n)\n"
                 "in one group. (nccl-tests has one binary per collective; its -C is\n"
                 "--report_cputime.)")
      ->type_name("NAME")
      ->check(check_that(is_collective, "a collective name"))
      ->capture_default_str();
  app.add_option("-b,--minbytes", min_text,
                 "Smallest size in bytes; K, M and G suffixes are powers of 1024")
      ->type_name("SIZE")
      ->check(check_that(is_size, "a size such as 8, 64K, 32M or 1G"))
      ->capture_default_str();
  app.add_option("-e,--maxbytes", max_text, "Largest size in bytes (nccl-tests defaults to 32M)")
      ->type_name("SIZE")
      ->check(check_that(is_size, "a size such as 8, 64K, 32M or 1G"))
      ->capture_default_str();
  CLI::Option* factor_option =
      app.add_option("-f,--stepfactor", options.step_factor,
                     "Multiply the size by this between rows (at least 2)")
          ->type_name("N")
          ->check(CLI::Range(uint64_t{2}, uint64_t{1} << 30).description(""))
          ->capture_default_str();
  app.add_option("-i,--stepbytes", step_bytes_text,
                 "Add this many bytes between rows instead of multiplying;\n"
                 "cannot be combined with -f")
      ->type_name("SIZE")
      ->check(check_that(is_size, "a size such as 8, 64K, 32M or 1G"))
      ->excludes(factor_option);
  app.add_option("-n,--iters", options.iters,
                 "Timed iterations per row and variant, back to back with no barrier\n"
                 "in between; each is timed alone, from submitting the collective to\n"
                 "the return of plexus_wait (CLOCK_MONOTONIC)")
      ->type_name("N")
      ->check(CLI::Range(1, 100'000'000).description(""))
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", options.warmup_iters,
                 "Untimed iterations before each variant's timed loop\n"
                 "(nccl-tests now defaults to 1)")
      ->type_name("N")
      ->check(CLI::Range(0, 100'000'000).description(""))
      ->capture_default_str();
  app.add_option("-c,--check", options.check_iters,
                 "Checked runs after the timed loop, as in nccl-tests: each refills the\n"
                 "buffers with new data, runs the collective once and compares every\n"
                 "element of the result exactly (stopping at the first failure);\n"
                 "0 disables checking and #wrong reads N/A")
      ->type_name("N")
      ->check(CLI::Range(0, 1'000'000).description(""))
      ->capture_default_str();
  app.add_option("-d,--datatype", options.dtype_text,
                 "Element type: int8 uint8 int32 uint32 int64 uint64 half bfloat16\n"
                 "float double, or all (each in turn)")
      ->type_name("TYPE")
      ->check(check_that(is_dtype, "a datatype"))
      ->capture_default_str();
  app.add_option("-o,--op", options.op_text,
                 "Reduction of allreduce, reduce and reducescatter: sum prod min max\n"
                 "avg, or all (each in turn); the other collectives show redop none")
      ->type_name("OP")
      ->check(check_that(is_redop, "a reduction op"))
      ->capture_default_str();
  app.add_option("-r,--root", options.root_text,
                 "Root rank of broadcast and reduce, or all (every rank in turn); the\n"
                 "other collectives show root -1")
      ->type_name("RANK")
      ->check(check_that(is_root, "a rank or 'all'"))
      ->capture_default_str();
  app.add_option("--device", options.device,
                 "Where each rank's buffers live: host (plexus_alloc, zero copy) or cuda (the "
                 "first GPU; the daemon moves the data with its copy engines, checks read it back)")
      ->capture_default_str()
      ->check(CLI::IsMember({"host", "cuda"}));
  app.add_option("-J,--output_file", options.json_path,
                 "Also write the results as JSON to FILE (rank 0, at the end; nccl-tests'\n"
                 "keys where they overlap). Any name is accepted and an existing file is\n"
                 "replaced (nccl-tests needs a .json suffix and does not overwrite)")
      ->type_name("FILE");
  app.add_option("--stat", stat_text,
                 "What the time column reports: mean (the iterations' total time /\n"
                 "iterations, nccl-tests' figure) or median (of the per-iteration times,\n"
                 "for latency claims); either way the largest over the ranks, and algbw\n"
                 "and busbw follow from it")
      ->type_name("mean|median")
      ->check(check_that(is_stat, "mean or median"))
      ->capture_default_str();
  app.add_option("--spawn", options.spawn,
                 "Fork N local rank processes and wait for them. If no plexusd answers\n"
                 "on the socket, start one inside this process on a private socket in a\n"
                 "new temporary directory (see --no-embedded)")
      ->type_name("N")
      ->check(CLI::Range(1, kMaxRanks).description(""));
  std::string nodes_text;
  app.add_option("--nodes", nodes_text,
                 "Ranks per node across nodes, e.g. 2,1,3 (see Ranks below); needs --node\n"
                 "and --id-file, and implies --spawn with this node's count")
      ->type_name("LIST");
  app.add_option("--node", options.node, "This node's index in --nodes (0 makes the id)")
      ->type_name("I")
      ->check(CLI::Range(0, kMaxRanks).description(""));
  app.add_option("--id-file", options.id_file,
                 "With --nodes: where node 0 writes the communicator id and the other nodes\n"
                 "wait up to 60 s for it (a fresh path for each run)")
      ->type_name("PATH");
  app.add_option("--socket", options.socket_path,
                 "plexusd's socket. Default: $PLEXUS_SOCKET, else\n"
                 "/run/plexus/plexusd.sock as root, else\n"
                 "$XDG_RUNTIME_DIR/plexus/plexusd.sock, else\n"
                 "/tmp/plexus-<uid>/plexusd.sock")
      ->type_name("PATH");
  app.add_flag("--no-embedded", options.no_embedded,
               "With --spawn: fail when no plexusd answers on the socket instead of\n"
               "starting an embedded one (without --spawn none is ever started)");
  app.add_option("--timeout-s", options.timeout_s,
                 "Bound on the whole run in seconds: when it expires every rank process\n"
                 "is killed (with --spawn; without it this rank exits) with an error\n"
                 "naming the timeout, exit status 124")
      ->type_name("SECONDS")
      ->check(CLI::Range(1, 7 * 24 * 3600).description(""))
      ->capture_default_str();

  try {
    app.parse(argc, argv);

    options.min_bytes = *parse_byte_size(min_text);
    options.max_bytes = *parse_byte_size(max_text);
    if (!step_bytes_text.empty()) {
      options.step_bytes = *parse_byte_size(step_bytes_text);
      if (options.step_bytes == 0) throw CLI::ValidationError("--stepbytes", "must be at least 1");
    }
    if (options.min_bytes > options.max_bytes) {
      throw CLI::ValidationError("--minbytes", "must not exceed --maxbytes (" + max_text + ")");
    }
    if (options.step_bytes == 0 && options.min_bytes == 0) {
      throw CLI::ValidationError("--minbytes", "must be at least 1 when sizes grow by -f");
    }

    if (options.collective_text == kAll) {
      options.collectives.assign(kAllCollectives.begin(), kAllCollectives.end());
    } else {
      options.collectives = {*parse_collective(options.collective_text)};
    }
    if (options.dtype_text == kAll) {
      for (int dtype = 0; dtype < PLEXUS_NUM_DTYPES; ++dtype) {
        options.dtypes.push_back(static_cast<plexus_dtype_t>(dtype));
      }
    } else {
      options.dtypes = {*shm::parse_dtype(options.dtype_text)};
    }
    if (options.op_text == kAll) {
      for (int op = 0; op < PLEXUS_NUM_REDOPS; ++op) {
        options.ops.push_back(static_cast<plexus_redop_t>(op));
      }
    } else {
      options.ops = {*shm::parse_redop(options.op_text)};
    }
    options.root = options.root_text == kAll ? std::nullopt : parse_int(options.root_text);
    if (!nodes_text.empty()) {
      int total = 0;
      size_t start = 0;
      while (start <= nodes_text.size()) {
        const size_t comma = std::min(nodes_text.find(',', start), nodes_text.size());
        const std::optional<int> count = parse_int(nodes_text.substr(start, comma - start));
        if (!count || *count < 1 || *count > kMaxRanks) {
          throw CLI::ValidationError(
              "--nodes", "'" + nodes_text + "' is not a list of rank counts of 1 or more");
        }
        options.ranks_per_node.push_back(*count);
        total += *count;
        start = comma + 1;
      }
      if (total > kMaxRanks) throw CLI::ValidationError("--nodes", "more than 4096 ranks");
      if (options.node >= static_cast<int>(options.ranks_per_node.size())) {
        throw CLI::ValidationError(
            "--node", std::to_string(options.node) + " is not an index of --nodes " + nodes_text);
      }
      if (options.id_file.empty()) throw CLI::ValidationError("--nodes", "needs --id-file");
      const int here = options.ranks_per_node[static_cast<size_t>(options.node)];
      if (options.spawn != 0 && options.spawn != here) {
        throw CLI::ValidationError(
            "--spawn", std::to_string(options.spawn) + " differs from " + std::to_string(here) +
                           ", node " + std::to_string(options.node) + "'s count in --nodes");
      }
      options.spawn = here;
      options.no_embedded = true;  // every node's ranks must reach that node's own daemon
    }
    options.stat = stat_text == "median" ? TimeStat::kMedian : TimeStat::kMean;
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return options;
}

std::string check_options_for_ranks(const BenchOptions& options, int nranks) {
  if (options.root.has_value() && *options.root >= nranks) {
    return "root " + std::to_string(*options.root) + " (-r) is not a rank of a " +
           std::to_string(nranks) + "-rank run (ranks are 0.." + std::to_string(nranks - 1) + ")";
  }
  return {};
}

}  // namespace plexus::bench
