#!/usr/bin/env bash
# The failover gap, measured: 2 namespace nodes x 2 NICs (tools/cluster/plexus-cluster.sh),
# failover_gap_bench streaming from node 0 to node 1 over one path per NIC, and mid-stream
# (after --at seconds) one fault on nic1:
#   sender-down    node 0's nic1 set down (netlink on the sender)
#   receiver-down  node 1's nic1 set down (netlink on the receiver; the sender is told)
#   blackhole      node 0's nic1 drops everything (nftables), the link stays up (timeout)
#   none           no fault: the gaps a healthy stream has anyway
# Each fault --trials times; prints every trial's longest time without a delivery (the
# failover gap) and the median, and the median of the longest time the stream's in-order
# prefix did not grow (what an op waiting for one particular frame sees: for a fault, the
# time until the frames lost with the path had come again).
#
#   failover_gap.sh --build-dir DIR [--trials N] [--faults LIST] [--rate RATE] [--seconds S]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build="" trials=10 faults="none sender-down receiver-down blackhole" rate="" seconds=3 at=1.2
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --faults) faults=${2//,/ }; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "failover_gap.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$build" ] || { echo "failover_gap.sh: --build-dir is required" >&2; exit 2; }
bench=$build/tools/bench/failover_gap_bench
cluster=$root/tools/cluster/plexus-cluster.sh
name=gap$$
trap '"$cluster" down --name "$name"' EXIT
"$cluster" up --name "$name" --nodes 2 --nics 2 ${rate:+--rate "$rate"}
on() { local node=$1; shift; "$cluster" run --name "$name" --node "$node" -- "$@"; }
out=$(mktemp -d)

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

fault() {  # kind, on|off
  case "$1:$2" in
    sender-down:on) on 0 ip link set nic1 down ;;
    sender-down:off) on 0 ip link set nic1 up ;;
    receiver-down:on) on 1 ip link set nic1 down ;;
    receiver-down:off) on 1 ip link set nic1 up ;;
    blackhole:on) on 0 nft -f - <<'EOF'
table inet pxgap {
  chain in { type filter hook input priority 0; iifname "nic1" drop; }
  chain out { type filter hook output priority 0; oifname "nic1" drop; }
}
EOF
      ;;
    blackhole:off) on 0 nft delete table inet pxgap ;;
    none:*) ;;
  esac
}

echo "# failover gap: 2 nodes x 2 NICs${rate:+ at $rate each}, a ${seconds} s stream, fault on nic1 at ${at} s"
printf '# %-14s %s\n' fault "longest gap without a delivery per trial (ms) ... median | median in-order stall (ms)"
for kind in $faults; do
  gaps=()
  stalls=()
  for trial in $(seq "$trials"); do
    port=$((7400 + trial))
    on 1 "$bench" receive --listen "0.0.0.0:$port" --paths 2 --seconds "$seconds" \
      > "$out/r" 2> "$out/re" &
    receiver=$!
    on 0 "$bench" send --seconds "$seconds" \
      --connect "198.18.0.2:$port,198.18.1.2:$port" 2> "$out/se" &
    sender=$!
    sleep "$at"
    fault "$kind" on
    wait $sender || { echo "sender failed: $(cat "$out/se")" >&2; exit 1; }
    wait $receiver || { echo "receiver failed: $(cat "$out/re")" >&2; exit 1; }
    fault "$kind" off
    gaps+=("$(grep -o '"max_gap_ms": [0-9.]*' "$out/r" | awk '{print $2}')")
    stalls+=("$(grep -o '"max_in_order_stall_ms": [0-9.]*' "$out/r" | awk '{print $2}')")
    sleep 0.5  # the NIC back up
  done
  printf '  %-14s %s ... %s | %s\n' "$kind" "${gaps[*]}" "$(median "${gaps[@]}")" "$(median "${stalls[@]}")"
done
rm -rf "$out"
