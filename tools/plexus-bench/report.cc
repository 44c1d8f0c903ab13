#include "tools/plexus-bench/report.h"
#include "tools/plexus-bench/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <utility>

namespace plexus::bench {
namespace {

constexpr int kTimeWidth = 7;
constexpr int kBandwidthWidth = 6;
constexpr int kWrongWidth = 6;

std::string local_time_now() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  localtime_r(&now, &parts);
  char text[64];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &parts);
  return text;
}

std::string format_variant(const VariantResult& result) {
  char text[96];
  if (!result.ran) {
    // Keep the column count constant for whitespace-splitting parsers.
    std::snprintf(text, sizeof(text), "  %*s  %*s  %*s  %*s", kTimeWidth, "N/A", kBandwidthWidth,
                  "N/A", kBandwidthWidth, "N/A", kWrongWidth, "N/A");
    return text;
  }
  char wrong[32];
  if (result.checked) {
    std::snprintf(wrong, sizeof(wrong), "%" PRIu64, result.wrong);
  } else {
    std::snprintf(wrong, sizeof(wrong), "N/A");
  }
  std::snprintf(text, sizeof(text), "  %s  %s  %s  %*s",
                format_float_column(result.time_us, kTimeWidth).c_str(),
                format_float_column(result.algbw_gbs, kBandwidthWidth).c_str(),
                format_float_column(result.busbw_gbs, kBandwidthWidth).c_str(), kWrongWidth, wrong);
  return text;
}

nlohmann::ordered_json variant_json(const VariantResult& result) {
  if (!result.ran) return nullptr;
  nlohmann::ordered_json variant;
  variant["time"] = result.time_us;
  variant["alg_bw"] = result.algbw_gbs;
  variant["bus_bw"] = result.busbw_gbs;
  variant["nwrong"] = result.checked ? nlohmann::ordered_json(result.wrong) : nullptr;
  variant["mean_time"] = result.mean_us;
  variant["median_time"] = result.median_us;
  return variant;
}

nlohmann::ordered_json summary_json(const TableSummary& summary) {
  nlohmann::ordered_json json;
  json["out_of_bounds"] = {{"count", summary.wrong},
                           {"okay", summary.checked ? nlohmann::ordered_json(summary.wrong == 0)
                                                    : nlohmann::ordered_json("unchecked")}};
  json["average_bus_bandwidth"] = {{"bandwidth", summary.average_busbw()}};
  return json;
}

}  // namespace

void TableSummary::add(const ResultRow& row) {
  for (const VariantResult* variant : {&row.out_of_place, &row.in_place}) {
    if (!variant->ran) continue;
    busbw_sum += variant->busbw_gbs;
    ++busbw_samples;
    if (variant->checked) {
      checked = true;
      wrong += variant->wrong;
    }
  }
}

void TableSummary::add(const TableSummary& other) {
  checked = checked || other.checked;
  wrong += other.wrong;
  busbw_sum += other.busbw_sum;
  busbw_samples += other.busbw_samples;
}

double TableSummary::average_busbw() const {
  return busbw_samples == 0 ? 0.0 : busbw_sum / static_cast<double>(busbw_samples);
}

std::string format_float_column(double value, int width) {
  const auto limit = static_cast<size_t>(width);
  char text[64];
  for (const int decimals : {2, 1, 0}) {
    const int length = std::snprintf(text, sizeof(text), "%*.*f", width, decimals, value);
    if (length >= 0 && static_cast<size_t>(length) <= limit) return text;
  }
  std::snprintf(text, sizeof(text), "%*.*e", width, width >= 7 ? 1 : 0, value);
  return text;
}

std::string format_table_header(const TableHeader& header) {
  std::string text;
  char line[512];
  std::snprintf(line, sizeof(line),
                "# plexus-bench: collective %s, %d ranks, dtype %s, op %s, stat %s\n",
                std::string(collective_name(header.collective)).c_str(), header.nranks,
                header.dtype_text.c_str(), header.op_text.c_str(),
                std::string(time_stat_name(header.stat)).c_str());
  text += line;
  const bool by_factor = header.step_bytes == 0;
  std::snprintf(line, sizeof(line),
                "# minBytes %" PRIu64 " maxBytes %" PRIu64 " step: %" PRIu64
                "(%s) warmup iters: %d iters: %d validation: %d\n",
                header.min_bytes, header.max_bytes,
                by_factor ? header.step_factor : header.step_bytes, by_factor ? "factor" : "bytes",
                header.warmup_iters, header.iters, header.check_iters);
  text += line;
  text += "#\n";
  // nccl-tests' column headings, character for character.
  std::snprintf(line, sizeof(line),
                "# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
                "in-place          \n",
                "", "", "", "", "");
  text += line;
  std::snprintf(line, sizeof(line),
                "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong");
  text += line;
  std::snprintf(line, sizeof(line),
                "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "");
  text += line;
  return text;
}

std::string format_row(const ResultRow& row) {
  char preamble[128];
  std::snprintf(preamble, sizeof(preamble), "%12" PRIu64 "  %12zu  %8s  %6s  %6d", row.bytes,
                row.count, row.type.c_str(), row.redop.c_str(), row.root);
  return std::string(preamble) + format_variant(row.out_of_place) + format_variant(row.in_place) +
         "\n";
}

std::string format_table_footer(const TableSummary& summary) {
  char line[128];
  std::string text;
  if (summary.checked) {
    std::snprintf(line, sizeof(line), "# %-20s : %" PRIu64 " %s\n", "Out of bounds values",
                  summary.wrong, summary.wrong == 0 ? "OK" : "FAILED");
  } else {
    std::snprintf(line, sizeof(line), "# %-20s : N/A (not checked, -c 0)\n",
                  "Out of bounds values");
  }
  text += line;
  std::snprintf(line, sizeof(line), "# %-20s : %g\n", "Avg bus bandwidth", summary.average_busbw());
  text += line;
  text += "#\n";
  return text;
}

JsonReport::JsonReport(const std::vector<std::string>& args, nlohmann::ordered_json config) {
  document_["version"] = 1;
  document_["program"] = "plexus-bench";
  document_["start_time"] = local_time_now();
  document_["args"] = args;
  document_["config"] = std::move(config);
  document_["results"] = nlohmann::ordered_json::array();
  document_["tables"] = nlohmann::ordered_json::array();
}

void JsonReport::add_row(const ResultRow& row, int iterations) {
  nlohmann::ordered_json json;
  json["collective"] = collective_name(row.collective);
  json["size"] = row.bytes;
  json["count"] = row.count;
  json["type"] = row.type;
  json["redop"] = row.redop;
  json["root"] = row.root;
  json["out_of_place"] = variant_json(row.out_of_place);
  json["in_place"] = variant_json(row.in_place);
  json["actual_iterations"] = iterations;
  document_["results"].push_back(std::move(json));
}

void JsonReport::add_table(Collective collective, const TableSummary& summary) {
  nlohmann::ordered_json table;
  table["collective"] = collective_name(collective);
  table.update(summary_json(summary));
  document_["tables"].push_back(std::move(table));
}

void JsonReport::write(const std::string& path, const TableSummary& overall) {
  document_.update(summary_json(overall));
  document_["end_time"] = local_time_now();
  write_file_atomically(path, document_.dump(2) + "\n");
}

}  // namespace plexus::bench
