// What rank 0 prints: the nccl-tests style table (same columns and widths, so scripts that
// parse nccl-tests output read ours) and the JSON file of -J.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tools/plexus-bench/bench_math.h"
#include "tools/plexus-bench/collective_runner.h"

namespace plexus::bench {

// What a table's header describes; dtype_text and op_text are what was asked for ("float",
// "all", ...), op_text "none" for collectives that do not reduce.
struct TableHeader {
  Collective collective = Collective::kAllReduce;
  int nranks = 1;
  std::string dtype_text;
  std::string op_text;
  TimeStat stat = TimeStat::kMean;
  uint64_t min_bytes = 0;
  uint64_t max_bytes = 0;
  uint64_t step_factor = 0;  // used when step_bytes is 0
  uint64_t step_bytes = 0;
  int warmup_iters = 0;
  int iters = 0;
  int check_iters = 0;
};

struct ResultRow {
  Collective collective = Collective::kAllReduce;
  uint64_t bytes = 0;  // the size column
  size_t count = 0;    // the count column
  std::string type;
  std::string redop;  // "none" for collectives that do not reduce
  int root = -1;      // -1 for collectives without a root
  VariantResult out_of_place;
  VariantResult in_place;
};

// Totals over the rows of a table (or of the whole run).
struct TableSummary {
  bool checked = false;
  uint64_t wrong = 0;  // wrong elements over all checked variants
  double busbw_sum = 0.0;
  int busbw_samples = 0;

  void add(const ResultRow& row);
  void add(const TableSummary& other);
  double average_busbw() const;
};

// value right-aligned in `width` characters with as many decimals (2, 1, 0) as fit, falling
// back to exponent notation for huge values.
std::string format_float_column(double value, int width);
std::string format_table_header(const TableHeader& header);
std::string format_row(const ResultRow& row);
std::string format_table_footer(const TableSummary& summary);

// Builds the -J document: run configuration, every row, and per-table and overall summaries.
// Keys follow nccl-tests' JSON output where the two overlap.
class JsonReport {
 public:
  JsonReport(const std::vector<std::string>& args, nlohmann::ordered_json config);

  void add_row(const ResultRow& row, int iterations);
  void add_table(Collective collective, const TableSummary& summary);
  // Adds the overall summary and end time, then writes the file (replacing it) through a
  // temporary file and a rename, so a reader never sees half a document. Throws
  // std::runtime_error naming the path when it cannot.
  void write(const std::string& path, const TableSummary& overall);

 private:
  nlohmann::ordered_json document_;
};

}  // namespace plexus::bench
