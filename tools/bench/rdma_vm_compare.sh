#!/usr/bin/env bash
# Plexus over RDMA against the link's ceiling and against Plexus over TCP, on the same two
# soft-RoCE VMs in one run (tools/vm/plexus-vm.sh):
#   1. perftest's ib_write_bw between the VMs (what the emulated link carries by RDMA write),
#      one way and both ways at once (-b: an allreduce sends and receives at once, and under
#      emulation both directions share each VM's one emulated CPU);
#   2. plexus-bench allreduce across the two nodes with plexusd --transport rdma;
#   3. the same with the daemons restarted with --transport tcp.
# For 2 and 3, plexusd's CPU time (user + system, from /proc/PID/stat in each VM) around the
# bench, per GB of allreduce payload (size x timed iterations, as busbw counts it).
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

run_plexus() {  # transport -> "busbw_GBps cpu_s_per_GB"
  rm -f "$state/id"
  local before0 before1
  before0=$(cpu_ticks 0)
  before1=$(cpu_ticks 1)
  for n in 0 1; do
    "$vm" run --name "$tag" --node "$n" --timeout 600 -- "$bench" --nodes 1,1 --node "$n" \
      --id-file /run/pxvm/id --timeout-s 500 -C allreduce -b "$size" -e "$size" -n "$iters" -w 1 -c 1 \
      > "$state/bench$n" 2>&1 &
    eval "pid$n=$!"
  done
  wait "$pid0" || { cat "$state/bench0" >&2; exit 1; }
  wait "$pid1" || { cat "$state/bench1" >&2; exit 1; }
  grep -q "Out of bounds values : 0 OK" "$state/bench0" || { cat "$state/bench0" >&2; exit 1; }
  local after0 after1 hz
  after0=$(cpu_ticks 0)
  after1=$(cpu_ticks 1)
  hz=$(getconf CLK_TCK)
  # The busbw of the out-of-place row, and CPU-seconds per GB of payload per node (the warm-up
  # and check runs count too: iters + 2 allreduces of SIZE per node).
  awk -v t0="$before0" -v t1="$before1" -v a0="$after0" -v a1="$after1" -v hz="$hz" -v iters="$iters" \
    '/^ *[0-9]+ / && !done {bytes = $1; busbw = $8; done = 1}
     END {cpu = ((a0 - t0) + (a1 - t1)) / 2 / hz; gb = bytes * (iters + 2) / 1e9;
          printf "%s %.3f\n", busbw, cpu / gb}' "$state/bench0"
}

echo "# plexus-bench allreduce $size x $iters, plexusd --transport rdma" >&2
result=$(run_plexus rdma)  # its own line: a failure stops the script (set -e)
read -r rdma_busbw rdma_cpu <<< "$result"
grep -c "established, RDMA" "$state"/n*/plexusd.log > /dev/null || { echo "no RDMA data connection" >&2; exit 1; }
PLEXUS_VM_DAEMON_ARGS="--transport tcp" "$vm" daemons --name "$tag" >&2
echo "# plexus-bench allreduce $size x $iters, plexusd --transport tcp" >&2
result=$(run_plexus tcp)
read -r tcp_busbw tcp_cpu <<< "$result"

awk -v one="${ib_gbps[0]}" -v both="${ib_gbps[1]}" -v r="$rdma_busbw" -v t="$tcp_busbw" \
  -v rc="$rdma_cpu" -v tc="$tcp_cpu" -v size="$size" 'BEGIN {
  one /= 8; both /= 8;  # Gb/s -> GB/s
  # An allreduce of 2 nodes moves busbw each way at once: its ceiling is what the link
  # carries each way when both directions run, half of ib_write_bw -b (which reports the sum).
  each = both / 2;
  printf "ib_write_bw 1 MiB: one way %.4f GB/s; both ways %.4f GB/s in all, %.4f each way\n", one, both, each;
  printf "%-28s %10s %12s %12s %16s\n", "allreduce " size " (2 nodes)", "busbw GB/s", "/ each way", "/ one way", "plexusd CPU s/GB";
  printf "%-28s %10.4f %12.2f %12.2f %16.3f\n", "plexus --transport rdma", r, r / each, r / one, rc;
  printf "%-28s %10.4f %12.2f %12.2f %16.3f\n", "plexus --transport tcp", t, t / each, t / one, tc;
  printf "rdma / tcp: busbw %.2f, CPU per GB %.2f\n", r / t, rc / tc;
}'
