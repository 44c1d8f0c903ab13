#!/usr/bin/env bash
# NIC failover across network namespaces: 3 nodes x 2 NICs (one bridge per rail, a spine
# routing between them), plexusd on each, a load of 64 MiB allreduces on every node, each
# result checked exactly (plexus-bench -c), while:
#   - a NIC is drained and undrained (plexusctl nic): nothing is resent;
#   - two nodes lose different rails (one NIC set down, the other's cable pulled) for 5 s,
#     past the grace period: they share no rail, and the backup path across rails carries;
#   - a NIC is set down mid-run and back: no op fails, the peers are told at once, the
#     paths come back;
#   - a NIC becomes a silent black hole (nftables drops everything, the link stays up):
#     found by the path timeout, no op fails;
#   - a NIC flaps, down and up 10 times in 20 s: no op fails, it is taken back each time;
#   - both NICs of one node go down for less than the grace period: no op fails;
#   - both NICs of one node go down past the grace period: the other nodes' ops fail naming
#     that node within the grace period + 1 s, and they then serve a new communicator.
# Exit 77 (ctest SKIP) with the reason where namespaces or nft are unavailable.
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
command -v nft > /dev/null || { echo "SKIP: nft (Debian package nftables) is not installed"; exit 77; }

name=fo$$
dir=/tmp/plexus-cluster-$name
# A cut off node's peers dial it again within 3/8 of the grace once its NICs are back
# (RailConnector::Settings::grace), and the cut within the grace lasts 0.7 s plus the
# command that ends it: 3 s leaves a second to spare on a loaded machine.
grace_ms=3000
fail() {
  echo "FAIL: $*"
  for n in 0 1 2; do
    echo "--- n$n plexusd.log: its last links and NIC events"
    grep -E "NIC nic. (went|is up)|no path left|peer_lost|up over|failed:|data connection with" \
      "$dir/n$n/plexusd.log" 2> /dev/null | tail -16
    echo "--- n$n plexusd.log (last 10 lines)"
    tail -10 "$dir/n$n/plexusd.log" 2> /dev/null
  done
  exit 1
}
# node, NIC index, up|down: the node's NIC itself, or its switch port (carrier).
trap '"$cluster" down --name "$name"' EXIT
PLEXUS_CLUSTER_DAEMON_ARGS="--peer-grace-ms $grace_ms" \
  "$cluster" up --name "$name" --nodes 3 --nics 2 --spine --daemons "$build" || fail "cluster up"

# The load: communicator after communicator on every node, each running 64 MiB allreduces
# ($PX_LOAD_ITERS of them, default 1) whose results are all checked, until $dir/stop
# exists. Node 0 starts each round (go.<i>); the others follow it, or end when it says so
# (end.<i>).
round=0
start_load() {  # nodes...
  rm -f "$dir/stop" "$dir"/go.* "$dir"/end.* "$dir"/id.*
  round=$((round + 1))
  load_pids=()
  for n in "$@"; do
    on "$n" bash -c '
      set -u
      d=$PLEXUS_CLUSTER_DIR; me=$PLEXUS_NODE; nodes=$1; first=$2; shift 2
      for i in $(seq 1 200); do
        if [ "$me" = "$first" ]; then
          [ -e "$d/stop" ] && { touch "$d/end.$i"; exit 0; }
          touch "$d/go.$i"
        else
          for _ in $(seq 1200); do [ -e "$d/go.$i" ] || [ -e "$d/end.$i" ] && break; sleep 0.05; done
          [ -e "$d/end.$i" ] && exit 0
          [ -e "$d/go.$i" ] || { echo "node 0 did not start round $i within 60 s"; exit 1; }
        fi
        "$0" --nodes "$nodes" --node "$me" --id-file "$d/id.$i" -C allreduce -b 64M -e 64M \
          -n "${PX_LOAD_ITERS:-1}" -w 0 -c 2 --timeout-s 120 > "$d/load$me.$i" 2>&1 ||
          { s=$?; echo "node $me, load round $i:"; cat "$d/load$me.$i"; exit $s; }
        echo "$i" > "$d/rounds$me"
      done' "$bench" "$(seq -s, 1 $# | sed 's/[0-9]\+/1/g')" "$1" > "$dir/load$n.log" 2>&1 &
    load_pids+=($!)
  done
  # Under way once the first round's communicator is formed.
  for _ in $(seq 600); do [ -e "$dir/id.1" ] && break; sleep 0.05; done
  sleep 1
}
stop_load() {  # fails the test unless every node's load ended cleanly
  touch "$dir/stop"
  local status=0
  for i in "${!load_pids[@]}"; do
    wait "${load_pids[$i]}" || { status=1; echo "load $i:"; cat "$dir/load$i.log"; }
  done
  return $status
}
# Every line of plexusctl paths on `node` for NIC `nic` in state `state` (NIC, TRANSPORT,
# STATE, ...), counted.
paths_in_state() { on "$1" "$ctl" paths | awk -v nic="$2" -v s="$3" '$1 == nic && $3 == s' | wc -l; }
wait_paths() {  # node nic state count seconds
  for _ in $(seq $(($5 * 10))); do [ "$(paths_in_state "$1" "$2" "$3")" -ge "$4" ] && return 0; sleep 0.1; done
  return 1
}
# Bytes (both ways) on node $1's standby paths to node $2 (plexusctl paths --json: each
# path's fields in name order, state after the byte counts).
standby_bytes_to() {
  on "$1" "$ctl" paths --json | awk -v peer="\"$2\"" '
    /"node":/ { mine = ($2 ~ peer) }
    /"bytes_received":|"bytes_sent":/ { gsub(",", "", $2); bytes += $2 }
    /"state":/ { if (mine && $2 ~ /standby/) total += bytes; bytes = 0 }
    END { printf "%.0f\n", total }'
}
resent_bytes() { on "$1" "$ctl" paths --json | grep -o '"bytes_resent": [0-9]*' | awk '{s += $2} END {print s + 0}'; }

step "drain nic1 of node 0 under load, then undrain: results exact, nothing resent"
start_load 0 1 2
# Links are made with the first communicator: one path per rail to each peer.
wait_paths 0 nic1 active 2 10 || fail "node 0 has no path over nic1 to both peers: $(on 0 "$ctl" paths)"
wait_paths 0 nic0 active 2 10 || fail "node 0 has no path over nic0 to both peers: $(on 0 "$ctl" paths)"
on 0 "$ctl" nic drain nic1 || fail "plexusctl nic drain"
wait_paths 0 nic1 drained 2 5 || fail "node 0's nic1 paths not drained: $(on 0 "$ctl" paths)"
wait_paths 1 nic1 drained 1 5 || fail "node 1 was not told of node 0's drain: $(on 1 "$ctl" paths)"
sleep 2
on 0 "$ctl" paths
on 0 "$ctl" nic undrain nic1 || fail "plexusctl nic undrain"
wait_paths 0 nic1 active 2 5 || fail "node 0's nic1 paths not back: $(on 0 "$ctl" paths)"
stop_load || fail "an op failed or a result was wrong during the drain"
for n in 0 1 2; do
  [ "$(resent_bytes $n)" -eq 0 ] || fail "node $n resent $(resent_bytes $n) bytes during a drain"
done
echo "drained and undrained, 0 bytes resent, $(cat "$dir/rounds0") load rounds exact"
# The NICs' telemetry counted that load (fields of each NIC at 4 spaces; its last second's
# window stats, under "recent", deeper).
on 0 "$ctl" nics
nics_json=$(on 0 "$ctl" nics --json)
out_total=$(awk '/^    "bytes_out":/ { gsub(",", "", $2); s += $2 } END { printf "%.0f\n", s }' <<< "$nics_json")
[ "$out_total" -gt $((64 << 20)) ] ||
  fail "plexusctl nics: node 0's NICs sent $out_total bytes over the load rounds"
grep -q '"latency_samples"' <<< "$nics_json" || fail "plexusctl nics --json has no window stats"

step "nic0 of node 0 down and nic1 of node 1 unplugged for 5 s (grace ${grace_ms} ms): the backup across rails carries"
# A long round (30 allreduces on one communicator) spans the fault: forming a communicator
# needs the control connection, which the fault cuts (it is anchored on node 0's nic0).
PX_LOAD_ITERS=30 start_load 0 1 2
# Each node keeps one backup per peer on each NIC: NIC i to the peer's rail i+1.
wait_paths 0 nic1 standby 2 10 || fail "node 0 has no backup over nic1 to both peers: $(on 0 "$ctl" paths)"
lost_before=$(grep -c "no path left to node n1" "$dir/n0/plexusd.log")
lost_before_1=$(grep -c "no path left to node n0" "$dir/n1/plexusd.log")
carried_at=$(standby_bytes_to 0 n1)
nic 0 0 down
cable 1 1 down
sleep 1
# Node 0 to node 1 now: only node 0's nic1 to node 1's nic0, through the spine.
on 0 "$ctl" paths | sed -n '/^node n1/,/^$/p'
sleep 4
carried=$(( $(standby_bytes_to 0 n1) - carried_at ))
cable 1 1 up
nic 0 0 up
wait_paths 0 nic0 active 2 10 || fail "node 0's nic0 paths did not come back: $(on 0 "$ctl" paths)"
stop_load || fail "an op failed or a result was wrong while nodes 0 and 1 shared no rail"
[ "$carried" -gt $((64 << 20)) ] ||
  fail "node 0's backup to node 1 carried $carried bytes in 5 s with no shared rail"
[ "$(grep -c "no path left to node n1" "$dir/n0/plexusd.log")" -eq "$lost_before" ] ||
  fail "node 0 had no path to node 1 although the backup across rails was there"
[ "$(grep -c "no path left to node n0" "$dir/n1/plexusd.log")" -eq "$lost_before_1" ] ||
  fail "node 1 had no path to node 0 although the backup across rails was there"
grep -q "NIC nic1 went down" "$dir/n1/plexusd.log" || fail "node 1 did not see its nic1 lose carrier"
echo "5 s with no shared rail, never without a path: the backup carried $((carried >> 20)) MiB; $(cat "$dir/rounds0") load round(s) of 30 allreduces exact"

step "nic1 of node 1 set down mid-run for 1.5 s: no op fails, the peers are told, it comes back"
start_load 0 1 2
seen_before=$(grep -c "NIC nic1 went down" "$dir/n1/plexusd.log")
told_before=$(grep -c "node n1 reports its end" "$dir/n0/plexusd.log")
nic 1 1 down
sleep 1.5
nic 1 1 up
wait_paths 1 nic1 active 2 10 || fail "node 1's nic1 paths did not come back: $(on 1 "$ctl" paths)"
stop_load || fail "an op failed or a result was wrong around the NIC down"
[ "$(grep -c "NIC nic1 went down" "$dir/n1/plexusd.log")" -gt "$seen_before" ] ||
  fail "node 1 did not see its NIC go down"
[ "$(grep -c "node n1 reports its end" "$dir/n0/plexusd.log")" -gt "$told_before" ] ||
  fail "node 0 was not told by node 1"
echo "every result exact over $(cat "$dir/rounds0") load rounds; node 0 heard: $(grep -m1 -o "node n1 reports its end.*" "$dir/n0/plexusd.log")"

step "nic1 of node 1 a silent black hole (nftables drop, link up) for 3 s"
timeouts_before=$(grep -c "nic1.*failed: nothing received for" "$dir/n1/plexusd.log")
start_load 0 1 2
on 1 nft -f - <<'EOF' || fail "nft"
table inet pxblackhole {
  chain in { type filter hook input priority 0; iifname "nic1" drop; }
  chain out { type filter hook output priority 0; oifname "nic1" drop; }
}
EOF
sleep 3
on 1 nft delete table inet pxblackhole
wait_paths 1 nic1 active 2 20 || fail "node 1's nic1 paths did not come back after the black hole: $(on 1 "$ctl" paths)"
stop_load || fail "an op failed or a result was wrong during the black hole"
[ "$(grep -c "nic1.*failed: nothing received for" "$dir/n1/plexusd.log")" -gt "$timeouts_before" ] ||
  fail "node 1 did not time out its paths over the black hole"
echo "found by timeout: $(grep -m1 -o "failed: nothing received for.*" "$dir/n1/plexusd.log"); $(cat "$dir/rounds0") load rounds exact"

step "nic1 of node 2 flaps: down 0.8 s, up 1.2 s, 10 times under load"
before=$(grep "up over nic1" "$dir/n2/plexusd.log" | grep -vc "backup")
start_load 0 1 2
for _ in $(seq 10); do
  nic 2 1 down
  sleep 0.8
  nic 2 1 up
  sleep 1.2
done
wait_paths 2 nic1 active 2 10 || fail "node 2's nic1 paths did not come back after flapping: $(on 2 "$ctl" paths)"
stop_load || fail "an op failed or a result was wrong while nic1 flapped"
returns=$(( $(grep "up over nic1" "$dir/n2/plexusd.log" | grep -vc "backup") - before ))
# Two peers, ten flaps: each flap brings both paths back.
[ "$returns" -ge 20 ] || fail "node 2's nic1 paths came back $returns times in 10 flaps (want 20: both peers, every time)"
echo "taken back $returns times (2 peers x 10 flaps); $(cat "$dir/rounds0") load rounds exact"

step "both NICs of node 2 down for 0.7 s, within the grace period: no op fails"
start_load 0 1 2
nic 2 0 down; nic 2 1 down
sleep 0.7
nic 2 0 up; nic 2 1 up
# A failed op ends the load, and with nothing to carry the paths may not come back: the
# loads' output says why.
for r in 0 1; do
  wait_paths 2 nic$r active 2 10 ||
    { p=$(on 2 "$ctl" paths); stop_load; fail "node 2's nic$r paths did not come back: $p"; }
done
stop_load || fail "an op failed while node 2 was cut off within its grace period"
grep -q "no path left to node n0" "$dir/n2/plexusd.log" || fail "node 2 never lost every path to node 0"
echo "node 2 had no path left for 0.7 s and lost nothing; $(cat "$dir/rounds0") load rounds exact"

step "both NICs of node 2 down past the grace period (${grace_ms} ms)"
# Rounds of several allreduces, so that the NICs go down while an op runs: with one per
# round (about a second each) they could go down between rounds, as node 2's rank joins the
# next communicator, and nodes 0 and 1 then wait for that rank until the init timeout
# (which names the rank that never joined, not its node).
PX_LOAD_ITERS=4 start_load 0 1 2
# Both at once; the event is complete when the command returns.
nic 2 0 down; nic 2 1 down
down_at=$(date +%s%N)
for i in 0 1; do
  wait "${load_pids[$i]}" && fail "node $i's load went on with node 2 unreachable"
  # When the rank wrote its error (the last write to its round's output), not when the
  # wrapper processes had exited: under load that adds a second of scheduling.
  last=$(ls -t "$dir"/load$i.[0-9]* | head -1)
  ended=$(stat -c %.9Y "$last" | tr -d .)
  took=$(( (ended - down_at) / 1000000 ))
  grep -q "node n2" "$dir/load$i.log" || fail "node $i's error does not name n2: $(cat "$dir/load$i.log")"
  [ "$took" -le $((grace_ms + 1000)) ] || fail "node $i failed after $took ms (want <= $((grace_ms + 1000)))"
  echo "node $i failed after $took ms: $(grep -m1 -o "plexus_[a-z]* failed.*" "$dir/load$i.log" | cut -c1-200)"
done
wait "${load_pids[2]}"
rm -f "$dir/stop" "$dir"/go.* "$dir"/end.* "$dir"/id.*
start_load 0 1
stop_load || fail "nodes 0 and 1 could not serve a new communicator after losing node 2"
echo "nodes 0 and 1 then ran $(cat "$dir/rounds0") exact rounds on a new communicator"

echo "PASS: drain, no shared rail, NIC down, black hole, flapping, a node cut off within and past its grace"
