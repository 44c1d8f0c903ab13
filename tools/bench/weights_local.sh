#!/usr/bin/env bash
# The weight store on this node: weights_bench against a plexusd of its own (a 6 GiB store,
# a 4 GiB pool for the bench), 256 MiB and 1 GiB, the median of 9 publishes and pulls each.
# usage: tools/bench/weights_local.sh [BUILD_DIR]   (default: build)
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d /tmp/plexus-weights-bench.XXXXXX)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
"$build/daemon/plexusd" --socket "$dir/s.sock" --metrics-listen 127.0.0.1:0 \
  --weight-store-bytes $((6 << 30)) >"$dir/plexusd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
[ -S "$dir/s.sock" ] || { echo "plexusd did not start:"; cat "$dir/plexusd.log"; exit 1; }
PLEXUS_SOCKET=$dir/s.sock PLEXUS_AUTOSTART=0 PLEXUS_POOL_SIZE=$((4 << 30)) \
  timeout 600 "$build/tools/bench/weights_bench" --reps 9 --bytes $((256 << 20)) --bytes $((1 << 30))
