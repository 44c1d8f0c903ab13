#!/usr/bin/env bash
# The weight store's relay on namespace nodes at a shaped rate: per node count and size, a
# fresh cluster, one rollout a subscribed node waiting for each version, node 0 publishing
# versions 1 and 2; the time from a publish to the last node's pull of it whole, against W/B
# (the bytes once over one link at the shaped rate). Version 1 finds no link between the
# nodes (each hop opens its own as the version reaches it); version 2 finds them open. One
# line per version:
#   nodes bytes version publish_to_all_s bound_s ratio trainer_stall_ms
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
bin=$build/tests/weights_node
mbit=${rate%mbit}
printf "%5s %12s %7s %16s %8s %6s %16s\n" nodes bytes version publish_to_all_s bound_s ratio \
  trainer_stall_ms
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
    for v in 1 2; do
      pids=()
      for ((i = 1; i < n; i++)); do
        key=()
        [ "$v" = 1 ] && key=(--key "$dir/key")
        on "$i" pull "${key[@]}" --after $((v - 1)) --timeout-s 600 > "$dir/pull$i.out" &
        pids+=($!)
      done
      sleep 2  # the subscriptions reach node 0 first: the version goes down the chain
      on 0 publish --version "$v" > "$dir/publish.out"
      for p in "${pids[@]}"; do wait "$p"; done
      start=$(awk '{print $NF}' "$dir/publish.out")
      stall=$(awk '{print $4}' "$dir/publish.out")
      last=$(awk '{print $NF}' "$dir"/pull*.out | sort -n | tail -1)
      awk -v n="$n" -v b="$bytes" -v v="$v" -v s="$start" -v l="$last" -v m="$mbit" -v st="$stall" 'BEGIN {
        t = (l - s) / 1000; bound = b * 8 / (m * 1e6)
        printf "%5d %12d %7d %16.2f %8.2f %6.2f %16.1f\n", n, b, v, t, bound, t / bound, st }'
    done
    "$cluster" down --name "$tag" >/dev/null
    trap - EXIT
  done
done
