#!/usr/bin/env bash
# The main job: install what is missing, build (Release), and run plexus-bench with 4
# local ranks over allreduce 8 B .. 64 MiB against an automatically started daemon.
# Extra arguments go to plexus-bench (e.g. -b 1M -e 256M, -C all, --stat median).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PLEXUS_BUILD_DIR:-$root/build-release}

"$root/tools/install-deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPLEXUS_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target plexus-bench plexusd plexusctl
exec "$build/tools/plexus-bench/plexus-bench" -C allreduce --spawn 4 -b 8 -e 64M -f 2 "$@"
