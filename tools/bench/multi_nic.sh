#!/usr/bin/env bash
# Allreduce busbw over two NICs per node, and what the reliable channel costs: 2 namespace
# nodes x 2 NICs, every NIC shaped with tc tbf to --rate, a plexusd per node, plexus-bench
# 64 MiB. Configurations, run interleaved --repeat times (a slow spell hits them alike):
#   two-nics        both NICs (channel acknowledgements on: --channel-acks auto)
#   one-nic-lost    nic1 of node 0 set down before the run: one rail survives
#   half-rate       nic1 of both nodes reshaped to half of --rate
#   one-path-acks-on   daemons on nic0 only (--nics nic0), acknowledgements on
#   one-path-acks-off  daemons on nic0 only, acknowledgements off (the plain TCP data path)
# Prints each run's busbw (GB/s, out of place), each configuration's median, and the median
# against the configuration's capacity (the shaped rates of the NICs it can use).
#
#   multi_nic.sh --build-dir DIR [--rate 2gbit] [--mtu 1500] [--repeat 3] [--size 64M]
#                [-n 10] [--configs LIST]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$root/tools/cluster/plexus-cluster.sh
build="" rate=2gbit mtu=1500 repeat=3 size=64M iters=10
configs="two-nics one-nic-lost half-rate one-path-acks-on one-path-acks-off"
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    --configs) configs=${2//,/ }; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "multi_nic.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$build" ] || { echo "multi_nic.sh: --build-dir is required" >&2; exit 2; }
bench=$build/tools/plexus-bench/plexus-bench
[[ $rate =~ ^([0-9]+)(k|m|g)bit$ ]] || { echo "multi_nic.sh: --rate like 2gbit" >&2; exit 2; }
scale=$(case ${BASH_REMATCH[2]} in k) echo 1000 ;; m) echo 1000000 ;; g) echo 1000000000 ;; esac)
rate_bps=$((BASH_REMATCH[1] * scale))
half_rate=$((rate_bps / 2))bit
name=nic$$
trap '"$cluster" down --name "$name" > /dev/null 2>&1 || true' EXIT
raw=$(mktemp -d /tmp/plexus-multi-nic.XXXXXX)

capacity() {  # config -> GB/s the NICs it can use carry at their shaped rates
  case "$1" in
    two-nics) echo "$rate_bps" | awk '{print 2 * $1 / 8e9}' ;;
    half-rate) echo "$rate_bps" | awk '{print 1.5 * $1 / 8e9}' ;;
    *) echo "$rate_bps" | awk '{print $1 / 8e9}' ;;
  esac
}

run_config() {  # config, run -> busbw
  local config=$1 run=$2 args=""
  case "$config" in
    one-path-acks-on) args="--nics nic0 --channel-acks on" ;;
    one-path-acks-off) args="--nics nic0 --channel-acks off" ;;
  esac
  PLEXUS_CLUSTER_DAEMON_ARGS="$args" "$cluster" up --name "$name" --nodes 2 --nics 2 \
    --rate "$rate" --mtu "$mtu" --daemons "$build" > /dev/null
  local on=("$cluster" run --name "$name" --node)
  case "$config" in
    one-nic-lost) "${on[@]}" 0 -- ip link set nic1 down ;;
    half-rate)
      for n in 0 1; do
        "${on[@]}" "$n" -- tc qdisc change dev nic1 root tbf rate "$half_rate" burst 256kb latency 50ms
      done ;;
  esac
  local out=$raw/$config.$run
  for n in 0 1; do
    "${on[@]}" "$n" -- bash -c '"$0" --nodes 1,1 --node "$PLEXUS_NODE" --id-file "$PLEXUS_CLUSTER_DIR/id" \
      -b "$1" -e "$1" -n "$2" -w 2 -c 1 --timeout-s 300 > "$3.n$PLEXUS_NODE" 2>&1' \
      "$bench" "$size" "$iters" "$out" &
  done
  wait || { echo "multi_nic.sh: $config run $run failed: $(cat "$out".n*)" >&2; exit 1; }
  cp /tmp/plexus-cluster-$name/n0/plexusd.log "$out.log0"
  "$cluster" down --name "$name" > /dev/null
  # busbw from the time column (the table rounds to 2 digits); 2 ranks: busbw = algbw.
  awk '!/^#/ && NF >= 8 && $1 ~ /^[0-9]+$/ && $6 > 0 {printf "%.4f\n", $1 / ($6 * 1000); exit}' "$out.n0"
}

echo "# allreduce float sum, ${size}B, 2 nodes x 1 rank, NICs shaped to $rate (tbf), MTU $mtu;" \
  "$iters iterations, busbw GB/s out of place; host $(hostname), $(nproc) cores"
declare -A results
for run in $(seq "$repeat"); do
  for config in $configs; do
    results[$config]+="$(run_config "$config" "$run") "
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf '%-18s %-24s %8s %9s %9s\n' config runs median capacity "of it"
for config in $configs; do
  # shellcheck disable=SC2086
  m=$(median ${results[$config]})
  c=$(capacity "$config")
  printf '%-18s %-24s %8s %9.4f %8.1f%%\n' "$config" "${results[$config]}" "$m" "$c" \
    "$(awk -v m="$m" -v c="$c" 'BEGIN {print 100 * m / c}')"
done
echo "# raw outputs: $raw"
