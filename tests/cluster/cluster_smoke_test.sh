#!/usr/bin/env bash
# The namespace cluster itself: 3 nodes x 2 NICs, shaped; every node reaches every other
# on both rails, each node's plexusd answers, nothing is left behind afterwards, and an
# interrupted run cleans up too. Exit 77 (ctest SKIP) with the reason where namespaces
# cannot be created.
set -uo pipefail
repo=$1
build=$2
cluster=$repo/tools/cluster/plexus-cluster.sh

# shellcheck source=require_netns.sh
. "$(dirname "$0")/require_netns.sh"

fail() { echo "FAIL: $*"; exit 1; }

# Every cluster this test makes is named after its pid, and only those count as left
# behind: namespaces of other runs (a session's benchmark cluster) are not ours to judge.
tag=smoke$$
"$cluster" exec --name "$tag" --nodes 3 --nics 2 --rate 200mbit --daemons "$build" -- bash -c '
  for r in 0 1; do
    for n in 0 1 2; do
      var=PLEXUS_CLUSTER_ADDR_${r}_${n}
      ping -c1 -W2 -q "${!var}" >/dev/null || { echo "node $PLEXUS_NODE cannot reach ${!var}"; exit 1; }
    done
  done
  "'"$build"'/tools/plexusctl/plexusctl" status --json | grep -q "\"pid\"" || exit 1
  echo "node $PLEXUS_NODE: both rails reach all nodes; plexusd answers"
' || fail "cluster run failed"
leftover=$(ip netns list | grep -c "^px$tag-" || true)
[ "$leftover" -eq 0 ] || fail "$leftover namespaces left behind: $(ip netns list | grep "^px$tag-")"
[ ! -e "/tmp/plexus-cluster-$tag" ] || fail "the cluster left its state directory"

# Interrupted: the exec is killed with SIGTERM while its command runs; its trap must
# still tear everything down, promptly.
marker=/tmp/plexus-cluster-running.$$
"$cluster" exec --name pxint$$ --nodes 2 --nics 1 -- bash -c "touch $marker; exec sleep 30" &
runner=$!
for _ in $(seq 200); do [ -e "$marker" ] && break; sleep 0.05; done
[ -e "$marker" ] || fail "the interrupted cluster's command never started"
rm -f "$marker"
started=$SECONDS
kill -TERM "$runner"; wait "$runner" 2>/dev/null
[ $((SECONDS - started)) -le 5 ] || fail "teardown after SIGTERM took $((SECONDS - started)) s"
ip netns list | grep -q "pxint$$" && fail "interrupted cluster left namespaces: $(ip netns list)"
[ -e "/tmp/plexus-cluster-pxint$$" ] && fail "interrupted cluster left its state directory"
echo "PASS: cluster up/run/down, shaping, per-node plexusd, cleanup after interrupt"
