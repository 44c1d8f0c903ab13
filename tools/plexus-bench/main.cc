// plexus-bench: the nccl-tests equivalent for Plexus. main() only picks how the ranks come
// to exist; see launcher.h for that and bench_rank.h for what each rank does.
#include <utility>
#include <variant>

#include "tools/plexus-bench/launcher.h"
#include "tools/plexus-bench/options.h"

int main(int argc, char** argv) {
  using namespace plexus::bench;
  auto parsed = parse_options(argc, argv);
  if (const int* exit_status = std::get_if<int>(&parsed)) return *exit_status;
  BenchOptions options = std::get<BenchOptions>(std::move(parsed));
  return options.spawn > 0 ? run_spawned(std::move(options))
                           : run_from_environment(std::move(options));
}
