// One rank's whole benchmark: join the communicator, sweep every requested collective, dtype,
// op, root and size, and (on rank 0) print the tables and write the JSON file.
#pragma once

#include "plexus/plexus.h"
#include "tools/plexus-bench/options.h"

namespace plexus::bench {

struct RankIdentity {
  int rank = 0;
  int nranks = 1;
  plexus_unique_id_t unique_id{};
};

// Returns the exit status: kExitOk; kExitError after printing
// "plexus-bench: rank R: <call> failed: <why>" (the communicator is aborted first, so the
// other ranks fail fast instead of waiting); or, on rank 0 only, kExitWrongResults when any
// checked element was wrong (every rank knows, rank 0 alone reports it).
int run_rank(const BenchOptions& options, const RankIdentity& identity);

}  // namespace plexus::bench
