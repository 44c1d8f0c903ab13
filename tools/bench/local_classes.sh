#!/usr/bin/env bash
# Classes on the node's own work, measured: on one plexusd, a latency-class job's 64 KiB
# allreduce (2 ranks, one every 20 ms) alone, then beside a bulk job's back-to-back 64 MiB
# allreduces (2 ranks) within the node; with --local-slice-bytes 0 (no cut: the latency op
# waits for a whole bulk op) and with the default slices, side by side in one run.
# Prints, per mode: the latency op's median and p90 (last rank's submission to last rank's
# completion) alone and beside bulk, and the bulk job's algbw (MB/s).
# Usage: [SLICES="0 default 1048576"] tools/bench/local_classes.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
build=${1:-build}
seconds=${2:-6}
plexusd="$build/daemon/plexusd"
job_load="$build/tools/plexus-bench/job_load"
for f in "$plexusd" "$job_load"; do
  [ -x "$f" ] || { echo "local_classes.sh: $f is not built" >&2; exit 2; }
done
dir=$(mktemp -d /tmp/plexus-local-classes.XXXXXX)
daemon=
cleanup() {
  [ -z "$daemon" ] || kill "$daemon" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

# job NAME BYTES INTERVAL_MS: both ranks, until done; their times in $dir/NAME.{0,1}.times
run_job() {
  local job=$1 bytes=$2 interval=$3
  rm -f "$dir/$job.id" "$dir/$job.id.stop"
  for r in 0 1; do
    PLEXUS_JOB=$job PLEXUS_SOCKET="$dir/s.sock" PLEXUS_AUTOSTART=0 "$job_load" --rank "$r" \
      --id-file "$dir/$job.id" --bytes "$bytes" --seconds "$seconds" --interval-ms "$interval" \
      --out "$dir/$job.$r.times" > "$dir/$job.$r.log" 2>&1 &
    pids+=($!)
  done
}
# Waits for the ranks started since the last call; a failed rank stops the run.
wait_jobs() {
  local p
  for p in "${pids[@]}"; do
    wait "$p" || { echo "local_classes.sh: a rank failed:" >&2; cat "$dir"/*.log >&2; exit 1; }
  done
  pids=()
}
pids=()

# Per op: from the later submission to the later completion, in ms; "median p90 ops".
op_stats() {
  paste -d' ' "$dir/$1.0.times" "$dir/$1.1.times" |
    awk '{ s = ($1 > $3) ? $1 : $3; e = ($2 > $4) ? $2 : $4; print (e - s) / 1e6 }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) { print "none"; exit }
           p = int(NR * 0.9); if (p < 1) p = 1
           printf "%.3f %.3f %d\n", v[int((NR + 1) / 2)], v[p], NR }'
}

# The bulk job's MB/s: bytes x ops over its span on rank 0.
bulk_mbps() {
  awk -v b="$1" 'NR == 1 { first = $1 } { last = $2; n++ }
                 END { printf "%.1f\n", n * b / ((last - first) / 1e9) / 1e6 }' "$dir/bulk.0.times"
}

printf "%-22s %24s %24s %12s\n" "plexusd" "latency alone ms (p90)" "beside bulk ms (p90)" "bulk MB/s"
for slice in ${SLICES:-0 default}; do
  args=(--socket "$dir/s.sock" --job lat=latency --log-level warn)
  [ "$slice" = default ] || args+=(--local-slice-bytes "$slice")
  "$plexusd" "${args[@]}" > "$dir/plexusd.$slice.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
  run_job lat 65536 20
  wait_jobs
  read -r alone_med alone_p90 _ <<< "$(op_stats lat)"
  run_job bulk $((64 << 20)) 0
  run_job lat 65536 20
  wait_jobs
  read -r med p90 _ <<< "$(op_stats lat)"
  printf "%-22s %15s (%6s) %15s (%6s) %12s\n" "--local-slice-bytes $slice" "$alone_med" "$alone_p90" \
    "$med" "$p90" "$(bulk_mbps $((64 << 20)))"
  kill "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=
  rm -f "$dir/s.sock"
done
