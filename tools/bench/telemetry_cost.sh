#!/usr/bin/env bash
# What windowed telemetry costs: two namespace clusters alike (N nodes x 2 NICs, so the
# reliable channel and per-chunk recording are on), one whose plexusds run --telemetry on
# (1 ms windows), one --telemetry off, measured in turn R times (interleaved, so a slow spell
# of the machine hits both alike): allreduce busbw at the large size and latency at 8 B.
# Prints each run and the medians with the on/off ratios. Needs root.
#   tools/bench/telemetry_cost.sh --build-dir DIR [--nodes 2] [--repeat 7] [--large 64M]
#       [--large-iters 5] [--small-iters 300]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$root/tools/cluster/plexus-cluster.sh
die() { echo "telemetry_cost: $*" >&2; exit 2; }

build="" nodes=2 repeat=7 large=64M large_iters=5 small_iters=300
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --large) large=$2; shift 2 ;;
    --large-iters) large_iters=$2; shift 2 ;;
    --small-iters) small_iters=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$build" ] || die "--build-dir is required"
bench=$build/tools/plexus-bench/plexus-bench
placement=$(seq -s, 1 "$nodes" | sed 's/[0-9]\+/1/g')
tags=(tcon$$ tcoff$$)
cleanup() { for t in "${tags[@]}"; do "$cluster" down --name "$t" > /dev/null 2>&1 || true; done; }
trap cleanup EXIT
PLEXUS_CLUSTER_LOG_LEVEL=warn PLEXUS_CLUSTER_DAEMON_ARGS="--telemetry on --telemetry-window-us 1000" \
  "$cluster" up --name "${tags[0]}" --nodes "$nodes" --nics 2 --daemons "$build" > /dev/null
PLEXUS_CLUSTER_LOG_LEVEL=warn PLEXUS_CLUSTER_DAEMON_ARGS="--telemetry off" \
  "$cluster" up --name "${tags[1]}" --nodes "$nodes" --nics 2 --daemons "$build" > /dev/null

# One measurement on cluster $1: prints "<out-of-place time us> <busbw GB/s>" of size $2.
# (Called in a subshell: each call names its files afresh.)
measure() {
  local tag=$1 size=$2 iters=$3 warmup=$4 dir=/tmp/plexus-cluster-$1
  local run=$size.$RANDOM$RANDOM
  local pids=()
  for n in $(seq 0 $((nodes - 1))); do
    "$cluster" run --name "$tag" --node "$n" -- "$bench" --nodes "$placement" --node "$n" \
      --id-file "$dir/id.$run" -C allreduce -b "$size" -e "$size" -n "$iters" -w "$warmup" \
      --stat median -c 0 --timeout-s 300 > "$dir/out.$run.$n" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$dir/out.$run."*; die "a run failed"; }; done
  awk '!/^#/ && NF >= 9 { print $6, $8; exit }' "$dir/out.$run.0"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A busbw latency
printf '%-4s %-10s %16s %16s\n' rep telemetry "busbw@$large GB/s" "8 B latency us"
for r in $(seq 1 "$repeat"); do
  # Alternate which goes first, so neither always follows the other.
  order=(0 1)
  [ $((r % 2)) -eq 0 ] && order=(1 0)
  for i in "${order[@]}"; do
    t=${tags[$i]}
    b=$(measure "$t" "$large" "$large_iters" 1 | awk '{ print $2 }')
    l=$(measure "$t" 8 "$small_iters" 20 | awk '{ print $1 }')
    busbw[$i]+="$b "
    latency[$i]+="$l "
    printf '%-4s %-10s %16s %16s\n' "$r" "$([ "$i" -eq 0 ] && echo on || echo off)" "$b" "$l"
  done
done
on_b=$(tr ' ' '\n' <<< "${busbw[0]}" | grep . | median)
off_b=$(tr ' ' '\n' <<< "${busbw[1]}" | grep . | median)
on_l=$(tr ' ' '\n' <<< "${latency[0]}" | grep . | median)
off_l=$(tr ' ' '\n' <<< "${latency[1]}" | grep . | median)
echo
printf 'median of %s runs, %s nodes x 2 NICs:\n' "$repeat" "$nodes"
printf '  busbw at %s: on %s GB/s, off %s GB/s, on/off %.3f\n' "$large" "$on_b" "$off_b" \
  "$(awk -v a="$on_b" -v b="$off_b" 'BEGIN { print a / b }')"
printf '  8 B latency:  on %s us, off %s us, on/off %.3f\n' "$on_l" "$off_l" \
  "$(awk -v a="$on_l" -v b="$off_l" 'BEGIN { print a / b }')"
