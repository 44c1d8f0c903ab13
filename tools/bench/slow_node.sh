#!/usr/bin/env bash
# A slow node against the allreduce's lower bound (results in docs/BENCHMARKS.md, "A slow
# node against the allreduce's lower bound"): 4 namespace nodes x 1 NIC at
# RATE (tc tbf, a 16 KiB bucket so every byte pays its wire time), 1 rank per node; node n3
# healthy, then shaped to RATE/2 and RATE/4; at each, SIZE allreduces by the ring
# (PLEXUS_ALGO=ring), by offload forced (PLEXUS_ALGO=offload, n3 the slow one) and as
# plexusd chooses from the measured bandwidths (warm-ups first, so that the change is agreed
# before the timed ops). Prints each one's mean time over the ranks' slowest, the bound
# (N/B) max(1/x, 2 - 1/(p-1)) at the nominal rate and at TCP's goodput over 1500-byte
# frames (1448 of every 1514 bytes the shaper counts), and the ratios. With COLLECTIVE
# allgather, SIZE is the gathered result (each node's block SIZE/4), and the bound is the
# offload allgather's, max(1/(p x), 1/p + (q-1)/q) N/B (q = p-1; (p-1)/p N/B healthy).
# Needs root.
#   tools/bench/slow_node.sh BUILD_DIR [RATE=400mbit] [SIZE=32M] [ITERS=10] [WARMUP=5]
#                            [COLLECTIVE=allreduce|allgather]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: slow_node.sh BUILD_DIR [RATE] [SIZE] [ITERS] [WARMUP] [COLLECTIVE]}" && pwd)
rate=${2:-400mbit}
size=${3:-32M}
iters=${4:-10}
warmup=${5:-5}
collective=${6:-allreduce}
case $collective in allreduce | allgather) ;; *) echo "slow_node: COLLECTIVE must be allreduce or allgather" >&2; exit 2 ;; esac
cluster=$root/tools/cluster/plexus-cluster.sh
bench=$build/tools/plexus-bench/plexus-bench
mbit=${rate%mbit}
[ "$mbit" != "$rate" ] || { echo "slow_node: RATE must be in mbit (e.g. 400mbit)" >&2; exit 2; }
name=slowbench$$
dir=/tmp/plexus-cluster-$name
trap '"$cluster" down --name "$name" >/dev/null 2>&1 || true' EXIT
"$cluster" up --name "$name" --nodes 4 --nics 1 --rate "$rate" --burst 16kb --daemons "$build" >/dev/null
run() {  # algo tag -> mean us (the bench's out-of-place time: the slowest rank's mean)
  local algo=$1 tag=$2 n pids=()
  for n in 0 1 2 3; do
    "$cluster" run --name "$name" --node "$n" -- env ${algo:+PLEXUS_ALGO=$algo} "$bench" \
      --nodes 1,1,1,1 --node "$n" --id-file "$dir/id-$tag" -C "$collective" -b "$size" -e "$size" \
      -n "$iters" -w "$warmup" -c 1 --timeout-s 600 > "$dir/$tag-$n.log" 2>&1 &
    pids+=($!)
  done
  for n in 0 1 2 3; do wait "${pids[$n]}" || { echo "node $n failed: $(tail -3 "$dir/$tag-$n.log")" >&2; exit 1; }; done
  awk '/^ +[0-9]/ { if ($9 != 0 || $13 != 0) { print "wrong results" > "/dev/stderr"; exit 1 } print $6, $10 }' "$dir/$tag-0.log"
}
printf "%-8s %-8s %12s %12s %10s %10s\n" "n3" "algo" "oop_ms" "inplace_ms" "/bound" "/goodput"
for x in 1 2 4; do
  if [ "$x" = 1 ]; then
    "$cluster" shape --name "$name" --node 3 --nic 0 --rate "$rate"
  else
    "$cluster" shape --name "$name" --node 3 --nic 0 --rate "$((mbit / x))mbit"
  fi
  for algo in ring offload auto; do
    read -r oop inplace < <(run "$([ "$algo" = auto ] || echo "$algo")" "$algo-$x")
    awk -v x="$x" -v a="$algo" -v o="$oop" -v i="$inplace" -v mbit="$mbit" -v size="$size" -v c="$collective" 'BEGIN {
      n = size; sub(/[KMG]$/, "", n); u = substr(size, length(size)); n *= (u == "K" ? 1024 : u == "M" ? 1048576 : u == "G" ? 1073741824 : 1)
      b = mbit * 1e6 / 8; p = 4; q = p - 1   # n3 runs at 1/x of b
      if (c == "allgather") {
        h = 1 / p + (q - 1) / q
        bound = n / b * (x / p > h ? x / p : h) * 1e6
        if (x == 1) bound = n / b * (p - 1) / p * 1e6   # healthy: the ring bound
      } else {
        h = 2 - 1 / (p - 1)
        bound = n / b * (x > h ? x : h) * 1e6
        if (x == 1) bound = n / b * 2 * (p - 1) / p * 1e6   # healthy: the ring bound
      }
      good = bound * 1514 / 1448
      m = (o < i ? o : i)
      printf "%-8s %-8s %12.1f %12.1f %10.3f %10.3f\n", (x == 1 ? "healthy" : "1/" x), a, o / 1000, i / 1000, m / bound, m / good
    }'
  done
done
