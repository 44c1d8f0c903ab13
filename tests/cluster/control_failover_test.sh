#!/usr/bin/env bash
# Control messages between daemons take any live path: 3 nodes x 2 NICs, no route between
# the rails. A communicator forms (its root, node 0, is reached over one NIC: the control
# connection); then the NIC that carries node 0's end of it is set down, and a new
# communicator must form and run exact (its joins go again over the other rail). Then the
# joining side's own NIC under the new control connection goes down, and a third forms.
# Exit 77 (ctest SKIP) with the reason where namespaces are unavailable.
set -uo pipefail
repo=$1
build=$2
cluster=$repo/tools/cluster/plexus-cluster.sh
bench=$build/tools/plexus-bench/plexus-bench

# shellcheck source=require_netns.sh
. "$(dirname "$0")/require_netns.sh"
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"

name=cf$$
dir=/tmp/plexus-cluster-$name
fail() {
  echo "FAIL: $*"
  for n in 0 1 2; do echo "--- n$n plexusd.log (last 20 lines)"; tail -20 "$dir/n$n/plexusd.log"; done
  exit 1
}
trap '"$cluster" down --name "$name"' EXIT
"$cluster" up --name "$name" --nodes 3 --nics 2 --daemons "$build" || fail "cluster up"

# One communicator over all three nodes (node 0 makes its id: it is the root), 4 MiB
# allreduces checked exactly; fails the test unless every node's ranks finish within 60 s.
round=0
communicator() {
  round=$((round + 1))
  local pids=() start status=0
  start=$(date +%s%N)
  for n in 0 1 2; do
    on "$n" "$bench" --nodes 1,1,1 --node "$n" --id-file "$dir/id.$round" -C allreduce -b 4M -e 4M \
      -n 3 -w 0 -c 2 --timeout-s 60 > "$dir/round$round.n$n" 2>&1 &
    pids+=($!)
  done
  for n in 0 1 2; do
    wait "${pids[$n]}" || { status=1; echo "node $n, round $round:"; cat "$dir/round$round.n$n"; }
  done
  [ $status -eq 0 ] || fail "communicator $round did not form or run exact"
  echo "communicator $round formed and ran exact in $(( ($(date +%s%N) - start) / 1000000 )) ms"
}
# The rail (NIC index) of node $1's control connection to node 0, from node $1's log line
# "control connection with node n0 (198.18.R.1:7355) established", the last one.
control_rail() {
  grep -o "control connection with node n0 (198\.18\.[0-9]*\.1:" "$dir/n$1/plexusd.log" | tail -1 |
    sed 's/.*198\.18\.\([0-9]*\)\.1:/\1/'
}

# Times the control connection between nodes 0 and 1 was replaced after a failure, by
# either end: the end that sees the failure first (its own NIC down, a data path over it
# failed, no acknowledgement) opens the new one and logs it.
moves() {
  local pattern="taking over from the one that failed"
  local one two
  one=$(grep -c "control connection with node n0 .*$pattern" "$dir/n1/plexusd.log" || true)
  two=$(grep -c "control connection with node n1 .*$pattern" "$dir/n0/plexusd.log" || true)
  echo $((one + two))
}

step "a first communicator: nodes 1 and 2 open their control connections to node 0"
communicator
rail=$(control_rail 1)
[ -n "$rail" ] || fail "node 1 logged no control connection to node 0"
echo "node 1 reaches node 0's control over rail $rail"

step "node 0's nic$rail (the control connection's far end) down: a new communicator forms"
before=$(moves)
nic 0 "$rail" down
communicator
after=$(moves)
[ "$after" -gt "$before" ] || fail "communicator 2 formed without the control connection between nodes 0 and 1 moving"
new_rail=$(control_rail 1)
[ "$new_rail" != "$rail" ] || fail "node 1's control connection is still on rail $rail"
grep -h "control connection with node n[01].*taking over" "$dir/n0/plexusd.log" "$dir/n1/plexusd.log" | tail -2
nic 0 "$rail" up

step "node 1's own nic$new_rail (its control connection's near end) down: a third forms"
before=$after
nic 1 "$new_rail" down
communicator
after=$(moves)
[ "$after" -gt "$before" ] || fail "communicator 3 formed without the control connection between nodes 0 and 1 moving"
[ "$(control_rail 1)" != "$new_rail" ] || fail "node 1's control connection is still on rail $new_rail"
nic 1 "$new_rail" up
grep -q "lost the root daemon" "$dir"/n*/plexusd.log && fail "a node reported its root lost"
echo "PASS: three communicators formed and ran exact while the control connection's NIC went down at either end"
