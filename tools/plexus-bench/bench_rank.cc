#include "tools/plexus-bench/bench_rank.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "shm/dtype.h"
#include "tools/plexus-bench/bench_math.h"
#include "tools/plexus-bench/collective_runner.h"
#include "tools/plexus-bench/device_buffers.h"
#include "tools/plexus-bench/plexus_call.h"
#include "tools/plexus-bench/report.h"

namespace plexus::bench {
namespace {

nlohmann::ordered_json config_json(const BenchOptions& options, int nranks) {
  nlohmann::ordered_json config;
  config["nranks"] = nranks;
  auto& collectives = config["collectives"] = nlohmann::ordered_json::array();
  for (const Collective collective : options.collectives) {
    collectives.push_back(collective_name(collective));
  }
  config["device"] = options.device;
  config["datatype"] = options.dtype_text;
  config["redop"] = options.op_text;
  config["root"] = options.root_text;
  config["minimum_bytes"] = options.min_bytes;
  config["maximum_bytes"] = options.max_bytes;
  if (options.step_bytes == 0) {
    config["step_factor"] = options.step_factor;
  } else {
    config["step_bytes"] = options.step_bytes;
  }
  config["warmup_iters"] = options.warmup_iters;
  config["iterations"] = options.iters;
  config["validation"] = options.check_iters;
  config["stat"] = time_stat_name(options.stat);
  config["spawn"] = options.spawn;
  config["daemon"] = options.daemon_description;
  config["timeout_s"] = options.timeout_s;
  return config;
}

TableHeader table_header(const BenchOptions& options, Collective collective, int nranks) {
  TableHeader header;
  header.collective = collective;
  header.nranks = nranks;
  header.dtype_text = options.dtype_text;
  header.op_text = collective_reduces(collective) ? options.op_text : "none";
  header.stat = options.stat;
  header.min_bytes = options.min_bytes;
  header.max_bytes = options.max_bytes;
  header.step_factor = options.step_factor;
  header.step_bytes = options.step_bytes;
  header.warmup_iters = options.warmup_iters;
  header.iters = options.iters;
  header.check_iters = options.check_iters;
  return header;
}

// What a collective loops over besides dtypes and sizes: ops for those that reduce (one
// placeholder otherwise), roots for those with a root (-1 otherwise).
std::vector<plexus_redop_t> ops_of(const BenchOptions& options, Collective collective) {
  if (!collective_reduces(collective)) return {PLEXUS_SUM};
  return options.ops;
}

std::vector<int> roots_of(const BenchOptions& options, Collective collective, int nranks) {
  if (!collective_has_root(collective)) return {-1};
  if (options.root.has_value()) return {*options.root};
  std::vector<int> roots(static_cast<size_t>(nranks));
  for (int rank = 0; rank < nranks; ++rank) roots[static_cast<size_t>(rank)] = rank;
  return roots;
}

// Owns the communicator and the pool buffers so that every exit path releases them.
class RankResources {
 public:
  RankResources() = default;
  RankResources(const RankResources&) = delete;
  RankResources& operator=(const RankResources&) = delete;
  ~RankResources() { release(); }

  void join(const RankIdentity& identity) {
    check_plexus(plexus_comm_init_rank(&comm_, identity.nranks, identity.unique_id, identity.rank),
                 "plexus_comm_init_rank");
    int size = 0;
    check_plexus(plexus_comm_count(comm_, &size), "plexus_comm_count");
    int rank = -1;
    check_plexus(plexus_comm_user_rank(comm_, &rank), "plexus_comm_user_rank");
    if (size != identity.nranks || rank != identity.rank) {
      throw PlexusCallError("plexus_comm_init_rank", PLEXUS_ERR_INTERNAL,
                            "the communicator reports rank " + std::to_string(rank) + " of " +
                                std::to_string(size) + ", expected rank " +
                                std::to_string(identity.rank) + " of " +
                                std::to_string(identity.nranks));
    }
  }

  void allocate(size_t bytes) {
    buffers_.bytes = bytes;
    check_plexus(plexus_alloc(&buffers_.send, bytes), "plexus_alloc");
    check_plexus(plexus_alloc(&buffers_.recv, bytes), "plexus_alloc");
    check_plexus(plexus_alloc(&buffers_.scratch, kScratchBytes), "plexus_alloc");
  }

  // After a failure: leave at once, so the other ranks' pending ops fail naming this rank.
  void abort() {
    if (comm_ != nullptr) plexus_comm_abort(comm_);
    comm_ = nullptr;
  }

  // The orderly end; reports the first failure.
  void finish() {
    free_buffers();
    if (comm_ != nullptr) {
      plexus_comm_t comm = comm_;
      comm_ = nullptr;
      check_plexus(plexus_comm_destroy(comm), "plexus_comm_destroy");
    }
  }

  plexus_comm_t comm() const { return comm_; }
  const RankBuffers& buffers() const { return buffers_; }

 private:
  void free_buffers() {
    for (void** buffer : {&buffers_.send, &buffers_.recv, &buffers_.scratch}) {
      if (*buffer == nullptr) continue;
      void* pointer = *buffer;
      *buffer = nullptr;
      check_plexus(plexus_free(pointer), "plexus_free");
    }
  }

  void release() {
    // Best effort on paths that already failed: errors here would hide the first one.
    abort();
    for (void** buffer : {&buffers_.send, &buffers_.recv, &buffers_.scratch}) {
      if (*buffer != nullptr) plexus_free(*buffer);
      *buffer = nullptr;
    }
  }

  plexus_comm_t comm_ = nullptr;
  RankBuffers buffers_;
};

}  // namespace

int run_rank(const BenchOptions& options, const RankIdentity& identity) {
  const bool prints = identity.rank == 0;
  const int nranks = identity.nranks;
  RankResources resources;
  try {
    resources.join(identity);
    // Every row's buffers fit in max_bytes: a row's size is its larger buffer.
    resources.allocate(static_cast<size_t>(std::max<uint64_t>(options.max_bytes, kScratchBytes)));
    std::unique_ptr<DeviceBuffers> device;
    RankBuffers buffers = resources.buffers();
    if (options.device == "cuda") {
      device = make_cuda_buffers();
      device->attach(&buffers);
    }

    TimingOptions timing;
    timing.warmup_iters = options.warmup_iters;
    timing.iters = options.iters;
    timing.check_iters = options.check_iters;
    timing.stat = options.stat;
    CollectiveRunner runner(resources.comm(), identity.rank, nranks, buffers, timing);

    std::optional<JsonReport> json;
    if (prints && !options.json_path.empty())
      json.emplace(options.args, config_json(options, nranks));

    const std::vector<uint64_t> sizes =
        sweep_sizes(options.min_bytes, options.max_bytes, options.step_factor, options.step_bytes);
    TableSummary overall;
    for (const Collective collective : options.collectives) {
      if (prints) {
        std::fputs(format_table_header(table_header(options, collective, nranks)).c_str(), stdout);
        std::fflush(stdout);
      }
      TableSummary table;
      for (const plexus_dtype_t dtype : options.dtypes) {
        for (const plexus_redop_t op : ops_of(options, collective)) {
          for (const int root : roots_of(options, collective, nranks)) {
            for (const uint64_t size : sizes) {
              RunSpec spec;
              spec.collective = collective;
              spec.dtype = dtype;
              spec.op = op;
              spec.root = root;
              spec.shape = row_shape(collective, size, shm::dtype_size(dtype), nranks);
              if (spec.shape.count == 0) continue;  // smaller than one element per rank

              ResultRow row;
              row.collective = collective;
              row.bytes = spec.shape.bytes;
              row.count = spec.shape.count;
              row.type = shm::dtype_name(dtype);
              row.redop = collective_reduces(collective) ? shm::redop_name(op) : "none";
              row.root = root;
              row.out_of_place = runner.run(spec, /*in_place=*/false);
              row.in_place = runner.run(spec, /*in_place=*/true);
              table.add(row);
              if (prints) {
                std::fputs(format_row(row).c_str(), stdout);
                std::fflush(stdout);
              }
              if (json) json->add_row(row, options.iters);
            }
          }
        }
      }
      if (prints) {
        std::fputs(format_table_footer(table).c_str(), stdout);
        std::fflush(stdout);
      }
      if (json) json->add_table(collective, table);
      overall.add(table);
    }
    resources.finish();

    int status = overall.wrong == 0 || !prints ? kExitOk : kExitWrongResults;
    if (json) {
      try {
        json->write(options.json_path, overall);
        std::printf("# JSON results written to %s\n", options.json_path.c_str());
        std::fflush(stdout);
      } catch (const std::runtime_error& error) {
        std::fprintf(stderr, "plexus-bench: rank 0: %s\n", error.what());
        status = kExitError;
      }
    }
    return status;
  } catch (const PlexusCallError& error) {
    resources.abort();
    std::fprintf(stderr, "plexus-bench: rank %d: %s failed: %s\n", identity.rank,
                 error.call().c_str(), error.what());
    return kExitError;
  } catch (const std::exception& error) {
    resources.abort();
    std::fprintf(stderr, "plexus-bench: rank %d: %s\n", identity.rank, error.what());
    return kExitError;
  }
}

}  // namespace plexus::bench
