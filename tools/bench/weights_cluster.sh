#!/usr/bin/env bash
# The weight store's relay on namespace nodes at a shaped rate: per node count and size, a
# fresh cluster, one rollout process on each subscribed node pulling every version in turn
# into its buffer, one trainer process on node 0 publishing versions 1..V (--versions, 5)
# from its pool, each once every rollout has the one before: the time from a publish to the
# last rollout's pull of it whole (relay) and to the last node's daemon holding it whole
# (relay-stored), against W/B (the bytes once over one link at the shaped rate). Version 1
# finds no link between the nodes (each hop opens its own as it reaches it) and every buffer
# fresh (page faults: a trainer's first step); from version 4 on (the stores keep 2, and one
# more arrives), the stores reuse the buffers of the versions they let go, as a trainer
# publishing every step has them do.
# Beside it in the same cluster (its daemons restarted: their stores let go), one rank per
# node, torch.distributed.broadcast of one tensor of the same bytes from node 0's rank
# (tools/bench/torch_broadcast_bench.py), twice, with gloo over nic0 and with plexus: from
# rank 0's start to the last rank's return; the trainer's stall is rank 0's own wait. One
# line per version or broadcast:
#   nodes bytes what round to_all_s bound_s ratio trainer_stall_ms
# usage: tools/bench/weights_cluster.sh BUILD_DIR [--nodes "2 4 8"] [--sizes "256 1024"] (MiB)
#        [--rate 400mbit] [--versions 5] [--no-torch]   (needs root: ip netns, tc; torch: /usr/bin/python3's)
set -euo pipefail
build=$1; shift
nodes_list="2 4 8" sizes="256 1024" rate=400mbit torch=1 versions=5
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes_list=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --no-torch) torch=0; shift ;;
    --versions) versions=$2; shift 2 ;;
    *) echo "unknown argument $1"; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../cluster/plexus-cluster.sh
bin=$build/tests/weights_node
mbit=${rate%mbit}
if [ "$torch" = 1 ] && ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "# no torch in /usr/bin/python3 (python3-torch): the broadcasts are left out"
  torch=0
fi
if [ "$torch" = 1 ] && ! ls "$build"/python/plexus_torch*.so > /dev/null 2>&1; then
  echo "# plexus_torch was not built in $build/python: the broadcasts are left out"
  torch=0
fi
row() {  # nodes bytes what round start_ms end_ms stall_ms (one clock)
  awk -v n="$1" -v b="$2" -v w="$3" -v r="$4" -v s="$5" -v e="$6" -v st="$7" -v m="$mbit" 'BEGIN {
    t = (e - s) / 1000; bound = b * 8 / (m * 1e6)
    printf "%5d %12d %13s %5d %8.2f %8.2f %6.2f %16.1f\n", n, b, w, r, t, bound, t / bound, st }'
}
printf "%5s %12s %13s %5s %8s %8s %6s %16s\n" nodes bytes what round to_all_s bound_s ratio \
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
        timeout 1800 "$bin" "$@" --model policy --bytes "$bytes"
    }
    on 0 key --out "$dir/key"
    # One rollout process per subscribed node pulling every version in turn into the same
    # (touched) buffer, one trainer process publishing them from its pool, each version once
    # every rollout has the one before.
    pids=()
    declare -A reaped=()
    reap() {  # fails if a weights_node that ended failed
      local p
      for p in "${pids[@]}"; do
        [ -z "${reaped[$p]:-}" ] && ! kill -0 "$p" 2>/dev/null || continue
        wait "$p" || return 1
        reaped[$p]=1
      done
    }
    for ((i = 1; i < n; i++)); do
      on "$i" pull --key "$dir/key" --after 0 --count "$versions" --timeout-s 900 > "$dir/pull$i.out" &
      pids+=($!)
    done
    on 0 publish --version 1 --count "$versions" --go "$dir/go" --timeout-s 900 > "$dir/publish.out" &
    pids+=($!)
    for ((v = 1; v <= versions; v++)); do
      [ "$v" = 1 ] && sleep 2  # the subscriptions reach node 0 first: v1 goes down the chain
      touch "$dir/go$v"
      deadline=$((SECONDS + 900))
      until [ "$(cat "$dir"/pull*.out 2>/dev/null | grep -c "^pulled $v ")" -ge $((n - 1)) ]; do
        ((SECONDS < deadline)) || { echo "version $v never reached every rollout"; exit 1; }
        reap || { echo "a weights_node failed: $(cat "$dir"/*.out | tail -3)"; exit 1; }
        sleep 0.2
      done
      start=$(awk -v v="$v" '$2 == v { print $NF }' "$dir/publish.out")
      stall=$(awk -v v="$v" '$2 == v { print $4 }' "$dir/publish.out")
      last=$(awk -v v="$v" '$2 == v { print $NF }' "$dir"/pull*.out | sort -n | tail -1)
      row "$n" "$bytes" relay "$v" "$start" "$last" "$stall"
      # Whole in every node's store (its daemon's log: the same clock), before the rollouts'
      # copies out of it.
      stored=0
      for ((i = 1; i < n; i++)); do
        at=$(grep -m1 "version $v of model 'policy' arrived" "$dir/n$i/plexusd.log" | cut -c2-24)
        [ -n "$at" ] || continue
        ms=$(date -d "$at" +%s%3N)
        [ "$ms" -gt "$stored" ] && stored=$ms
      done
      row "$n" "$bytes" relay-stored "$v" "$start" "$stored" "$stall"
      # When each node's rollout had it (down the chain: the nodes subscribed in turn).
      for ((i = 1; i < n; i++)); do
        awk -v s="$start" -v i="$i" -v v="$v" '$2 == v { printf " n%d +%.2f", i, ($NF - s) / 1000 }' "$dir/pull$i.out"
      done | sed 's/^/#   pulled at:/'
      echo
    done
    for p in "${pids[@]}"; do [ -n "${reaped[$p]:-}" ] || wait "$p"; done
    if [ "$torch" = 1 ]; then
      "$cluster" daemons --name "$tag" --daemons "$build" > /dev/null
      for backend in gloo plexus; do
        pids=()
        for ((i = 0; i < n; i++)); do
          "$cluster" run --name "$tag" --node "$i" -- env PLEXUS_AUTOSTART=0 \
            PLEXUS_POOL_SIZE=$((2 * bytes + (64 << 20))) GLOO_SOCKET_IFNAME=nic0 PYTHONPATH="$build/python" \
            timeout 900 /usr/bin/python3 -W ignore "$here/torch_broadcast_bench.py" \
            --backend "$backend" --rank "$i" --world "$n" --store "$dir/store-$backend" \
            --bytes "$bytes" > "$dir/bcast-$backend$i.out" 2> "$dir/bcast-$backend$i.err" &
          pids+=($!)
        done
        for i in "${!pids[@]}"; do
          wait "${pids[$i]}" ||
            { echo "broadcast ($backend) failed on node $i:"; tail -5 "$dir/bcast-$backend$i.err"; exit 1; }
        done
        for round in 1 2; do
          start=$(awk -v r="$round" '$1 == r { print $2 }' "$dir/bcast-${backend}0.out")
          stall=$(awk -v r="$round" '$1 == r { print $3 - $2 }' "$dir/bcast-${backend}0.out")
          last=$(awk -v r="$round" '$1 == r { print $3 }' "$dir"/bcast-"$backend"*.out | sort -n | tail -1)
          row "$n" "$bytes" "$backend-bcast" "$round" "$start" "$last" "$stall"
        done
      done
    fi
    "$cluster" down --name "$tag" >/dev/null
    trap - EXIT
  done
done
