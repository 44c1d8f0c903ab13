// Shared pieces of the peer allreduce benchmarks (mpi_allreduce_bench, gloo_allreduce_bench):
// command-line options, the size sweep, timing, result checking and the nccl-tests style table.
// Each peer only supplies a Communicator; everything that decides what the numbers mean lives
// here so that both peers (and plexus-bench, which prints the same table) measure the same way.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace plexus::peer_bench {

enum class TimeStat { kMean, kMedian };

struct SweepOptions {
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t step_factor = 2;
  int iterations = 20;
  int warmup_iterations = 5;
  bool check_results = true;
  TimeStat stat = TimeStat::kMean;
  // Only gloo_allreduce_bench forks its own ranks; the MPI ranks come from mpirun.
  int ranks = 4;
  // Gloo across nodes: this process forks `ranks` ranks numbered from first_rank in a world of
  // world ranks, rendezvousing through store_directory (shared by every node) and talking
  // TCP from address `hostname` (default: one node, loopback, a private store).
  int first_rank = 0;
  int world = 0;  // 0: ranks
  std::string store_directory;
  std::string hostname = "127.0.0.1";
  // Wall-clock bound for the whole run, so a wedged peer can never hang a benchmark script.
  int timeout_seconds = 1200;
};

// The collective operations a peer library must provide. All calls are collective: every rank
// calls them in the same order with the same counts.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void allreduce_sum_out_of_place(const float* input, float* output, std::size_t count) = 0;
  virtual void allreduce_sum_in_place(float* data, std::size_t count) = 0;
  virtual double max_across_ranks(double value) = 0;
  virtual std::int64_t sum_across_ranks(std::int64_t value) = 0;
};

// Parses "64", "1K", "8M", "2G" (powers of 1024, case-insensitive) into bytes.
inline std::optional<std::size_t> parse_byte_size(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::size_t multiplier = 1;
  switch (text.back()) {
    case 'k':
    case 'K':
      multiplier = std::size_t{1} << 10;
      break;
    case 'm':
    case 'M':
      multiplier = std::size_t{1} << 20;
      break;
    case 'g':
    case 'G':
      multiplier = std::size_t{1} << 30;
      break;
    default:
      break;
  }
  if (multiplier != 1) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  std::size_t value = 0;
  for (const char digit : text) {
    if (digit < '0' || digit > '9') return std::nullopt;
    const auto digit_value = static_cast<std::size_t>(digit - '0');
    if (value > (std::numeric_limits<std::size_t>::max() - digit_value) / 10) return std::nullopt;
    value = value * 10 + digit_value;
  }
  if (value > std::numeric_limits<std::size_t>::max() / multiplier) return std::nullopt;
  return value * multiplier;
}

inline std::optional<int> parse_int(std::string_view text, int min_value, int max_value) {
  const auto parsed = parse_byte_size(text);
  if (!parsed || text.empty() || text.back() < '0' || text.back() > '9') return std::nullopt;
  if (*parsed < static_cast<std::size_t>(min_value) ||
      *parsed > static_cast<std::size_t>(max_value)) {
    return std::nullopt;
  }
  return static_cast<int>(*parsed);
}

inline std::string usage_text(const char* program, bool with_ranks) {
  std::string text = std::string("usage: ") + program +
                     " [options]\n"
                     "  -b, --minbytes SIZE     smallest message in bytes, K/M/G suffixes (8)\n"
                     "  -e, --maxbytes SIZE     largest message in bytes (64M)\n"
                     "  -f, --stepfactor N      multiply the size by N each step (2)\n"
                     "  -n, --iters N           timed iterations per size (20)\n"
                     "  -w, --warmup_iters N    untimed iterations per size (5)\n"
                     "  -c, --check 0|1         verify the sums after timing (1)\n"
                     "      --stat mean|median  time column: max over ranks of the mean per-\n"
                     "                          iteration time, or rank 0's median (mean)\n"
                     "      --timeout SECONDS   abort the whole run after this long (1200)\n";
  if (with_ranks) {
    text +=
        "      --ranks N           processes to fork (4)\n"
        "  Across nodes (one process per node, each forking its --ranks):\n"
        "      --first-rank R      rank of this node's first process (0)\n"
        "      --world N           ranks on all nodes together (--ranks)\n"
        "      --store DIR         FileStore directory every node sees (fresh per run)\n"
        "      --hostname IP       this node's address for Gloo's TCP (127.0.0.1)\n";
  }
  return text;
}

// Returns the options, or an error message (empty for --help) in `error`.
inline std::optional<SweepOptions> parse_sweep_options(int argc, char** argv, bool with_ranks,
                                                       std::string& error) {
  SweepOptions options;
  error.clear();
  for (int index = 1; index < argc; ++index) {
    const std::string_view flag = argv[index];
    if (flag == "-h" || flag == "--help") return std::nullopt;
    if (index + 1 >= argc) {
      error = "missing value after " + std::string(flag);
      return std::nullopt;
    }
    const std::string_view value = argv[++index];
    bool valid = true;
    if (flag == "-b" || flag == "--minbytes" || flag == "-e" || flag == "--maxbytes") {
      const auto bytes = parse_byte_size(value);
      valid = bytes.has_value();
      if (valid)
        (flag == "-b" || flag == "--minbytes" ? options.min_bytes : options.max_bytes) = *bytes;
    } else if (flag == "-f" || flag == "--stepfactor") {
      const auto factor = parse_int(value, 2, 1 << 20);
      valid = factor.has_value();
      if (valid) options.step_factor = static_cast<std::size_t>(*factor);
    } else if (flag == "-n" || flag == "--iters") {
      const auto iterations = parse_int(value, 1, 100'000'000);
      valid = iterations.has_value();
      if (valid) options.iterations = *iterations;
    } else if (flag == "-w" || flag == "--warmup_iters") {
      const auto warmup = parse_int(value, 0, 100'000'000);
      valid = warmup.has_value();
      if (valid) options.warmup_iterations = *warmup;
    } else if (flag == "-c" || flag == "--check") {
      const auto check = parse_int(value, 0, 1);
      valid = check.has_value();
      if (valid) options.check_results = *check == 1;
    } else if (flag == "--stat") {
      valid = value == "mean" || value == "median";
      options.stat = value == "median" ? TimeStat::kMedian : TimeStat::kMean;
    } else if (flag == "--timeout") {
      const auto seconds = parse_int(value, 1, 7 * 24 * 3600);
      valid = seconds.has_value();
      if (valid) options.timeout_seconds = *seconds;
    } else if (with_ranks && flag == "--ranks") {
      const auto ranks = parse_int(value, 1, 1024);
      valid = ranks.has_value();
      if (valid) options.ranks = *ranks;
    } else if (with_ranks && flag == "--first-rank") {
      const auto first = parse_int(value, 0, 4095);
      valid = first.has_value();
      if (valid) options.first_rank = *first;
    } else if (with_ranks && flag == "--world") {
      const auto world = parse_int(value, 1, 4096);
      valid = world.has_value();
      if (valid) options.world = *world;
    } else if (with_ranks && flag == "--store") {
      options.store_directory = std::string(value);
    } else if (with_ranks && flag == "--hostname") {
      options.hostname = std::string(value);
    } else {
      error = "unknown option " + std::string(flag);
      return std::nullopt;
    }
    if (!valid) {
      error = "invalid value '" + std::string(value) + "' for " + std::string(flag);
      return std::nullopt;
    }
  }
  if (options.min_bytes > options.max_bytes) {
    error = "-b must not exceed -e";
    return std::nullopt;
  }
  if (options.world == 0) options.world = options.ranks;
  if (options.first_rank + options.ranks > options.world) {
    error = "--first-rank + --ranks exceeds --world";
    return std::nullopt;
  }
  if (options.world != options.ranks && options.store_directory.empty()) {
    error = "across nodes (--world) every node needs the same --store directory";
    return std::nullopt;
  }
  return options;
}

// Element counts of the sweep. Sizes are rounded down to whole floats; sizes under one float
// are skipped, as nccl-tests does.
inline std::vector<std::size_t> sweep_element_counts(const SweepOptions& options) {
  std::vector<std::size_t> counts;
  for (std::size_t bytes = options.min_bytes; bytes <= options.max_bytes;) {
    const std::size_t count = bytes / sizeof(float);
    if (count > 0 && (counts.empty() || counts.back() != count)) counts.push_back(count);
    if (bytes == 0) {
      bytes = 1;
    } else if (bytes > std::numeric_limits<std::size_t>::max() / options.step_factor) {
      break;
    } else {
      bytes *= options.step_factor;
    }
  }
  return counts;
}

// Small integers keep every partial sum exact in float, so checking can demand equality.
inline float check_pattern_value(int rank, std::size_t index) {
  return static_cast<float>((index * 7 + static_cast<std::size_t>(rank) * 3) % 11);
}

inline void fill_check_pattern(std::vector<float>& data, int rank) {
  for (std::size_t index = 0; index < data.size(); ++index) {
    data[index] = check_pattern_value(rank, index);
  }
}

inline std::int64_t count_wrong_sums(const std::vector<float>& result, int ranks) {
  std::int64_t wrong = 0;
  for (std::size_t index = 0; index < result.size(); ++index) {
    float expected = 0.0F;
    for (int rank = 0; rank < ranks; ++rank) expected += check_pattern_value(rank, index);
    if (result[index] != expected) ++wrong;
  }
  return wrong;
}

inline double mean_of(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

inline double median_of(std::vector<double> values) {
  const std::size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle),
                   values.end());
  const double upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle));
  return (lower + upper) / 2.0;
}

struct PhaseResult {
  double time_us = 0.0;
  std::int64_t wrong_elements = -1;  // -1: not checked
};

// Times `iterations` back-to-back calls individually (no barrier in between: a barrier would
// add its own latency and hide pipelining) and reduces them to the reported statistic.
template <typename Operation>
double time_iterations(Communicator& communicator, const SweepOptions& options,
                       Operation&& operation) {
  for (int iteration = 0; iteration < options.warmup_iterations; ++iteration) operation();
  std::vector<double> iteration_us(static_cast<std::size_t>(options.iterations));
  for (double& elapsed_us : iteration_us) {
    const auto start = std::chrono::steady_clock::now();  // CLOCK_MONOTONIC on Linux
    operation();
    const auto stop = std::chrono::steady_clock::now();
    elapsed_us = std::chrono::duration<double, std::micro>(stop - start).count();
  }
  if (options.stat == TimeStat::kMedian) return median_of(std::move(iteration_us));
  // The slowest rank bounds the collective, as in nccl-tests.
  return communicator.max_across_ranks(mean_of(iteration_us));
}

inline std::string format_time_us(double time_us) {
  char text[32];
  if (time_us >= 10000.0) {
    std::snprintf(text, sizeof(text), "%7.0f", time_us);
  } else if (time_us >= 100.0) {
    std::snprintf(text, sizeof(text), "%7.1f", time_us);
  } else {
    std::snprintf(text, sizeof(text), "%7.2f", time_us);
  }
  return text;
}

class TablePrinter {
 public:
  TablePrinter(int ranks, const SweepOptions& options) : ranks_(ranks), options_(options) {}

  void print_header(const char* collective_description) const {
    std::printf("# %s\n", collective_description);
    std::printf(
        "# ranks %d minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d iters: %d "
        "validation: %d stat: %s\n",
        ranks_, options_.min_bytes, options_.max_bytes, options_.step_factor,
        options_.warmup_iterations, options_.iterations, options_.check_results ? 1 : 0,
        options_.stat == TimeStat::kMedian ? "median" : "mean");
    std::printf("#\n");
    // Column headings exactly as nccl-tests prints them, so existing parsers keep working.
    std::printf(
        "#                                                              out-of-place"
        "                       in-place\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)      "
        "      (us)  (GB/s)  (GB/s)\n");
    std::fflush(stdout);
  }

  void print_row(std::size_t count, const PhaseResult& out_of_place, const PhaseResult& in_place) {
    const std::size_t bytes = count * sizeof(float);
    std::printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, "float", "sum", -1);
    print_phase(bytes, out_of_place);
    print_phase(bytes, in_place);
    std::printf("\n");
    std::fflush(stdout);
  }

  void print_footer(std::int64_t total_wrong) const {
    if (options_.check_results) {
      std::printf("# %-20s : %lld %s\n", "Out of bounds values",
                  static_cast<long long>(total_wrong), total_wrong == 0 ? "OK" : "FAILED");
    }
    const double average = bus_bandwidth_samples_ == 0
                               ? 0.0
                               : bus_bandwidth_sum_ / static_cast<double>(bus_bandwidth_samples_);
    std::printf("# %-20s : %g\n", "Avg bus bandwidth", average);
    std::printf("#\n");
    std::fflush(stdout);
  }

 private:
  void print_phase(std::size_t bytes, const PhaseResult& result) {
    // GB/s with 1 GB = 1e9 bytes; allreduce moves 2(n-1)/n of the buffer over each link.
    const double algorithm_bandwidth =
        result.time_us > 0.0 ? static_cast<double>(bytes) / (result.time_us * 1e3) : 0.0;
    const double bus_bandwidth =
        algorithm_bandwidth * 2.0 * static_cast<double>(ranks_ - 1) / static_cast<double>(ranks_);
    bus_bandwidth_sum_ += bus_bandwidth;
    ++bus_bandwidth_samples_;
    char wrong_text[32];
    if (result.wrong_elements < 0) {
      std::snprintf(wrong_text, sizeof(wrong_text), "%s", "N/A");
    } else {
      std::snprintf(wrong_text, sizeof(wrong_text), "%lld",
                    static_cast<long long>(result.wrong_elements));
    }
    std::printf("  %7s  %6.2f  %6.2f  %5s", format_time_us(result.time_us).c_str(),
                algorithm_bandwidth, bus_bandwidth, wrong_text);
  }

  int ranks_;
  SweepOptions options_;
  double bus_bandwidth_sum_ = 0.0;
  std::int64_t bus_bandwidth_samples_ = 0;
};

// Runs the whole sweep; rank 0 prints the table. Returns the process exit status (non-zero when
// any checked element was wrong).
inline int run_allreduce_sweep(Communicator& communicator, const SweepOptions& options,
                               const char* collective_description) {
  const int rank = communicator.rank();
  const int ranks = communicator.size();
  TablePrinter table(ranks, options);
  if (rank == 0) table.print_header(collective_description);
  // Wrong counts are already summed across ranks, so every rank agrees on the exit status.
  std::int64_t total_wrong = 0;

  for (const std::size_t count : sweep_element_counts(options)) {
    std::vector<float> input(count);
    std::vector<float> output(count);
    fill_check_pattern(input, rank);
    PhaseResult out_of_place;
    PhaseResult in_place;

    out_of_place.time_us = time_iterations(communicator, options, [&] {
      communicator.allreduce_sum_out_of_place(input.data(), output.data(), count);
    });
    // In-place reuses the output buffer (one buffer less at the largest sizes). Timing keeps
    // summing into it; values only grow (towards +inf at worst), which costs nothing extra, so
    // it is not refilled between iterations.
    std::vector<float>& in_place_data = output;
    in_place_data = input;
    in_place.time_us = time_iterations(communicator, options, [&] {
      communicator.allreduce_sum_in_place(in_place_data.data(), count);
    });

    // Verified in one extra, untimed run on fresh data, like nccl-tests.
    if (options.check_results) {
      fill_check_pattern(input, rank);
      std::fill(output.begin(), output.end(), -1.0F);
      communicator.allreduce_sum_out_of_place(input.data(), output.data(), count);
      out_of_place.wrong_elements = communicator.sum_across_ranks(count_wrong_sums(output, ranks));
      fill_check_pattern(in_place_data, rank);
      communicator.allreduce_sum_in_place(in_place_data.data(), count);
      in_place.wrong_elements =
          communicator.sum_across_ranks(count_wrong_sums(in_place_data, ranks));
      total_wrong += out_of_place.wrong_elements + in_place.wrong_elements;
    }
    if (rank == 0) table.print_row(count, out_of_place, in_place);
  }

  if (rank == 0) table.print_footer(total_wrong);
  return total_wrong == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

}  // namespace plexus::peer_bench
