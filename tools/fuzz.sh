#!/usr/bin/env bash
# Builds the fuzz targets with clang's libFuzzer (ASan and UBSan on) in build-fuzz/ and runs
# each for a bounded time from the seeds its replay driver writes, plus what earlier runs
# found (build-fuzz/corpus/). Exits non-zero, with the crashing input kept, when one fails.
#   tools/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=$root/build-fuzz
"$root/tools/install-deps.sh"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DPLEXUS_FUZZ=ON -DPLEXUS_BUILD_PEER_BENCH=OFF \
  -DPLEXUS_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target data_frame_fuzz handshake_fuzz
# The seeds come from a plain (non-libFuzzer) build of the same target's seed list: the
# build in $PLEXUS_SEEDS_BUILD when it has one (CI's first leg), else one made here.
seeds=${PLEXUS_SEEDS_BUILD:-$build/seeds}
if [ ! -x "$seeds/tests/fuzz/data_frame_fuzz" ] || [ ! -x "$seeds/tests/fuzz/handshake_fuzz" ]; then
  seeds=$build/seeds
  cmake -S "$root" -B "$seeds" -DPLEXUS_WITH_CUDA=OFF -DPLEXUS_BUILD_PEER_BENCH=OFF >/dev/null
  cmake --build "$seeds" -j "$(nproc)" --target data_frame_fuzz handshake_fuzz
fi
for target in data_frame_fuzz handshake_fuzz; do
  corpus=$build/corpus/$target
  mkdir -p "$corpus" "$build/crashes"
  "$seeds/tests/fuzz/$target" --write-seeds "$corpus"
  echo "fuzz: $target for ${seconds}s"
  "$build/tests/fuzz/$target" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
    -artifact_prefix="$build/crashes/$target-" -print_final_stats=1 "$corpus" 2>&1 |
    grep -E "^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|ERROR|SUMMARY|Test unit written" || true
  if ls "$build/crashes/$target-"* >/dev/null 2>&1; then
    echo "fuzz: $target found a failing input: $(ls "$build/crashes/$target-"*)" >&2
    exit 1
  fi
done
echo "fuzz: no target failed"
