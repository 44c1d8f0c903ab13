// Getting the rank processes going: forking them (--spawn) next to an existing or embedded
// plexusd, or joining a job the user started one process per rank.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "plexus/plexus.h"
#include "tools/plexus-bench/options.h"

namespace plexus::bench {

// --spawn N: forks the N rank processes, starts an embedded plexusd after them when none
// answers (unless --no-embedded), waits for the ranks within --timeout-s and reports each
// rank that failed. Returns the exit status.
int run_spawned(BenchOptions options);

// Without --spawn: this process is the rank PLEXUS_RANK of PLEXUS_NRANKS and exchanges the
// unique id through PLEXUS_UNIQUE_ID_FILE. Returns the exit status.
int run_from_environment(BenchOptions options);

}  // namespace plexus::bench
