#!/usr/bin/env bash
# Several jobs at once on a shaped 2-node namespace cluster (1 NIC, 1 rank per node per job):
# what each gets of the link and how long its ops take. Used by the multi-job scheduling
# test (tests/cluster/job_share_test.sh) and for docs/BENCHMARKS.md.
#
#   job_share.sh BUILD_DIR [--rate 400mbit] [--burst 256kb] [--seconds 8] [--tcp-cc NAME] \
#                [--daemon-args "ARGS"] [--daemons-from OTHER_BUILD_DIR] \
#                [--change-at SECONDS --change "PLEXUSCTL ARGS"] JOB...
#   JOB: NAME:BYTES[:INTERVAL_MS[:DEPTH]]  allreduces of BYTES back to back (INTERVAL_MS 0 or
#        none), DEPTH of them in flight (default 1); or one every INTERVAL_MS
#
# Every job starts together; each runs --seconds (its rank 0 decides), and what is reported
# is over the window in which all of them ran, with the first second left out:
#   job NAME bytes B ops N mbps M share S median_ms X p90_ms Y window_s W sent_mbps D sent_share E
# where M is MB/s of allreduce payload (each node sends about that much), S its part of the
# jobs' total, and sent_mbps and sent_share the same from node 0's daemon: the bytes its
# send scheduler gave each job (plexusctl jobs --json, sampled 4 times a second) over the
# window. The daemon's figure is the exact one: an op's payload is spread evenly over the op
# by the client's, which blurs the window's edges when ops are long; and the op times are over the whole run, each from the last rank's submission
# to the last rank's completion (what a peer waiting on the slowest rank would see). --burst
# is the shaper's bucket (plexus-cluster.sh): small, so that an op alone pays its wire time.
# --tcp-cc is the nodes' TCP congestion control (plexus-cluster.sh; default: the host's).
# --daemons-from runs OTHER_BUILD_DIR's
# plexusd (e.g. a build from before a change) with this build's clients. --change runs
# plexusctl with those arguments on every node --change-at seconds after the jobs start
# (e.g. "job set heavy --class bulk --weight 3"); then each job's line also has
# before_share (its sent_share from the window's start to the change) and after_share
# (from 1 s after the change to 4 s after it: what is in effect within a second of it, over
# 3 s so that where ops begin and end in it moves the ratio little;
# from the samples nearest those times). Needs root.
set -euo pipefail
build=$(cd "$1" && pwd); shift
repo=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$repo/tools/cluster/plexus-cluster.sh
rate=400mbit burst=256kb seconds=8 change_at="" change="" daemon_args="" daemons_from="" tcp_cc=""
jobs=()
while [ $# -gt 0 ]; do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --burst) burst=$2; shift 2 ;;
    --tcp-cc) tcp_cc=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --change-at) change_at=$2; shift 2 ;;
    --change) change=$2; shift 2 ;;
    --daemon-args) daemon_args=$2; shift 2 ;;
    --daemons-from) daemons_from=$(cd "$2" && pwd); shift 2 ;;
    *) jobs+=("$1"); shift ;;
  esac
done
[ ${#jobs[@]} -ge 1 ] || { echo "job_share.sh: name at least one JOB" >&2; exit 2; }
name=js$$
dir=/tmp/plexus-cluster-$name
sampler="" changer=""
cleanup() {
  # The sampler and the changer first: they would otherwise run out their own time.
  for p in $sampler $changer; do kill "$p" 2>/dev/null || true; done
  pkill -f -- "--id-file $dir/" 2>/dev/null || true
  wait 2>/dev/null || true
  "$cluster" down --name "$name" >/dev/null 2>&1 || true
}
trap cleanup EXIT
PLEXUS_CLUSTER_DAEMON_ARGS="$daemon_args" PLEXUS_CLUSTER_LOG_LEVEL=warn \
  "$cluster" up --name "$name" --nodes 2 --nics 1 --rate "$rate" --burst "$burst" ${tcp_cc:+--tcp-cc "$tcp_cc"} \
  --daemons "${daemons_from:-$build}" >/dev/null
# node 0's daemon: what its scheduler sent for each job, as "time_ns json" lines, 4 a second
( for _ in $(seq 1 $(( (${seconds%.*} + 30) * 4 ))); do
    sample=$("$cluster" run --name "$name" --node 0 -- "$build/tools/plexusctl/plexusctl" jobs --json 2>/dev/null) &&
      echo "$(date +%s%N) $(tr -d '\n' <<< "$sample")"
    sleep 0.25
  done ) > "$dir/sent.samples" &
sampler=$!
pids=()
for spec in "${jobs[@]}"; do
  IFS=: read -r job bytes interval depth <<< "$spec"
  for n in 0 1; do
    "$cluster" run --name "$name" --node "$n" -- env PLEXUS_JOB="$job" "$build/tools/plexus-bench/job_load" \
      --rank "$n" --id-file "$dir/$job.id" --bytes "$bytes" --seconds "$seconds" \
      --interval-ms "${interval:-0}" --depth "${depth:-1}" --out "$dir/$job.$n.times" > "$dir/$job.$n.log" 2>&1 &
    pids+=($!)
  done
done
if [ -n "$change" ]; then
  ( sleep "${change_at:-3}"
    for n in 0 1; do
      # shellcheck disable=SC2086  # the arguments are a list on purpose
      "$cluster" run --name "$name" --node "$n" -- "$build/tools/plexusctl/plexusctl" $change >&2 ||
        echo "job_share.sh: plexusctl $change failed on node $n" >&2
    done
    date +%s%N > "$dir/change.at" ) &
  changer=$!
fi
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ -z "$change" ] || wait "$changer" || true
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
if [ "$status" -ne 0 ]; then
  for spec in "${jobs[@]}"; do
    IFS=: read -r job _ <<< "$spec"
    for n in 0 1; do awk -v tag="$job.$n: " '{ print tag $0 }' "$dir/$job.$n.log"; done
  done
  echo "job_share.sh: a job failed" >&2
  exit 1
fi
/usr/bin/python3 - "$dir" "${jobs[@]}" <<'PY'
import json, sys, statistics
d = sys.argv[1]
jobs = []
for spec in sys.argv[2:]:
    parts = spec.split(':')
    ranks = [[tuple(map(int, l.split())) for l in open(f"{d}/{parts[0]}.{n}.times")]
             for n in (0, 1)]
    if len(ranks[0]) != len(ranks[1]):
        sys.exit(f"job_share.sh: job {parts[0]}'s ranks ran {len(ranks[0])} and {len(ranks[1])} ops")
    times = [(max(a[0], b[0]), max(a[1], b[1])) for a, b in zip(*ranks)]
    if not times:
        sys.exit(f"job_share.sh: job {parts[0]} ran no op")
    jobs.append((parts[0], int(parts[1]), times))
lo = max(t[0][0] for _, _, t in jobs) + 1e9
hi = min(t[-1][1] for _, _, t in jobs)
if hi <= lo:
    sys.exit("job_share.sh: the jobs did not overlap by more than a second")
rates = {}
for name, size, times in jobs:
    got = 0.0
    for s, e in times:
        overlap = min(e, hi) - max(s, lo)
        if overlap > 0 and e > s:
            got += size * overlap / (e - s)
    rates[name] = got / ((hi - lo) / 1e9) / 1e6
total = sum(rates.values())
# The daemon's bytes sent per job, between the first and last samples inside the window.
samples = []
for line in open(f"{d}/sent.samples"):
    at, _, text = line.partition(' ')
    try:
        samples.append((int(at), {j["name"]: j["sent_to_peers_bytes"] for j in json.loads(text)}))
    except (ValueError, KeyError, TypeError):
        pass
inside = [s for s in samples if lo <= s[0] <= hi]
sent = {}
if len(inside) >= 2:
    (t0, first), (t1, last) = inside[0], inside[-1]
    for name, _, _ in jobs:
        sent[name] = (last.get(name, 0) - first.get(name, 0)) / ((t1 - t0) / 1e9) / 1e6
sent_total = sum(sent.values())
def shares(t0, t1):  # each job's part of the bytes sent between the samples nearest t0, t1
    a = min(samples, key=lambda s: abs(s[0] - t0))[1]
    b = min(samples, key=lambda s: abs(s[0] - t1))[1]
    got = {name: b.get(name, 0) - a.get(name, 0) for name, _, _ in jobs}
    total = sum(got.values())
    return {name: got[name] / total if total else 0 for name in got}
extra = {}
try:
    changed = int(open(f"{d}/change.at").read())
    if changed + 4e9 > hi:
        sys.exit("job_share.sh: the jobs stopped before 4 s after the change: "
                 "run them longer (--seconds) or change sooner (--change-at)")
    before, after = shares(lo, changed), shares(changed + 1e9, changed + 4e9)
    extra = {name: f" before_share {before[name]:.3f} after_share {after[name]:.3f}"
             for name, _, _ in jobs}
except (FileNotFoundError, ValueError):
    pass
for name, size, times in jobs:
    durations = sorted((e - s) / 1e6 for s, e in times)
    print(f"job {name} bytes {size} ops {len(times)} mbps {rates[name]:.2f} "
          f"share {rates[name] / total if total else 0:.3f} "
          f"median_ms {statistics.median(durations):.3f} "
          f"p90_ms {durations[int(0.9 * (len(durations) - 1))]:.3f} window_s {(hi - lo) / 1e9:.1f} "
          f"sent_mbps {sent.get(name, 0):.2f} "
          f"sent_share {sent.get(name, 0) / sent_total if sent_total else 0:.3f}{extra.get(name, '')}")
PY
