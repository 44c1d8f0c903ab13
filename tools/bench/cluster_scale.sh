#!/usr/bin/env bash
# How Plexus scales with the number of nodes: for each N, a fresh namespace cluster of N
# nodes x 1 NIC with a plexusd per node and one rank per node, then, in this order:
#   script  the cluster script's own time to start N processes that do nothing (`run -- true`
#           on every node at once), so that "whole job" can be read net of it;
#   job     the whole job: N plexus-bench ranks start, form a communicator and run one 8 B
#           allreduce (exact); its wall time, and whether it formed;
#   sweep   a second job on the same daemons: 8 B (median time) and 1 MiB (busbw; --size) allreduce,
#           and the large size's median time in ms (what plexus-sim predicts);
#   open    the TCP sockets each daemon holds right after the jobs (mean), links still open;
#   idle    each daemon once its links closed while idle (--idle-close-ms, then 3 s more):
#           VmRSS and the TCP sockets it holds (mean and max over the nodes), its voluntary
#           context switches per second over 2 s (wake-ups of an idle daemon, all its threads),
#           and the nodes' listen-queue overflows (nstat);
#   mpi     with --peers mpi: OpenMPI over TCP on the same namespaces, 8 B (median) and
#           512 KiB (busbw), mpi_yield_when_idle so that idle ranks do not spin; a launch
#           that fails is tried once more (ORTE's launch tree now and then fails to connect
#           between namespaces that all have this machine's host name).
# One row per N; raw outputs are kept. Needs root.
#   tools/bench/cluster_scale.sh --build-dir DIR [--nodes 4,8,16,32,64] [--peers plexus,mpi]
#       [--timeout-s 120] [--rate RATE [--burst BYTES]] [--idle-close-ms 2000] [--size BYTES]
# --build-dir may be a whole build tree or a copy holding daemon/plexusd,
# tools/plexus-bench/plexus-bench and tools/bench/mpi_allreduce_bench (an older build, to
# measure a "before"). --rate shapes every NIC with tc tbf (--burst: its bucket; a few
# packets make every byte pay its wire time, as plexus-sim models it). --idle-close-ms is
# the daemons' --link-idle-close-ms (0: the flag is not passed, for a build from before it,
# and idle is measured right after the jobs). PLEXUS_CLUSTER_DAEMON_ARGS passes extra plexusd options.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$root/tools/cluster/plexus-cluster.sh
die() { echo "cluster_scale: $*" >&2; exit 2; }

build="" sizes=4,8,16,32,64 peers=plexus,mpi timeout_s=120 rate="" burst="" idle_close_ms=2000 size=1048576
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --nodes) sizes=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    --timeout-s) timeout_s=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --burst) burst=$2; shift 2 ;;
    --idle-close-ms) idle_close_ms=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$build" ] || die "--build-dir is required"
bench=$build/tools/plexus-bench/plexus-bench
mpi_bench=$build/tools/bench/mpi_allreduce_bench
[ -x "$bench" ] && [ -x "$build/daemon/plexusd" ] || die "no plexusd and plexus-bench under $build"
want_mpi=0
case ",$peers," in *,mpi,*) want_mpi=1; [ -x "$mpi_bench" ] || die "no $mpi_bench" ;; esac

raw=$(mktemp -d /tmp/plexus-cluster-scale.XXXXXX)
tag=""
trap '[ -z "$tag" ] || "$cluster" down --name "$tag" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# N processes on the nodes at once: "$@" is the command, with @N@ the node index.
on_all() {  # nodes, out-prefix, cmd...
  local nodes=$1 out=$2; shift 2
  local pids=() rc=0
  for n in $(seq 0 $((nodes - 1))); do
    "$cluster" run --name "$tag" --node "$n" -- "${@//@N@/$n}" > "$out.$n.txt" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

# rows of a plexus-bench / mpi_allreduce_bench table -> "size time_us"
times() { awk '!/^#/ && NF >= 8 && $1 ~ /^[0-9]+$/ && $6 > 0 { print $1, $6 }' "$1"; }
busbw() {  # file, size, world -> GB/s from the out-of-place time
  times "$1" | awk -v s="$2" -v w="$3" '$1 == s { printf "%.3f", $1 / ($2 * 1e3) * 2 * (w - 1) / w }'
}
time_of() { times "$1" | awk -v s="$2" '$1 == s { printf "%.0f", $2 }'; }
first_error() { grep -h -m1 -i -E 'error|fail' "$@" 2>/dev/null | head -1 | cut -c1-160; }

printf '%-5s | %-7s | %-9s | %-6s | %-8s | %-9s | %-9s | %-10s | %-9s | %-9s | %-7s | %-7s | %-8s | %-9s | %s\n' \
  nodes script whole_job form_ok 8B_us "$((size >> 10))KiB_GB/s" "$((size >> 10))KiB_ms" socks_open RSS_MiB RSSmax_MiB socks sockmax wakeups/s \
  listen_ovf "mpi 8B_us / 512KiB_GB/s" | tee "$raw/table.txt"
for N in ${sizes//,/ }; do
  tag=scale$$n$N
  dir=/tmp/plexus-cluster-$tag
  close_arg=""; [ "$idle_close_ms" -gt 0 ] && close_arg="--link-idle-close-ms $idle_close_ms"
  PLEXUS_CLUSTER_DAEMON_ARGS="$close_arg ${PLEXUS_CLUSTER_DAEMON_ARGS:-}" \
    "$cluster" up --name "$tag" --nodes "$N" --nics 1 ${rate:+--rate "$rate"} ${burst:+--burst "$burst"} --daemons "$build" >/dev/null
  placement=$(printf "1,%.0s" $(seq "$N")); placement=${placement%,}

  t=$(now); on_all "$N" "$raw/true.$N" true || true; script_s=$(elapsed "$t")

  rm -f "$dir/id"
  t=$(now)
  ok=yes
  on_all "$N" "$raw/job.$N" "$bench" --nodes "$placement" --node @N@ --id-file "$dir/id" \
    -C allreduce -b 8 -e 8 -n 1 -w 0 -c 1 --timeout-s "$timeout_s" || ok=no
  job_s=$(elapsed "$t")
  lat="-" bw="-" big_ms="-"
  if [ "$ok" = yes ]; then
    rm -f "$dir/id"
    if on_all "$N" "$raw/sweep.$N" "$bench" --nodes "$placement" --node @N@ --id-file "$dir/id" \
        -C allreduce -b 8 -e "$size" -f "$((size / 8))" -n 20 -w 5 -c 1 --stat median --timeout-s "$timeout_s"; then
      lat=$(time_of "$raw/sweep.$N.0.txt" 8); bw=$(busbw "$raw/sweep.$N.0.txt" "$size" "$N")
      big_ms=$(times "$raw/sweep.$N.0.txt" | awk -v s="$size" '$1 == s { printf "%.1f", $2 / 1000 }')
    else
      ok="sweep-failed"
    fi
  fi
  [ "$ok" = yes ] || echo "N=$N: $(first_error "$raw"/job.$N.*.txt "$raw"/sweep.$N.*.txt)" >&2

  # Right after the jobs, links open; then the idle daemons once their links have closed:
  # memory, sockets, wake-ups, listen overflows.
  sockets() { ip netns exec "px$tag-n$1" ss -tanpH 2>/dev/null | grep -c "pid=$2," || true; }
  open_socks=$(for n in $(seq 0 $((N - 1))); do sockets "$n" "$(cat "$dir/n$n/plexusd.pid")"; done |
    awk '{ s += $1 } END { printf "%.1f", s / NR }')
  if [ "$idle_close_ms" -gt 0 ]; then sleep "$(awk -v m="$idle_close_ms" 'BEGIN { print m / 1000 + 3 }')"; fi
  : > "$raw/idle.$N.txt"
  for n in $(seq 0 $((N - 1))); do
    pid=$(cat "$dir/n$n/plexusd.pid")
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
    socks=$(sockets "$n" "$pid")
    ovf=$(ip netns exec "px$tag-n$n" nstat -az TcpExtListenOverflows 2>/dev/null |
      awk '/ListenOverflows/ { print $2 }')
    echo "$n $pid $rss $socks ${ovf:-0}" >> "$raw/idle.$N.txt"
  done
  ctx() { for p in $(awk '{ print $2 }' "$raw/idle.$N.txt"); do
    cat /proc/"$p"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches/ { print $2 }'; done | awk '{ s += $1 } END { print s }'; }
  c0=$(ctx); sleep 2; c1=$(ctx)
  wake=$(awk -v a="$c0" -v b="$c1" -v n="$N" 'BEGIN { printf "%.0f", (b - a) / 2 / n }')
  read -r rss rssmax socks sockmax ovf < <(awk '{ r += $3; if ($3 > rm) rm = $3; s += $4;
    if ($4 > sm) sm = $4; o += $5 } END { printf "%.1f %.1f %.1f %d %d\n", r / NR / 1024, rm / 1024,
    s / NR, sm, o }' "$raw/idle.$N.txt")

  mpi="-"
  if [ "$want_mpi" = 1 ]; then
    hosts=$(for n in $(seq 0 $((N - 1))); do printf "198.18.0.%s:1," $((n + 1)); done)
    for attempt in 1 2; do
    if "$cluster" run --name "$tag" --node 0 -- timeout "$((timeout_s * 3))" mpirun --allow-run-as-root \
        --oversubscribe --host "${hosts%,}" -np "$N" \
        --mca plm_rsh_agent "$root/tools/bench/netns_rsh.sh" --mca btl tcp,self \
        --mca btl_tcp_if_include 198.18.0.0/24 --mca oob_tcp_if_include 198.18.0.0/24 \
        --mca mpi_yield_when_idle 1 "$mpi_bench" -b 8 -e 512K -f 65536 -n 20 -w 5 --stat median \
        --timeout "$((timeout_s * 3))" > "$raw/mpi.$N.txt" 2> "$raw/mpi.$N.stderr.txt"; then
      mpi="$(time_of "$raw/mpi.$N.txt" 8) / $(busbw "$raw/mpi.$N.txt" 524288 "$N")"
      break
    fi
    mpi="failed"
    cp "$raw/mpi.$N.stderr.txt" "$raw/mpi.$N.attempt$attempt.stderr.txt"
    done
  fi
  printf '%-5s | %-7s | %-9s | %-6s | %-8s | %-9s | %-9s | %-10s | %-9s | %-9s | %-7s | %-7s | %-8s | %-9s | %s\n' \
    "$N" "$script_s" "$job_s" "$ok" "$lat" "$bw" "$big_ms" "$open_socks" "$rss" "$rssmax" "$socks" "$sockmax" "$wake" "$ovf" \
    "$mpi" | tee -a "$raw/table.txt"
  cp -r "$dir" "$raw/cluster.$N" 2>/dev/null || true
  rm -f "$raw/cluster.$N/secret"
  "$cluster" down --name "$tag" >/dev/null
  tag=""
done
echo "raw outputs kept in $raw"
