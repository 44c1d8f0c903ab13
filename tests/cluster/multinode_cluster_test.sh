#!/usr/bin/env bash
# Collectives across network namespaces, each a node with its own plexusd on real
# interfaces (veth, bridges): every collective on 2, 3 and 4 nodes with 1-3 ranks per node
# (2+1+3 included), every algorithm forced, a peer daemon SIGKILLed mid-allreduce, a
# stranger on the peer port and a daemon without the cluster secret. Results are checked
# exactly by plexus-bench (-c). Exit 77 (ctest SKIP) with the reason where namespaces
# cannot be created.
set -uo pipefail
repo=$1
build=$2
cluster=$repo/tools/cluster/plexus-cluster.sh
bench=$build/tools/plexus-bench/plexus-bench
export PLEXUS_BENCH=$bench

# shellcheck source=require_netns.sh
. "$(dirname "$0")/require_netns.sh"
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"

fail() { echo "FAIL: $*"; exit 1; }
# Every cluster this test makes is named mn<pid>x<k>; only those count as left behind, so
# namespaces of other runs (a session's benchmark cluster) cannot fail this test.
clusters=0
next_name() { clusters=$((clusters + 1)); name=mn$$x$clusters; }

# On every node at once: its share of --nodes LIST, exact checks on.
run_bench() {  # placement, extra bench arguments...
  local placement=$1; shift
  next_name
  "$cluster" exec --name "$name" --nodes "$(awk -F, '{print NF}' <<< "$placement")" --daemons "$build" --parallel -- \
    bash -c '"$PLEXUS_BENCH" --nodes '"$placement"' --node "$PLEXUS_NODE" \
      --id-file "$PLEXUS_CLUSTER_DIR/id" --timeout-s 120 "$@" > "$PLEXUS_CLUSTER_DIR/out$PLEXUS_NODE" 2>&1 ||
      { s=$?; cat "$PLEXUS_CLUSTER_DIR/out$PLEXUS_NODE"; tail -20 "$PLEXUS_CLUSTER_DIR/n$PLEXUS_NODE/plexusd.log"; exit $s; }
      [ "$PLEXUS_NODE" != 0 ] || cat "$PLEXUS_CLUSTER_DIR/out0"' bash "$@"
}

step "4 nodes x 1 rank: every collective, 8 B .. 1 MiB"
run_bench 1,1,1,1 -C all -b 8 -e 1M -f 32 -n 2 -w 1 -c 1 || fail "4x1 collectives"

step "3 nodes, 2+1+3 ranks: every collective, every dtype and op at 12 KiB and 96 KiB"
run_bench 2,1,3 -C all -d all -o all -b 12K -e 96K -f 8 -n 1 -w 0 -c 1 || fail "2+1+3 collectives"

step "2 nodes, 3+1 ranks: every collective, every root"
run_bench 3,1 -C all -r all -b 4 -e 256K -f 64 -n 1 -w 0 -c 1 || fail "3+1 collectives"

for algo in ring rhd rd bruck binomial chain pairwise; do
  step "3 nodes, 1+2+1 ranks, PLEXUS_ALGO=$algo: every collective"
  PLEXUS_ALGO=$algo run_bench 1,2,1 -C all -b 8 -e 2M -f 64 -n 1 -w 0 -c 1 || fail "PLEXUS_ALGO=$algo"
done

step "a peer daemon SIGKILLed mid-allreduce: the others fail within 2 s naming it, then serve anew"
next_name
"$cluster" exec --name "$name" --nodes 3 --daemons "$build" --on 0 -- bash -c '
  set -u
  d=$PLEXUS_CLUSTER_DIR
  tag=$(basename "$d" | sed s/plexus-cluster-//)
  for n in 0 1 2; do
    ip netns exec "px$tag-n$n" env PLEXUS_SOCKET="$d/n$n/plexusd.sock" "$PLEXUS_BENCH" \
      --nodes 1,1,1 --node $n --id-file "$d/id" -C allreduce -b 16M -e 16M -n 1000 -w 0 -c 0 \
      --timeout-s 60 > "$d/kill$n" 2>&1 &
    echo $! > "$d/bench$n.pid"
  done
  for _ in $(seq 300); do grep -q "^ *16777216" "$d/kill0" 2>/dev/null && break; sleep 0.05; done
  # A row has not printed yet: the loop of 1000 is running. Let it run a moment, then kill.
  sleep 1
  killed_at=$(date +%s%N)
  kill -9 "$(cat "$d/n2/plexusd.pid")"
  status=0
  for n in 0 1; do
    wait "$(cat "$d/bench$n.pid")" 2>/dev/null
    ended=$(date +%s%N)
    if ! grep -q "node n2" "$d/kill$n"; then echo "node $n: no error naming n2:"; cat "$d/kill$n"; status=1; fi
    if [ $(( (ended - killed_at) / 1000000 )) -gt 2000 ]; then
      echo "node $n: took $(( (ended - killed_at) / 1000000 )) ms to fail"; status=1
    fi
  done
  kill "$(cat "$d/bench2.pid")" 2>/dev/null
  [ $status -eq 0 ] || exit $status
  echo "ranks on n0 and n1 failed naming n2:"; grep -h -m1 "n2" "$d/kill0"
  rm -f "$d/id"
  for n in 0 1; do
    ip netns exec "px$tag-n$n" env PLEXUS_SOCKET="$d/n$n/plexusd.sock" "$PLEXUS_BENCH" \
      --nodes 1,2 --node $n --id-file "$d/id" -C allreduce -b 1M -e 1M -n 2 -c 1 \
      --timeout-s 60 > "$d/again$n" 2>&1 &
    pids[$n]=$!
  done
  for n in 0 1; do wait ${pids[$n]} || { echo "node $n after the kill:"; cat "$d/again$n"; exit 1; }; done
  echo "the survivors ran a new communicator"
' || fail "killed peer daemon"

step "a stranger sends garbage to the peer port; a daemon without the secret tries to join"
next_name
"$cluster" exec --name "$name" --nodes 3 --daemons "$build" --on 0 -- bash -c '
  set -u
  d=$PLEXUS_CLUSTER_DIR
  tag=$(basename "$d" | sed s/plexus-cluster-//)
  # From node 2: garbage, and a replayed-looking data frame header, at node 0.
  ip netns exec "px$tag-n2" bash -c "
    exec 3<>/dev/tcp/$PLEXUS_CLUSTER_ADDR_0_0/7355 && head -c 4096 /dev/urandom >&3
    exec 4<>/dev/tcp/$PLEXUS_CLUSTER_ADDR_0_0/7355 && printf \"PX\\x01\\x01\\x00\\x00\\x10\\x00\" >&4
    sleep 0.3"
  for n in 0 1; do
    ip netns exec "px$tag-n$n" env PLEXUS_SOCKET="$d/n$n/plexusd.sock" "$PLEXUS_BENCH" \
      --nodes 1,1 --node $n --id-file "$d/id" -C all -b 8 -e 64K -f 8 -n 1 -c 1 \
      --timeout-s 60 > "$d/ok$n" 2>&1 &
    pids[$n]=$!
  done
  for n in 0 1; do wait ${pids[$n]} || { echo "node $n with strangers around:"; cat "$d/ok$n"; exit 1; }; done
  grep -q "refused" "$d/n0/plexusd.log" || { echo "no refusal logged:"; cat "$d/n0/plexusd.log"; exit 1; }
  echo "strangers refused and logged:"; grep -h "refused" "$d/n0/plexusd.log" | head -2
  # A daemon on node 2 without the secret.
  ip netns exec "px$tag-n2" "'"$build"'/daemon/plexusd" --socket "$d/rogue.sock" \
    --peer-listen 0.0.0.0:7356 --node-name rogue --metrics off > "$d/rogue.log" 2>&1 &
  rogue=$!
  for _ in $(seq 100); do [ -S "$d/rogue.sock" ] && break; sleep 0.02; done
  rm -f "$d/id"
  ip netns exec "px$tag-n0" env PLEXUS_SOCKET="$d/n0/plexusd.sock" PLEXUS_INIT_TIMEOUT_MS=3000 \
    "$PLEXUS_BENCH" --nodes 1,1 --node 0 --id-file "$d/id" -b 8 -e 8 --timeout-s 30 > "$d/r0" 2>&1 &
  p0=$!
  ip netns exec "px$tag-n2" env PLEXUS_SOCKET="$d/rogue.sock" PLEXUS_INIT_TIMEOUT_MS=3000 \
    "$PLEXUS_BENCH" --nodes 1,1 --node 1 --id-file "$d/id" -b 8 -e 8 --timeout-s 30 > "$d/r1" 2>&1
  r1=$?
  wait $p0; r0=$?
  kill $rogue
  [ $r0 -ne 0 ] && [ $r1 -ne 0 ] || { echo "a secretless daemon joined"; cat "$d/r0" "$d/r1"; exit 1; }
  grep -q "secret" "$d/r1" || { echo "the secretless side was not told why:"; cat "$d/r1"; exit 1; }
  grep -q "has no cluster secret" "$d/n0/plexusd.log" || { echo "not logged:"; tail "$d/n0/plexusd.log"; exit 1; }
  echo "the secretless daemon was refused:"; grep -h "secret" "$d/r1" | head -1
' || fail "strangers and secretless peer"

leftover=$(ip netns list | grep -c "^pxmn$$x" || true)
[ "$leftover" -eq 0 ] || fail "$leftover namespaces left behind: $(ip netns list | grep "^pxmn$$x")"
ls -d /tmp/plexus-cluster-mn$$x* >/dev/null 2>&1 && fail "state directories left behind: $(ls -d /tmp/plexus-cluster-mn$$x*)"
echo "PASS: multi-node collectives across namespaces, forced algorithms, killed peer, strangers"
