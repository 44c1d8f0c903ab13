#!/usr/bin/env bash
# Allreduce across a namespace cluster, side by side: Plexus (a plexusd per node,
# plexus-bench --nodes), OpenMPI over TCP (mpirun launching through `ip netns exec`,
# --mca btl tcp,self) and Gloo over TCP (FileStore rendezvous), on N nodes x 1 NIC with R
# ranks per node, optionally shaped with tc tbf. Prints one table with Plexus/peer ratios;
# raw outputs are kept. Needs root.
#   tools/bench/cluster_compare.sh --build-dir DIR [--nodes 4] [--ranks-per-node 1]
#       [--rate 2gbit] [--mtu 1500] [--tcp-cc NAME] [--peers plexus,mpi,gloo] [-b 1M] [-e 64M]
#       [-f 2] [-n 10] [-w 2] [--stat mean|median] [--repeat R] [--baseline-build DIR]
# --baseline-build adds the peer "baseline": DIR's plexusd on every node and DIR's
# plexus-bench (an older build against this one, in one run; the daemons are swapped
# before and after each of its runs).
# With --repeat, the peers run R times, interleaved (so a slow spell of the machine hits
# them alike; every other run in reverse order), and the table shows each peer's median run
# per size.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$root/tools/cluster/plexus-cluster.sh
die() { echo "cluster_compare: $*" >&2; exit 2; }

build="" nodes=4 per_node=1 rate="" mtu=1500 tcp_cc="" peers=plexus,mpi,gloo
min=1M max=64M factor=2 iters=10 warmup=2 stat=mean repeat=1 baseline=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --ranks-per-node) per_node=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --tcp-cc) tcp_cc=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    -b) min=$2; shift 2 ;;
    -e) max=$2; shift 2 ;;
    -f) factor=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    --stat) stat=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --baseline-build) baseline=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$build" ] || die "--build-dir is required"
if [ -n "$baseline" ]; then
  [ -x "$baseline/tools/plexus-bench/plexus-bench" ] && [ -x "$baseline/daemon/plexusd" ] ||
    die "--baseline-build: no plexusd and plexus-bench under $baseline"
  case ",$peers," in *,baseline,*) ;; *) peers=$peers,baseline ;; esac
fi
case ",$peers," in *,baseline,*) [ -n "$baseline" ] || die "peer baseline needs --baseline-build DIR" ;; esac
bench=$build/tools/plexus-bench/plexus-bench
mpi_bench=$build/tools/bench/mpi_allreduce_bench
gloo_bench=$build/tools/bench/gloo_allreduce_bench
world=$((nodes * per_node))
placement=$(printf "%s," $(yes "$per_node" | head -n "$nodes")); placement=${placement%,}
sweep=(-b "$min" -e "$max" -f "$factor" -n "$iters" -w "$warmup" -c 1 --stat "$stat")

tag=cmp$$
raw=$(mktemp -d /tmp/plexus-cluster-compare.XXXXXX)
trap '"$cluster" down --name "$tag" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
"$cluster" up --name "$tag" --nodes "$nodes" --nics 1 ${rate:+--rate "$rate"} --mtu "$mtu" \
  ${tcp_cc:+--tcp-cc "$tcp_cc"} --daemons "$build"
dir=/tmp/plexus-cluster-$tag
addr() { echo "198.18.0.$(($1 + 1))"; }
tcp_label=${tcp_cc:-$(sysctl -n net.ipv4.tcp_congestion_control)}
echo "allreduce float sum: $nodes nodes x $per_node ranks, rate ${rate:-unshaped}, MTU $mtu," \
  "TCP $tcp_label, $min..$max x$factor, $iters iterations, stat $stat; host $(hostname), $(nproc) cores"

parse() {  # table file -> "size time busbw" rows (out of place), busbw to 4 digits from time
  awk -v w="$world" '!/^#/ && NF >= 8 && $1 ~ /^[0-9]+$/ && $6 > 0 {
    print $1, $6, $1 / ($6 * 1e3) * 2 * (w - 1) / w }' "$1"
}
median_runs() {  # "size time busbw" rows of several runs -> per size, the run of median busbw
  sort -k1,1n -k3,3g "$@" | awk '
    { if ($1 != size) flush(); size = $1; rows[++n] = $0 }
    function flush() { if (n) print rows[int((n + 1) / 2)]; n = 0 }
    END { flush() }'
}

for run in $(seq 1 "$repeat"); do
# Every other run goes through the peers in reverse, so no peer always runs first.
order=${peers//,/ }
[ $((run % 2)) -eq 0 ] && order=$(echo "$order" | tr ' ' '\n' | tac | tr '\n' ' ')
for peer in $order; do
  start=$SECONDS
  case "$peer" in
    plexus|baseline)
      peer_bench=$bench
      if [ "$peer" = baseline ]; then
        "$cluster" daemons --name "$tag" --daemons "$baseline"
        peer_bench=$baseline/tools/plexus-bench/plexus-bench
      fi
      rm -f "$dir/id"
      pids=()
      for n in $(seq 0 $((nodes - 1))); do
        "$cluster" run --name "$tag" --node "$n" -- "$peer_bench" --nodes "$placement" --node "$n" \
          --id-file "$dir/id" -C allreduce "${sweep[@]}" --timeout-s 900 > "$raw/$peer.$n.txt" 2>&1 &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p" || { cat "$raw"/$peer.*.txt; die "$peer failed"; }; done
      cp "$raw/$peer.0.txt" "$raw/$peer.txt"
      if [ "$peer" = baseline ]; then
        "$cluster" daemons --name "$tag" --daemons "$build"
      fi ;;
    mpi)
      hosts=$(for n in $(seq 0 $((nodes - 1))); do printf "%s:%s," "$(addr "$n")" "$per_node"; done)
      "$cluster" run --name "$tag" --node 0 -- timeout 900 mpirun --allow-run-as-root \
        --oversubscribe --host "${hosts%,}" -np "$world" \
        --mca plm_rsh_agent "$root/tools/bench/netns_rsh.sh" --mca btl tcp,self \
        --mca btl_tcp_if_include 198.18.0.0/24 --mca oob_tcp_if_include 198.18.0.0/24 \
        --mca mpi_yield_when_idle 1 "$mpi_bench" "${sweep[@]}" --timeout 900 \
        > "$raw/mpi.txt" 2> "$raw/mpi.stderr.txt" || { tail -20 "$raw/mpi.stderr.txt"; die "mpi failed"; } ;;
    gloo)
      rm -rf "$dir/gloo-store"; mkdir -p "$dir/gloo-store"  # a fresh rendezvous per run
      pids=()
      for n in $(seq 0 $((nodes - 1))); do
        "$cluster" run --name "$tag" --node "$n" -- "$gloo_bench" --ranks "$per_node" \
          --first-rank $((n * per_node)) --world "$world" --store "$dir/gloo-store" \
          --hostname "$(addr "$n")" "${sweep[@]}" --timeout 900 > "$raw/gloo.$n.txt" 2>&1 &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p" || { cat "$raw"/gloo.*.txt; die "gloo failed"; }; done
      cp "$raw/gloo.0.txt" "$raw/gloo.txt" ;;
    *) die "unknown peer '$peer' (plexus, mpi, gloo, baseline)" ;;
  esac
  cp "$raw/$peer.txt" "$raw/$peer.run$run.txt"
  parse "$raw/$peer.txt" > "$raw/$peer.run$run.parsed"
  [ -s "$raw/$peer.run$run.parsed" ] || die "$peer printed no rows; see $raw/$peer.txt"
  echo "$peer (run $run of $repeat): done in $((SECONDS - start)) s"
done
done
for peer in ${peers//,/ }; do median_runs "$raw/$peer".run*.parsed > "$raw/$peer.parsed"; done

labels=$(echo "$peers" | sed 's/plexus/Plexus/; s/mpi/OpenMPI/; s/gloo/Gloo/; s/baseline/Baseline/')
args=()
for peer in ${peers//,/ }; do args+=("peer=$peer" "$raw/$peer.parsed"); done
awk -v title="allreduce float sum, $nodes nodes x $per_node ranks, ${rate:-unshaped}, MTU $mtu, TCP $tcp_label, median of $repeat runs" \
  -v stat="$stat" -v peers="$peers" -v labels="$labels" -f "$root/tools/bench/side_by_side.awk" \
  "${args[@]}" | tee "$raw/comparison.txt"
echo
echo "raw outputs kept in $raw"
