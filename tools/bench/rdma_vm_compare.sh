#!/usr/bin/env bash
# Plexus over RDMA against the link's ceiling and against Plexus over TCP, on the same two
# soft-RoCE VMs in one run (tools/vm/plexus-vm.sh):
#   1. perftest's ib_write_bw between the VMs (what the emulated link carries by RDMA write),
#      one way and both ways at once (-b: an allreduce sends and receives at once, and under
#      emulation both directions share each VM's one emulated CPU);
#   2. plexus-bench allreduce (both ways at once) and broadcast (one way, node 0 to node 1)
#      across the two nodes with plexusd --transport rdma as it runs by default: the
#      allreduce (one rank per node, so it runs in the rank's pool) sends its payloads
#      straight from the pool; the broadcast sends from the daemon's own buffer, copied;
#   3. the same with every payload copied into the path's registered buffer first
#      (--rdma-zero-copy-min-bytes 0): the allreduce's copy against none;
#   4. the same with the daemons restarted with --transport tcp.
# For 2 to 4, plexusd's CPU time (user + system, from /proc/PID/stat in each VM) around each
# bench, per GB of payload (size x iterations run, as busbw counts it).
# usage: rdma_vm_compare.sh BUILD_DIR [SIZE (default 16M)] [ITERS (default 5)]
set -euo pipefail
build=$(cd "$1" && pwd)
size=${2:-16M}
iters=${3:-5}
here=$(cd "$(dirname "$0")" && pwd)
vm="$here/../vm/plexus-vm.sh"
bench=$build/tools/plexus-bench/plexus-bench
tag="b$$"
trap '"$vm" down --name "$tag"' EXIT
PLEXUS_VM_DAEMON_ARGS="--transport rdma" "$vm" up --name "$tag" --nodes 2 --daemons "$build" >&2
state=/tmp/pxvm-$tag

echo "# ib_write_bw, 1 MiB messages, 5 s each: one way, then both ways at once" >&2
ib_gbps=()
for flags in "" "-b"; do
  # shellcheck disable=SC2086  # flags: none or one word
  "$vm" run --name "$tag" --node 1 --timeout 60 -- timeout 30 ib_write_bw -d rxe0 -x 1 -s 1048576 -D 5 -F \
    --report_gbits $flags > "$state/ib_server" 2>&1 &
  server=$!
  sleep 2
  # shellcheck disable=SC2086
  out=$("$vm" run --name "$tag" --node 0 --timeout 60 -- timeout 30 ib_write_bw -d rxe0 -x 1 -s 1048576 \
    -D 5 -F --report_gbits $flags 198.18.0.2)
  wait "$server"
  ib_gbps+=("$(awk '$1 == 1048576 {print $4}' <<< "$out")")
done

cpu_ticks() {  # node: plexusd's utime + stime, in clock ticks
  "$vm" run --name "$tag" --node "$1" -- sh -c 'awk "{print \$14 + \$15}" /proc/$(cat /run/pxvm/n'"$1"'/plexusd.pid)/stat'
}

run_plexus() {  # collective -> "busbw_GBps cpu_s_per_GB"
  rm -f "$state/id"
  local before0 before1
  before0=$(cpu_ticks 0)
  before1=$(cpu_ticks 1)
  for n in 0 1; do
    "$vm" run --name "$tag" --node "$n" --timeout 600 -- "$bench" --nodes 1,1 --node "$n" \
      --id-file /run/pxvm/id --timeout-s 500 -C "$1" -b "$size" -e "$size" -n "$iters" -w 1 -c 1 \
      > "$state/bench$n" 2>&1 &
    eval "pid$n=$!"
  done
  wait "$pid0" || { cat "$state/bench0" >&2; tail -n 8 "$state"/n*/plexusd.log >&2; exit 1; }
  wait "$pid1" || { cat "$state/bench1" >&2; tail -n 8 "$state"/n*/plexusd.log >&2; exit 1; }
  grep -q "Out of bounds values : 0 OK" "$state/bench0" || { cat "$state/bench0" >&2; exit 1; }
  local after0 after1 hz
  after0=$(cpu_ticks 0)
  after1=$(cpu_ticks 1)
  hz=$(getconf CLK_TCK)
  # The busbw of the out-of-place row from its time (plexus-bench prints GB/s to 2 decimals,
  # too coarse here; with 2 nodes busbw = algbw = size / time for both collectives), and
  # CPU-seconds per GB of payload per node. Both
  # variants run (out-of-place and in-place), each with 1 warm-up, ITERS timed and 1 checked
  # run: 2 x (ITERS + 2) collectives of SIZE.
  awk -v t0="$before0" -v t1="$before1" -v a0="$after0" -v a1="$after1" -v hz="$hz" -v iters="$iters" \
    '/^ *[0-9]+ / && !done {bytes = $1; busbw = $1 / $6 / 1e3; done = 1}
     END {cpu = ((a0 - t0) + (a1 - t1)) / 2 / hz; gb = bytes * 2 * (iters + 2) / 1e9;
          printf "%s %.3f\n", busbw, cpu / gb}' "$state/bench0"
}

rows=()
measure() {  # label: allreduce and broadcast with the daemons as they run now
  local result
  echo "# plexus-bench allreduce and broadcast $size x $iters: $1" >&2
  result=$(run_plexus allreduce)  # its own line: a failure stops the script (set -e)
  read -r ar ar_cpu <<< "$result"
  result=$(run_plexus broadcast)
  read -r bc bc_cpu <<< "$result"
  rows+=("$1 $ar $ar_cpu $bc $bc_cpu")
}

measure rdma
grep -c "established, RDMA" "$state"/n*/plexusd.log > /dev/null || { echo "no RDMA data connection" >&2; exit 1; }
PLEXUS_VM_DAEMON_ARGS="--transport rdma --rdma-zero-copy-min-bytes 0" "$vm" daemons --name "$tag" >&2
measure rdma-copied
PLEXUS_VM_DAEMON_ARGS="--transport tcp" "$vm" daemons --name "$tag" >&2
measure tcp

printf '%s\n' "${rows[@]}" | awk -v one="${ib_gbps[0]}" -v both="${ib_gbps[1]}" -v size="$size" '
  {label[NR] = $1; ar[NR] = $2; arc[NR] = $3; bc[NR] = $4; bcc[NR] = $5}
  END {
    one /= 8; both /= 8;  # Gb/s -> GB/s
    # An allreduce of 2 nodes moves busbw each way at once: against what the link carries
    # each way when both directions run (half of ib_write_bw -b, which reports the sum) and
    # against one way. A broadcast of 2 nodes moves busbw one way: against ib_write_bw one way.
    each = both / 2;
    printf "ib_write_bw 1 MiB: one way %.4f GB/s; both ways %.4f GB/s in all, %.4f each way\n", one, both, each;
    printf "%-12s | %-44s | %-34s\n", "", "allreduce " size " (both ways)", "broadcast " size " (one way)";
    printf "%-12s | %10s %10s %10s %10s | %10s %10s %12s\n", "plexusd", "busbw GB/s", "/ each way", "/ one way", "CPU s/GB", "busbw GB/s", "/ one way", "CPU s/GB";
    for (i = 1; i <= NR; ++i)
      printf "%-12s | %10.4f %10.2f %10.2f %10.3f | %10.4f %10.2f %12.3f\n", label[i], ar[i], ar[i] / each, ar[i] / one, arc[i], bc[i], bc[i] / one, bcc[i];
    for (i = 2; i <= NR; ++i)
      printf "rdma / %s: allreduce busbw %.2f, CPU per GB %.2f; broadcast busbw %.2f, CPU per GB %.2f\n", label[i], ar[1] / ar[i], arc[1] / arc[i], bc[1] / bc[i], bcc[1] / bcc[i];
  }'
