#!/usr/bin/env bash
# The failover gap on a cable pull between two soft-RoCE VMs x 2 NICs (tools/vm/plexus-vm.sh),
# over RDMA and over TCP on the same VMs in one run: failover_gap_bench streams from node 0 to
# node 1 over one path per NIC (NodeLinks and the reliable channel, as plexusd runs them), and
# AT seconds in, node 0's eth1 loses its cable (the qemu monitor's set_link: the guest sees
# its carrier go, rxe its port). Also a run with no fault: the gaps the emulated stream has
# anyway, which is what the emulation adds. Per transport and fault, TRIALS runs; prints each
# run's longest time without a delivery and the longest the in-order prefix did not grow
# (what an op waiting for a particular frame sees), and their medians.
# usage: rdma_vm_failover_gap.sh BUILD_DIR [TRIALS (default 3)] [SECONDS (default 6)] [AT (default 3)]
set -euo pipefail
shopt -s inherit_errexit
build=$(cd "$1" && pwd)
trials=${2:-3}
seconds=${3:-6}
at=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
vm="$here/../vm/plexus-vm.sh"
gap=$build/tools/bench/failover_gap_bench
[ -x "$gap" ] || { echo "no $gap (build the project first)" >&2; exit 2; }
tag="g$$"
trap '"$vm" down --name "$tag"' EXIT
"$vm" up --name "$tag" --nodes 2 --nics 2 >&2
state=/tmp/pxvm-$tag

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
port_active() {  # node nic: waits (at most 30 s) until rxe<nic> is active again
  "$vm" run --name "$tag" --node "$1" --timeout 40 -- sh -c \
    "for i in \$(seq 300); do ibv_devinfo -d rxe$2 | grep -q PORT_ACTIVE && exit 0; sleep 0.1; done; exit 1"
}

# One run: prints "max_gap_ms max_in_order_stall_ms".
trial() {  # transport fault port
  local transport=$1 fault=$2 port=$3
  "$vm" run --name "$tag" --node 1 --timeout $((seconds + 60)) -- "$gap" receive \
    --listen "0.0.0.0:$port" --paths 2 --seconds "$seconds" --transport "$transport" \
    > "$state/receive" 2>&1 &
  local receiver=$!
  "$vm" run --name "$tag" --node 0 --timeout $((seconds + 60)) -- "$gap" send \
    --connect "198.18.0.2:$port,198.18.1.2:$port" --seconds "$seconds" --transport "$transport" \
    > "$state/send" 2>&1 &
  local sender=$!
  if [ "$fault" = cable ]; then
    sleep "$at"
    "$vm" cable --name "$tag" --node 0 --nic 1 down
  fi
  local s=0
  wait "$sender" || s=$?
  wait "$receiver" || s=$?
  if [ "$fault" = cable ]; then
    "$vm" cable --name "$tag" --node 0 --nic 1 up
    port_active 0 1 || { echo "rxe1 on node 0 did not come back" >&2; exit 1; }
  fi
  [ "$s" = 0 ] || { echo "$transport $fault: the run failed:" >&2; cat "$state/send" "$state/receive" >&2; exit 1; }
  grep -o '"max_gap_ms": [0-9.]*\|"max_in_order_stall_ms": [0-9.]*' "$state/receive" |
    awk '{printf "%s ", $2} END {print ""}'
  grep "sender:" "$state/send" >&2 || true
}

printf "%-5s %-6s %s\n" transport fault "trials: max gap / max in-order stall (ms)"
port=7600
for transport in rdma tcp; do
  for fault in none cable; do
    gaps=() stalls=() line=""
    for ((t = 0; t < trials; t++)); do
      out=$(trial "$transport" "$fault" "$port") || exit 1
      read -r g st <<< "$out"
      [ -n "${st:-}" ] || { echo "$transport $fault: the receiver reported no figures" >&2; exit 1; }
      port=$((port + 1))
      gaps+=("$g")
      stalls+=("$st")
      line+=" $g/$st"
    done
    printf "%-9s %-6s %s   median %s / %s\n" "$transport" "$fault" "$line" "$(median "${gaps[@]}")" \
      "$(median "${stalls[@]}")"
  done
done
