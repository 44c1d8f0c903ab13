#!/usr/bin/env bash
# Scale: 32 namespace nodes x 1 NIC, a plexusd and one rank on each. A communicator across all
# of them forms and an allreduce runs exact (8 B .. 256 KiB: recursive doubling, then
# halving-doubling); then every daemon but node 0 holds TCP sockets only for the
# nodes its plans talked to, not for all 31: its listener, its control connection to the root,
# up to 8 control connections to the nodes it passed the topology on to (the tree of
# daemon/control/formed_tree.h), and at most 2 log2 N + 2 data connections (recursive
# doubling's and halving-doubling's partners, the ring's two neighbours: 12 at 32 nodes;
# 23 sockets in all, with the connection from a parent that is not the root). Node 0 is the
# communicator's root
# (a control connection from every member) and its speed leader (a link to every member, which
# reports its rate over it), so it is reported, not bounded. The daemons close links and
# control connections idle for 1.5 s (--link-idle-close-ms): within 20 s every daemon, node 0
# included, holds only its two listeners, whatever N. Then every collective runs exact on the
# same daemons, over links and control connections opened again. Exit 77 (ctest SKIP) with
# the reason where namespaces cannot be created.
set -uo pipefail
repo=$1
build=$2
cluster=$repo/tools/cluster/plexus-cluster.sh
bench=$build/tools/plexus-bench/plexus-bench
nodes=${PLEXUS_SCALE_NODES:-32}

# shellcheck source=require_netns.sh
. "$(dirname "$0")/require_netns.sh"
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"

fail() { echo "FAIL: $*"; exit 1; }
name=sc$$
dir=/tmp/plexus-cluster-$name
trap '"$cluster" down --name "$name" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
placement=$(printf "1,%.0s" $(seq "$nodes")); placement=${placement%,}

# One job: every node's rank at once, exact checks on; prints node 0's table.
job() {  # label, bench arguments...
  local label=$1; shift
  rm -f "$dir/id"
  local pids=() rc=0
  for n in $(seq 0 $((nodes - 1))); do
    "$cluster" run --name "$name" --node "$n" -- "$bench" --nodes "$placement" --node "$n" \
      --id-file "$dir/id" --timeout-s 240 -c 1 "$@" > "$dir/$label.$n" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  if [ "$rc" != 0 ]; then
    for n in $(seq 0 $((nodes - 1))); do
      grep -q "failed\|error" "$dir/$label.$n" && { echo "-- node $n"; tail -5 "$dir/$label.$n"; }
    done
    return 1
  fi
  grep -v '^#' "$dir/$label.0" | head -20
}

step "$nodes nodes x 1 NIC: plexusd on each"
PLEXUS_CLUSTER_DAEMON_ARGS="--link-idle-close-ms 1500" \
  "$cluster" up --name "$name" --nodes "$nodes" --nics 1 --daemons "$build" >/dev/null ||
  fail "the cluster did not come up"

step "a communicator across all $nodes forms; allreduce 8 B .. 256 KiB exact"
job allreduce -C allreduce -b 8 -e 1M -f 32 -n 2 -w 1 || fail "allreduce across $nodes nodes"

log2=0; while [ $((1 << log2)) -lt "$nodes" ]; do log2=$((log2 + 1)); done
# Listener, control to the root, to the tree's children (8) and from a parent that is not the
# root (1), data.
bound=$((2 + 8 + 1 + 2 * log2 + 2))
step "TCP sockets per daemon (nodes 1..$((nodes - 1)) at most $bound; never one per node)"
worst=0
for n in $(seq 0 $((nodes - 1))); do
  pid=$(cat "$dir/n$n/plexusd.pid")
  socks=$(ip netns exec "px$name-n$n" ss -tanpH | grep -c "pid=$pid,")
  [ "$n" = 0 ] && { echo "node 0 (root and speed leader): $socks"; continue; }
  [ "$socks" -gt "$worst" ] && worst=$socks
  [ "$socks" -le "$bound" ] ||
    fail "node $n holds $socks TCP sockets (bound $bound): $(ip netns exec "px$name-n$n" ss -tanH | head -40)"
done
echo "nodes 1..$((nodes - 1)): at most $worst sockets each (bound $bound)"

# Two listeners (peers, metrics): the data links and the control connections (each member's
# to the root) closed while idle.
step "idle links close: within 20 s every daemon holds only its listeners"
sockets_of() { ip netns exec "px$name-n$1" ss -tanpH | grep -c "pid=$(cat "$dir/n$1/plexusd.pid"),"; }
deadline=$((SECONDS + 20))
for n in $(seq 0 $((nodes - 1))); do
  idle_bound=2
  while [ "$(sockets_of "$n")" -gt "$idle_bound" ]; do
    [ "$SECONDS" -lt "$deadline" ] ||
      fail "node $n still holds $(sockets_of "$n") TCP sockets after 20 s idle (bound $idle_bound): $(ip netns exec "px$name-n$n" ss -tanH | head -20)"
    sleep 0.5
  done
done
grep -q "closed while idle" "$dir/n1/plexusd.log" || fail "node 1 logged no link closed while idle"
echo "every daemon at its idle bound (node 0: $(sockets_of 0), node 1: $(sockets_of 1))"

step "every collective exact on the same daemons, 8 B .. 64 KiB, over links opened again"
job all -C all -b 8 -e 64K -f 64 -n 1 -w 0 || fail "every collective across $nodes nodes"

"$cluster" down --name "$name" >/dev/null || fail "the cluster did not come down"
trap - EXIT
echo "PASS"
