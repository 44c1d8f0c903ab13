#!/usr/bin/env bash
# The weight store across 4 namespace nodes (200 Mbit/s): node 0 publishes, nodes 1-3 each run
# two rollouts that subscribe with the key and pull every version checked byte for byte; a
# rollout that joins late is served from its own node's store; node 2's daemon is killed
# while version 2 goes down the chain, and nodes 1 and 3 still get it whole (node 1 passes
# it on to node 3 past the lost node); node 2 comes back, subscribes again and is sent the
# newest version. Exit 77 (ctest SKIP) with the reason where namespaces cannot be made.
set -uo pipefail
repo=$1
build=$2
cluster=$repo/tools/cluster/plexus-cluster.sh
node_bin=$build/tests/weights_node

# shellcheck source=require_netns.sh
. "$(dirname "$0")/require_netns.sh"

tag=wt$$
dir=/tmp/plexus-cluster-$tag
trap '"$cluster" down --name "$tag" >/dev/null 2>&1' EXIT
"$cluster" up --name "$tag" --nodes 4 --rate 200mbit --daemons "$build" >/dev/null ||
  { echo "FAIL: cluster up"; exit 1; }
bytes=$((64 << 20))  # about 2.7 s a hop at 200 Mbit/s
fail() {
  echo "FAIL: $*"
  for f in "$dir"/*.out; do [ -s "$f" ] && { echo "---- $f"; tail -5 "$f"; }; done
  for n in 0 1 2 3; do echo "---- n$n"; tail -20 "$dir/n$n/plexusd.log"; done
  exit 1
}
on() {  # node, args... (a weights_node run there)
  local n=$1; shift
  "$cluster" run --name "$tag" --node "$n" -- env PLEXUS_AUTOSTART=0 PLEXUS_POOL_SIZE=$((256 << 20)) \
    timeout 120 "$node_bin" "$@" --model policy --bytes "$bytes"
}
pulled() { grep -h "^pulled $1 " "${@:2}" 2>/dev/null | wc -l; }

on 0 key --out "$dir/key" >/dev/null 2>&1 || fail "the key"
# The rollouts: two a node, each subscribing with the key (the second's is a no-op) and
# waiting for version 1.
pids=()
for n in 1 2 3; do
  for r in 0 1; do
    on "$n" pull --key "$dir/key" --after 0 > "$dir/r$n$r.v1.out" 2>&1 &
    pids+=($!)
  done
done
# A node whose subscription reaches node 0 after the publish is sent version 1 at once (a late
# joiner): either way every rollout gets it; the pause only lets most take the chain.
sleep 1
on 0 publish --version 1 > "$dir/p1.out" 2>&1 || fail "publish 1: $(cat "$dir/p1.out")"
for p in "${pids[@]}"; do wait "$p" || fail "a rollout's pull of version 1"; done
[ "$(pulled 1 "$dir"/r*.v1.out)" -eq 6 ] || fail "not every rollout pulled version 1"
echo "ok 6 rollouts on 3 nodes pulled version 1 exact: $(cat "$dir/p1.out")"

# A rollout that joins late, on node 3: served at once from its own node's store.
on 3 pull --after 0 --timeout-s 5 > "$dir/late.out" 2>&1 || fail "the late rollout"
[ "$(pulled 1 "$dir/late.out")" -eq 1 ] || fail "the late rollout did not get version 1"
echo "ok a late rollout on node 3 pulled version 1 from its node's store"

# Version 2 goes down the chain n1 -> n2 -> n3; node 2's daemon dies on the way.
pids=()
for n in 1 3; do
  for r in 0 1; do
    on "$n" pull --after 1 > "$dir/r$n$r.v2.out" 2>&1 &
    pids+=($!)
  done
done
on 0 publish --version 2 > "$dir/p2.out" 2>&1 &
publisher=$!
sleep 0.5
"$cluster" daemon --name "$tag" --node 2 kill
wait "$publisher" || fail "publish 2: $(cat "$dir/p2.out")"
for p in "${pids[@]}"; do wait "$p" || fail "a rollout's pull of version 2 on node 1 or 3"; done
[ "$(pulled 2 "$dir"/r1?.v2.out "$dir"/r3?.v2.out)" -eq 4 ] || fail "nodes 1 and 3 did not all get version 2"
skipped=$(cat "$dir"/n[013]/plexusd.log | grep -c "lost while version 2 went to it" || true)
echo "ok node 2 killed mid-push; nodes 1 and 3 pulled version 2 exact" \
  "($([ "$skipped" -gt 0 ] && echo "the chain went on past node 2" || echo "node 2 was not next to anyone then"))"

# Node 2 comes back: its rollout subscribes again and is sent the newest version.
"$cluster" daemon --name "$tag" --node 2 start || fail "node 2's daemon did not start again"
on 2 pull --key "$dir/key" --after 0 > "$dir/back.out" 2>&1 || fail "node 2's rollout after its restart"
[ "$(pulled 2 "$dir/back.out")" -eq 1 ] || fail "node 2 did not get version 2 after its restart"
echo "ok node 2 came back, subscribed again and pulled version 2 exact"
echo "PASS: the weight store across 4 nodes: chain, late rollout, a node lost mid-push and back"
