#!/usr/bin/env bash
# What RDMA costs a daemon per peer node: for each N, a fresh cluster of N soft-RoCE VMs
# (tools/vm/plexus-vm.sh, 1 NIC each) with plexusd on every node, one rank per node runs
# alltoall (every rank sends to every other, so every daemon opens a path to each of its
# N - 1 peers), and right after it, links still open, node 0's daemon is measured:
#   qp      its RC queue pairs (`rdma res show qp`, the kernel's count, not ours)
#   ctx pd  the device contexts and protection domains it opened (`rdma res`)
#   mr      its memory registrations and their bytes (`rdma res show mr`, the sum of mrlen)
#   pinned  its VmPin (pages the kernel holds pinned for it) and VmRSS, /proc/PID/status
#   paths   its RDMA and TCP paths (plexusctl paths)
# One row per N; the daemons' logs stay under $PLEXUS_VM_STATE (default /tmp)/pxvm-rp*.
#   tools/bench/rdma_peers.sh --build-dir DIR [--nodes 2,3,5] [--size BYTES] [--mem MIB]
# --build-dir may be a whole build tree or a copy holding daemon/plexusd,
# tools/plexus-bench/plexus-bench and tools/plexusctl/plexusctl (an older build, to measure a
# "before"). PLEXUS_VM_DAEMON_ARGS passes plexusd options (default: --transport rdma
# --link-idle-close-ms 600000).
# Needs root; exits 77 saying why where the VMs cannot run.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
vm=$root/tools/vm/plexus-vm.sh
# On a failure the daemons' logs are kept in /tmp/rdma_peers.TAG.logs (the VMs' state goes).
die() {
  if [ -n "${tag:-}" ] && [ -d "/tmp/pxvm-$tag" ]; then
    mkdir -p "/tmp/rdma_peers.$tag.logs"
    cp /tmp/pxvm-"$tag"/n*/plexusd.log "/tmp/rdma_peers.$tag.logs/" 2>/dev/null || true
    for f in /tmp/pxvm-"$tag"/n*/plexusd.log; do cp "$f" "/tmp/rdma_peers.$tag.logs/$(basename "$(dirname "$f")").log"; done 2>/dev/null
  fi
  echo "rdma_peers: $*" >&2
  exit 2
}

build="" sizes=2,3,5 size=65536 mem=768
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --nodes) sizes=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[ -n "$build" ] || die "--build-dir is required"
[ "$(id -u)" = 0 ] || { echo "rdma_peers: SKIP: needs root (ip netns, tap devices)"; exit 77; }
s=0
"$vm" prepare || s=$?
[ "$s" = 0 ] || exit "$s"
# Links stay open through the measurement (they close after 30 s idle by default).
export PLEXUS_VM_DAEMON_ARGS=${PLEXUS_VM_DAEMON_ARGS:---transport rdma --link-idle-close-ms 600000}
tag=
trap '[ -z "$tag" ] || "$vm" down --name "$tag"' EXIT

# Node 0's daemon, measured inside its VM (run from the cluster's directory, /run/pxvm
# there): one line of key=value words.
measure='#!/bin/sh
pid=$(cat /run/pxvm/n0/plexusd.pid)
summary=$(rdma res show 2>/dev/null | head -1)
word() { echo "$summary" | awk -v k="$1" "{for (i = 1; i < NF; i++) if (\$i == k) print \$(i + 1)}"; }
qp=$(rdma res show qp 2>/dev/null | grep -c "type RC" || true)
mr_bytes=$(rdma -d res show mr 2>/dev/null | awk "{for (i = 1; i < NF; i++) if (\$i == \"mrlen\") s += \$(i + 1)} END {print s + 0}")
pin=$(awk "/^VmPin/ {print \$2}" /proc/$pid/status)
rss=$(awk "/^VmRSS/ {print \$2}" /proc/$pid/status)
echo "qp=$qp ctx=$(word ctx) pd=$(word pd) cq=$(word cq) mr=$(word mr) mr_bytes=$mr_bytes pin_kib=$pin rss_kib=$rss"'

printf '%-6s %-6s %-5s %-4s %-4s %-4s %-5s %-12s %-11s %-10s %-10s %-10s\n' nodes peers qp ctx pd cq mr mr_MiB pinned_MiB rss_MiB rdma_paths tcp_paths
IFS=, read -r -a ns <<< "$sizes"
for n in "${ns[@]}"; do
  tag="rp$n-$$"
  "$vm" up --name "$tag" --nodes "$n" --mem "$mem" --daemons "$build" > "/tmp/rdma_peers.$tag.up" 2>&1 ||
    { cat "/tmp/rdma_peers.$tag.up"; die "the $n VMs did not come up"; }
  placement=$(printf '1%.0s,' $(seq "$n")); placement=${placement%,}
  pids=()
  for ((i = 0; i < n; i++)); do
    "$vm" run --name "$tag" --node "$i" --timeout 280 -- "$build/tools/plexus-bench/plexus-bench" \
      --nodes "$placement" --node "$i" --id-file /run/pxvm/id --timeout-s 240 -C alltoall \
      -b "$size" -e "$size" -n 2 -w 1 -c 1 > "/tmp/pxvm-$tag/bench$i" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { cat "/tmp/pxvm-$tag/bench$i"; die "node $i's alltoall failed at $n nodes"; }
  done
  grep -q "Out of bounds values : 0 OK" "/tmp/pxvm-$tag/bench0" || { cat "/tmp/pxvm-$tag/bench0"; die "alltoall not exact"; }
  echo "$measure" > "/tmp/pxvm-$tag/measure.sh"
  line=$("$vm" run --name "$tag" --node 0 --timeout 60 -- sh /run/pxvm/measure.sh)
  paths=$("$vm" run --name "$tag" --node 0 --timeout 30 -- "$build/tools/plexusctl/plexusctl" paths 2>/dev/null || true)
  rdma_paths=$(grep -c " rdma" <<< "$paths" || true)
  tcp_paths=$(grep -c " tcp" <<< "$paths" || true)
  get() { sed -n "s/.*\b$1=\([0-9]*\).*/\1/p" <<< "$line"; }
  printf '%-6s %-6s %-5s %-4s %-4s %-4s %-5s %-12s %-11s %-10s %-10s %-10s\n' "$n" $((n - 1)) \
    "$(get qp)" "$(get ctx)" "$(get pd)" "$(get cq)" "$(get mr)" \
    "$(awk -v b="$(get mr_bytes)" 'BEGIN {printf "%.1f", b / 1048576}')" \
    "$(awk -v k="$(get pin_kib)" 'BEGIN {printf "%.1f", k / 1024}')" \
    "$(awk -v k="$(get rss_kib)" 'BEGIN {printf "%.1f", k / 1024}')" "$rdma_paths" "$tcp_paths"
  echo "$paths" > "/tmp/rdma_peers.$tag.paths"
  "$vm" down --name "$tag" > /dev/null 2>&1
  tag=
done
