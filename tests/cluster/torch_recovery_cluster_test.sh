#!/usr/bin/env bash
# DDP that loses a node and goes on, on 4 namespace nodes with a plexusd and one torch rank
# each (tests/python/torch_recovery.py says what each rank checks): node 2's daemon and rank
# are killed mid-training; the survivors' step fails naming n2 within 2 s, they shrink the
# group and train on 3 nodes with identical parameters, no process restarted; then node 2
# gets a fresh daemon and a replacement rank that joins the group's growth back to 4. Exit 77
# (ctest SKIP) with the reason where namespaces cannot be made, or without torch or the
# built plexus_torch.
set -uo pipefail
repo=$1
build=$2
cluster=$repo/tools/cluster/plexus-cluster.sh
python=/usr/bin/python3
script=$repo/tests/python/torch_recovery.py

# shellcheck source=require_netns.sh
. "$(dirname "$0")/require_netns.sh"
"$python" -c "import torch" 2>/dev/null || { echo "SKIP: $python has no torch (python3-torch)"; exit 77; }
ls "$build"/python/plexus_torch*.so >/dev/null 2>&1 ||
  { echo "SKIP: plexus_torch was not built in $build/python"; exit 77; }

tag=tr$$
dir=/tmp/plexus-cluster-$tag
trap '"$cluster" down --name "$tag" >/dev/null 2>&1' EXIT
"$cluster" up --name "$tag" --nodes 4 --daemons "$build" >/dev/null || { echo "FAIL: cluster up"; exit 1; }
rank() {  # node, args...
  local n=$1; shift
  "$cluster" run --name "$tag" --node "$n" -- env PLEXUS_AUTOSTART=0 PYTHONPATH="$build/python" \
    timeout 240 "$python" -W ignore "$script" --dir "$dir" "$@"
}
pids=()
for r in 0 1 2 3; do
  rank "$r" --rank "$r" > "$dir/rank$r.out" 2>&1 &
  pids+=($!)
done
for _ in $(seq 1200); do
  [ "$(ls "$dir"/ready.* 2>/dev/null | wc -l)" -ge 4 ] && break
  sleep 0.1
done
[ "$(ls "$dir"/ready.* 2>/dev/null | wc -l)" -ge 4 ] || { echo "FAIL: the ranks never trained"; cat "$dir"/rank*.out; exit 1; }
sleep 0.3  # the survivors are mid-step
"$cluster" daemon --name "$tag" --node 2 kill
pkill -9 -f -- "$script --dir $dir --rank 2" || true
echo "== node 2's daemon and rank killed; waiting for the survivors to shrink and ask for a growth"
for _ in $(seq 600); do [ -f "$dir/grow_id" ] && break; sleep 0.1; done
[ -f "$dir/grow_id" ] || { echo "FAIL: no growth id"; cat "$dir"/rank*.out; exit 1; }
"$cluster" daemon --name "$tag" --node 2 start || { echo "FAIL: node 2's daemon did not start again"; exit 1; }
rank 2 --rank 3 --replacement > "$dir/replacement.out" 2>&1 &
replacement=$!
status=0
for r in 0 1 3; do wait "${pids[$r]}" || { echo "FAIL: rank $r"; status=1; }; done
wait "$replacement" || { echo "FAIL: the replacement rank"; status=1; }
wait "${pids[2]}" 2>/dev/null || true
grep -h "^rank" "$dir"/rank0.out "$dir"/rank1.out "$dir"/rank3.out "$dir"/replacement.out
if [ $status -ne 0 ]; then
  for f in "$dir"/rank0.out "$dir"/rank1.out "$dir"/rank3.out "$dir"/replacement.out; do
    echo "---- $f"; grep -v "^rank" "$f" | tail -20
  done
  for n in 0 1 2 3; do echo "---- n$n"; tail -15 "$dir/n$n/plexusd.log"; done
  exit 1
fi
echo "PASS: a node lost mid-training, the survivors shrank and trained on, a replacement grew it back"
