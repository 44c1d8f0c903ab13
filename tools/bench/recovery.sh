#!/usr/bin/env bash
# Recovery from a lost node: a fresh namespace cluster of N nodes x 1 NIC, a plexusd and one
# recovery_bench rank per node; once every rank ran an exact 1 MiB allreduce, the last node's
# daemon and rank are killed (SIGKILL), and the survivors recover by
#   shrink    plexus_comm_shrink without the lost rank, or
#   recreate  destroy, a fresh unique id from rank 0 through a file, init anew,
# then run one exact allreduce. Per run, the slowest survivor's parts, from the kill:
# detection (its allreduce failed), agreement (the new communicator formed), first op (an
# exact allreduce on it) and the total. Both modes alternate, --runs times each per N; the
# medians of the totals are printed last. Needs root.
#   tools/bench/recovery.sh --build-dir DIR [--nodes 4,16] [--runs 3] [--timeout-s 60]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$root/tools/cluster/plexus-cluster.sh
die() { echo "recovery: $*" >&2; exit 2; }

build="" sizes=4,16 runs=3 timeout_s=60
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --nodes) sizes=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --timeout-s) timeout_s=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$build" ] || die "--build-dir is required"
bench=$build/tools/bench/recovery_bench
[ -x "$bench" ] && [ -x "$build/daemon/plexusd" ] || die "no plexusd and recovery_bench under $build"
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"

raw=$(mktemp -d /tmp/plexus-recovery.XXXXXX)
tag=""
trap '[ -z "$tag" ] || "$cluster" down --name "$tag" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM

printf '%-5s | %-8s | %-3s | %-9s | %-8s | %-8s | %-8s | %s\n' nodes mode run detect_ms agree_ms first_ms total_ms ok |
  tee "$raw/table.txt"
for N in ${sizes//,/ }; do
  for run in $(seq "$runs"); do
    for mode in shrink recreate; do
      tag=rec$$n$N$mode$run
      dir=/tmp/plexus-cluster-$tag
      "$cluster" up --name "$tag" --nodes "$N" --nics 1 --daemons "$build" >/dev/null
      out=$raw/$N.$mode.$run
      pids=()
      for n in $(seq 0 $((N - 1))); do
        "$cluster" run --name "$tag" --node "$n" -- "$bench" --dir "$dir" --rank "$n" --nranks "$N" \
          --mode "$mode" --timeout-s "$timeout_s" > "$out.$n.txt" 2>&1 &
        pids+=($!)
      done
      for _ in $(seq $((timeout_s * 10))); do
        [ "$(ls "$dir"/ready.* 2>/dev/null | wc -l)" -ge "$N" ] && break
        sleep 0.1
      done
      sleep 0.5  # allreduces running
      date +%s%N > "$dir/killed_at.tmp" && mv "$dir/killed_at.tmp" "$dir/killed_at"
      kill -9 "$(cat "$dir/n$((N - 1))/plexusd.pid")" 2>/dev/null || true
      pkill -9 -f -- "^$bench --dir $dir --rank $((N - 1)) " || true
      ok=yes
      for i in $(seq 0 $((N - 2))); do wait "${pids[$i]}" || ok=no; done
      wait "${pids[$((N - 1))]}" 2>/dev/null || true
      row=$(cat "$out".*.txt | awk '/^rank / { for (i = 3; i <= 9; i += 2) if ($(i + 1) > m[i]) m[i] = $(i + 1); n++ }
        END { if (n) printf "%.1f %.1f %.1f %.1f %d", m[3], m[5], m[7], m[9], n; else print "- - - - 0" }')
      read -r detect agree first total count <<< "$row"
      [ "$count" = $((N - 1)) ] || ok=no
      [ "$ok" = yes ] || echo "N=$N $mode run $run: $(grep -h -m1 -i -E 'error|fail|recovery_bench:' "$out".*.txt | head -1)" >&2
      printf '%-5s | %-8s | %-3s | %-9s | %-8s | %-8s | %-8s | %s\n' "$N" "$mode" "$run" "$detect" "$agree" "$first" "$total" "$ok" |
        tee -a "$raw/table.txt"
      for n in $(seq 0 $((N - 1))); do cp "$dir/n$n/plexusd.log" "$out.n$n.plexusd.log" 2>/dev/null || true; done
      "$cluster" down --name "$tag" >/dev/null
      tag=""
    done
  done
done
echo "medians of the total (ms), from the kill to the first exact allreduce on the survivors:"
for N in ${sizes//,/ }; do
  for mode in shrink recreate; do
    totals=$(awk -F'|' -v n="$N" -v m="$mode" 'NR > 1 && $8 ~ /yes/ { gsub(/ /, "", $1); gsub(/ /, "", $2);
      if ($1 == n && $2 == m) print $7 + 0 }' "$raw/table.txt" | sort -n)
    count=$(echo "$totals" | grep -c . || true)
    [ "$count" -gt 0 ] || { echo "  $N nodes, $mode: no run succeeded"; continue; }
    echo "  $N nodes, $mode: $(echo "$totals" | sed -n "$(((count + 1) / 2))p") ms (of $count)"
  done
done
echo "raw outputs kept in $raw"
