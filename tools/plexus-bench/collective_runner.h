// Running, timing and checking one collective at one size on one rank: the body of a table
// row. Every method is collective over the communicator: all ranks call it with the same
// arguments in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "plexus/plexus.h"
#include "tools/plexus-bench/bench_math.h"
#include "tools/plexus-bench/check_data.h"

namespace plexus::bench {

// Buffers from plexus_alloc, so every collective takes the zero-copy path.
struct RankBuffers {
  void* send = nullptr;
  void* recv = nullptr;     // also the buffer of the in-place variants
  size_t bytes = 0;         // size of send and of recv each
  void* scratch = nullptr;  // kScratchBytes for the runner's own cross-rank reductions
  // --device cuda: the calls get these GPU buffers; send and recv above are their host
  // mirrors, copied to the device before the timed and the checked runs and back for checks.
  void* device_send = nullptr;
  void* device_recv = nullptr;
  std::function<void(void* dst, const void* src, size_t bytes, bool to_device)> copy;
};
inline constexpr size_t kScratchBytes = 64;

struct RunSpec {
  Collective collective = Collective::kAllReduce;
  plexus_dtype_t dtype = PLEXUS_FLOAT32;
  plexus_redop_t op = PLEXUS_SUM;  // only for collectives that reduce
  int root = -1;                   // only for collectives with a root
  RowShape shape;
};

struct TimingOptions {
  int warmup_iters = 5;
  int iters = 20;
  int check_iters = 1;  // checked runs after the timed ones; 0: no check
  TimeStat stat = TimeStat::kMean;
};

struct VariantResult {
  bool ran = false;        // false when the variant does not exist (in-place sendrecv)
  double time_us = 0.0;    // the --stat figure: the slowest rank's
  double mean_us = 0.0;    // the largest per-rank mean
  double median_us = 0.0;  // the largest per-rank median
  double algbw_gbs = 0.0;  // from time_us
  double busbw_gbs = 0.0;
  bool checked = false;
  uint64_t wrong = 0;  // wrong elements summed over the ranks (of the first failing check)
};

class CollectiveRunner {
 public:
  CollectiveRunner(plexus_comm_t comm, int rank, int nranks, RankBuffers buffers,
                   TimingOptions timing);

  // Times the variant (warmup, then `iters` back-to-back iterations each timed from submit
  // to the return of plexus_wait), then checks it on fresh data `check_iters` times. The
  // buffers must hold spec.shape's send and recv counts. Throws PlexusCallError.
  VariantResult run(const RunSpec& spec, bool in_place);

  // Cross-rank helpers over the benchmarked communicator itself.
  void barrier();
  uint64_t sum_across_ranks(uint64_t value);

 private:
  struct CallBuffers {
    const void* send;
    void* recv;
  };

  CallBuffers call_buffers(const RunSpec& spec, bool in_place) const;
  void run_once(const RunSpec& spec, const CallBuffers& buffers);
  // Fills the buffers (the host ones, copied to the device ones when there are).
  void prepare(const RunSpec& spec, bool in_place, const DataPattern& pattern);
  void fill_mirrors(const RunSpec& spec, bool in_place, const DataPattern& pattern);
  uint64_t count_wrong(const RunSpec& spec, bool in_place, const DataPattern& pattern) const;
  DataPattern pattern_for(const RunSpec& spec, uint32_t seed) const;
  // Element-wise maximum over the ranks of (first, second).
  void max_across_ranks(double& first, double& second);

  plexus_comm_t comm_;
  int rank_;
  int nranks_;
  RankBuffers buffers_;
  TimingOptions timing_;
  uint32_t next_check_seed_ = 1;  // every check sees new data, so stale results cannot pass
};

}  // namespace plexus::bench
