#!/usr/bin/env bash
# The weight store's relay on namespace nodes at a shaped rate: per node count and size, a
# fresh cluster, one rollout a subscribed node waiting for version 1, then node 0 publishes
# it; the time from the publish to the last node's pull of it whole, against W/B (the bytes
# once over one link at the shaped rate). One line per run:
#   nodes bytes publish_to_all_s bound_s ratio trainer_stall_ms
# usage: tools/bench/weights_cluster.sh BUILD_DIR [--nodes "2 4 8"] [--sizes "256 1024"] (MiB)
#        [--rate 400mbit]   (needs root: ip netns, tc)
set -euo pipefail
build=$1; shift
nodes_list="2 4 8" sizes="256 1024" rate=400mbit
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes_list=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    *) echo "unknown argument $1"; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../cluster/plexus-cluster.sh
bin=$build/tools/bench/weights_node
mbit=${rate%mbit}
printf "%5s %12s %16s %8s %6s %16s\n" nodes bytes publish_to_all_s bound_s ratio trainer_stall_ms
for n in $nodes_list; do
  for mib in $sizes; do
    tag=wb$$n$mib
    dir=/tmp/plexus-cluster-$tag
    "$cluster" up --name "$tag" --nodes "$n" --rate "$rate" --daemons "$build" >/dev/null
    trap '"$cluster" down --name "$tag" >/dev/null 2>&1' EXIT
    bytes=$((mib << 20))
    pool=$((bytes + (64 << 20)))
    on() {
      local node=$1; shift
      "$cluster" run --name "$tag" --node "$node" -- env PLEXUS_AUTOSTART=0 PLEXUS_POOL_SIZE=$pool \
        timeout 600 "$bin" "$@" --model policy --bytes "$bytes"
    }
    on 0 key --out "$dir/key"
    pids=()
    for ((i = 1; i < n; i++)); do
      on "$i" pull --key "$dir/key" --after 0 --timeout-s 600 > "$dir/pull$i.out" &
      pids+=($!)
    done
    sleep 2  # the subscriptions reach node 0 first: the version goes down the chain
    on 0 publish --version 1 > "$dir/publish.out"
    for p in "${pids[@]}"; do wait "$p"; done
    start=$(awk '{print $NF}' "$dir/publish.out")
    stall=$(awk '{print $4}' "$dir/publish.out")
    last=$(awk '{print $NF}' "$dir"/pull*.out | sort -n | tail -1)
    awk -v n="$n" -v b="$bytes" -v s="$start" -v l="$last" -v m="$mbit" -v st="$stall" 'BEGIN {
      t = (l - s) / 1000; bound = b * 8 / (m * 1e6)
      printf "%5d %12d %16.2f %8.2f %6.2f %16.1f\n", n, b, t, bound, t / bound, st }'
    "$cluster" down --name "$tag" >/dev/null
    trap - EXIT
  done
done
