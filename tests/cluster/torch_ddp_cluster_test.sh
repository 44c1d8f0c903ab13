#!/usr/bin/env bash
# DDP with backend plexus on 2 namespace nodes x 2 ranks, each node with its own plexusd:
# every rank ends with identical parameters, and the losses follow gloo's (over the nodes'
# nic0) in the same run. Exit 77 (ctest SKIP) with the reason where namespaces cannot be
# created, or without torch or the built plexus_torch.
set -uo pipefail
repo=$1
build=$2
cluster=$repo/tools/cluster/plexus-cluster.sh
python=/usr/bin/python3

# shellcheck source=require_netns.sh
. "$(dirname "$0")/require_netns.sh"
"$python" -c "import torch" 2>/dev/null || { echo "SKIP: $python has no torch (python3-torch)"; exit 77; }
ls "$build"/python/plexus_torch*.so >/dev/null 2>&1 ||
  { echo "SKIP: plexus_torch was not built in $build/python"; exit 77; }

echo "== DDP, 2 nodes x 2 ranks, plexus beside gloo"
export PLEXUS_TEST_PY=$repo/tests/python/torch_backend_test.py PLEXUS_TEST_PYPATH=$build/python
"$cluster" exec --name "td$$" --nodes 2 --daemons "$build" --parallel -- bash -c '
  ranks=$((PLEXUS_NODE * 2)),$((PLEXUS_NODE * 2 + 1))
  out=$PLEXUS_CLUSTER_DIR/out$PLEXUS_NODE
  PLEXUS_AUTOSTART=0 GLOO_SOCKET_IFNAME=nic0 PYTHONPATH=$PLEXUS_TEST_PYPATH \
    /usr/bin/python3 -W ignore "$PLEXUS_TEST_PY" ddp 4 --ranks "$ranks" \
    --store "$PLEXUS_CLUSTER_DIR/store" > "$out" 2>&1
  s=$?
  grep -v "Logging before InitGoogleLogging" "$out"
  [ $s -eq 0 ] || tail -20 "$PLEXUS_CLUSTER_DIR/n$PLEXUS_NODE/plexusd.log"
  exit $s' || { echo "FAIL: DDP across 2 nodes"; exit 1; }
echo "PASS: DDP across 2 nodes x 2 ranks"
