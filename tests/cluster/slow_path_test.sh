#!/usr/bin/env bash
# The slow-path rule in a 3-node x 2-NIC namespace cluster under a load of allreduces on
# every node: no slow_path event while the NICs are alike (8 s), then node 0's nic0 is
# shaped to 20 Mbit/s (tc tbf) and a slow_path event on node 0 names nic0 within 2 s;
# plexusctl paths shows the kernel's delivery rate behind it. Exit 77 (ctest SKIP) with the
# reason where namespaces cannot be created.
set -uo pipefail
repo=$1
build=$2
cluster=$repo/tools/cluster/plexus-cluster.sh
bench=$build/tools/plexus-bench/plexus-bench
ctl=$build/tools/plexusctl/plexusctl

# shellcheck source=require_netns.sh
. "$(dirname "$0")/require_netns.sh"
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"

name=slow$$
dir=/tmp/plexus-cluster-$name
load_pids=()
cleanup() {
  # The loads run inside the namespaces: end them by their id file, then their wrappers.
  pkill -f -- "--id-file $dir/id" 2>/dev/null
  [ ${#load_pids[@]} -eq 0 ] || kill "${load_pids[@]}" 2>/dev/null
  wait 2>/dev/null
  "$cluster" down --name "$name"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for n in 0 1 2; do echo "--- n$n events"; on "$n" "$ctl" events 2>&1 | tail -5; done
  exit 1
}
slow_events() { on "$1" "$ctl" events --json | grep '"kind":"slow_path"'; }

"$cluster" up --name "$name" --nodes 3 --nics 2 --daemons "$build" || fail "cluster up"
for n in 0 1 2; do
  on "$n" "$bench" --nodes 1,1,1 --node "$n" --id-file "$dir/id" -C allreduce -b 16M -e 16M \
    -n 100000 -w 0 -c 1 --timeout-s 120 > "$dir/load$n.log" 2>&1 &
  load_pids+=($!)
done
# Under way once node 0 has data on both rails (columns: NIC TRANSPORT STATE LOCAL REMOTE
# SENT, a size in two words).
for _ in $(seq 100); do
  [ "$(on 0 "$ctl" paths | awk '$3 == "active" && $7 ~ /MiB|GiB/' | wc -l)" -ge 2 ] && break
  sleep 0.1
done

echo "load under way after $SECONDS s"
echo "== 8 s of load on even NICs: no slow_path event on any node"
sleep 8
for n in 0 1 2; do
  events=$(slow_events "$n")
  [ -z "$events" ] || fail "node $n reported a slow path with even NICs: $events"
done

echo "== node 0's nic0 shaped to 20 Mbit/s: node 0 names it within 2 s"
"$cluster" shape --name "$name" --node 0 --nic 0 --rate 20mbit || fail "shape"
shaped_ms=$(date +%s%3N)
event=""
while [ $(($(date +%s%3N) - shaped_ms)) -lt 5000 ]; do
  event=$(slow_events 0 | head -1)
  [ -n "$event" ] && break
  sleep 0.1
done
[ -n "$event" ] || fail "no slow_path event on node 0 within 5 s of shaping nic0"
echo "$event"
grep -q '"nic":"nic0"' <<< "$event" || fail "the event does not name nic0"
grep -q 'the path over NIC nic0' <<< "$event" || fail "the message does not name nic0"
# From the shaping to the event's own time (not to when this loop saw it).
event_ms=$(grep -o '"unix_ms":[0-9]*' <<< "$event" | cut -d: -f2)
elapsed_ms=$((event_ms - shaped_ms))
echo "slow_path event ${elapsed_ms} ms after the shaping"
[ "$elapsed_ms" -le 2000 ] || fail "named after $elapsed_ms ms (more than 2 s)"
# The evidence is visible to an operator too: the kernel's delivery rate per path. (Whole
# outputs, then grep: with pipefail, grep -q ending a pipe early fails the writer.)
paths=$(on 0 "$ctl" paths --json) || fail "plexusctl paths --json"
grep -q '"delivery_bytes_per_s"' <<< "$paths" || fail "paths --json lacks delivery rates"
table=$(on 0 "$ctl" events) || fail "plexusctl events"
grep -q "slow_path .*nic0" <<< "$table" || fail "plexusctl events (table) lacks it"
echo "PASS"
