#!/usr/bin/env bash
# Runs the same float-sum allreduce sweep through plexus-bench, OpenMPI (mpi_allreduce_bench)
# and Gloo (gloo_allreduce_bench), one after the other, and prints one side-by-side table of
# out-of-place bus bandwidth (plus latency with --stat median). All three programs print the
# nccl-tests table, so one awk parser reads them all.
set -euo pipefail

program_name=$(basename "$0")

usage() {
  cat <<EOF
usage: $program_name --build-dir DIR [options]

  --build-dir DIR        Plexus build tree (holds tools/plexus-bench and tools/bench)
  --ranks N              ranks for every library (4)
  -b SIZE                smallest message, bytes with optional K/M/G suffix (1M)
  -e SIZE                largest message (256M)
  -f N                   size multiplier per step (2)
  -n N                   timed iterations per size (20)
  -w N                   warmup iterations per size (5)
  --stat mean|median     time statistic; median also prints a latency table (mean)
  --peers LIST           comma-separated peers to run: mpi,gloo (default: every peer built;
                         a peer named here that was not built is an error)
  --peers-only           run only the peers, not plexus-bench (e.g. before it is built)
  --timeout SECONDS      bound on each program's run (1800)
  --baseline-build DIR   also run DIR's plexus-bench (an older build, its own embedded
                         daemon) as the peer "baseline": old binary against new in one run.
                         MPI and Gloo then run only when --peers names them
  --repeat N             run each program N times, interleaved (new, baseline, peers, new,
                         ...; with a baseline, the two take turns going first), and report
                         each size's median busbw over the runs (the
                         lower middle one for an even N) (1)
  -h, --help             this text

Sizes use powers of 1024 (1K = 1024 bytes). Raw outputs are kept in a temporary directory whose
path is printed.
EOF
}

die() {
  echo "$program_name: error: $*" >&2
  exit 1
}

# "1M" -> 1048576; plain numbers pass through.
to_bytes() {
  local text=$1
  [[ $text =~ ^([0-9]+)([KkMmGg]?)$ ]] || die "invalid size '$text' (want e.g. 8, 64K, 1M, 2G)"
  local value=${BASH_REMATCH[1]} suffix=${BASH_REMATCH[2]}
  case $suffix in
    K | k) echo $((value * 1024)) ;;
    M | m) echo $((value * 1024 * 1024)) ;;
    G | g) echo $((value * 1024 * 1024 * 1024)) ;;
    *) echo $((10#$value)) ;;
  esac
}

require_positive_integer() {
  if [[ ! $2 =~ ^[0-9]+$ ]] || ((10#$2 < $3)); then
    die "$1 needs an integer >= $3, got '$2'"
  fi
}

build_dir=""
ranks=4
min_size=1M
max_size=256M
step_factor=2
iterations=20
warmup_iterations=5
stat=mean
peers_requested=""
peers_only=0
timeout_seconds=1800
baseline_dir=""
repeat=1

while (($# > 0)); do
  case $1 in
    -h | --help)
      usage
      exit 0
      ;;
    --peers-only)
      peers_only=1
      shift
      continue
      ;;
  esac
  (($# >= 2)) || die "missing value after $1 (see --help)"
  case $1 in
    --build-dir) build_dir=$2 ;;
    --ranks) ranks=$2 ;;
    -b) min_size=$2 ;;
    -e) max_size=$2 ;;
    -f) step_factor=$2 ;;
    -n) iterations=$2 ;;
    -w) warmup_iterations=$2 ;;
    --stat) stat=$2 ;;
    --peers) peers_requested=$2 ;;
    --timeout) timeout_seconds=$2 ;;
    --baseline-build) baseline_dir=$2 ;;
    --repeat) repeat=$2 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  shift 2
done

[[ -n $build_dir ]] || die "--build-dir is required (see --help)"
[[ -d $build_dir ]] || die "build directory '$build_dir' does not exist"
build_dir=$(cd "$build_dir" && pwd)
require_positive_integer --ranks "$ranks" 1
require_positive_integer -f "$step_factor" 2
require_positive_integer -n "$iterations" 1
require_positive_integer -w "$warmup_iterations" 0
require_positive_integer --timeout "$timeout_seconds" 1
require_positive_integer --repeat "$repeat" 1
baseline_bench=""
if [[ -n $baseline_dir ]]; then
  [[ -d $baseline_dir ]] || die "--baseline-build: '$baseline_dir' is not a directory"
  baseline_bench=$(cd "$baseline_dir" && pwd)/tools/plexus-bench/plexus-bench
  [[ -x $baseline_bench ]] || die "--baseline-build: no plexus-bench under '$baseline_dir'"
fi
[[ $stat == mean || $stat == median ]] || die "--stat must be mean or median, got '$stat'"
min_bytes=$(to_bytes "$min_size")
max_bytes=$(to_bytes "$max_size")
((min_bytes <= max_bytes)) || die "-b ($min_size) is larger than -e ($max_size)"
command -v timeout >/dev/null || die "'timeout' (coreutils) is required"

plexus_bench=$build_dir/tools/plexus-bench/plexus-bench
mpi_bench=$build_dir/tools/bench/mpi_allreduce_bench
gloo_bench=$build_dir/tools/bench/gloo_allreduce_bench

# Decide what runs before running anything, so a bad setup fails in seconds, not after an hour.
run_plexus=1
if ((peers_only)); then
  run_plexus=0
  if [[ -x $plexus_bench ]]; then
    echo "note: --peers-only: not running $plexus_bench"
  else
    echo "note: --peers-only: plexus-bench not found at $plexus_bench; skipping it"
  fi
elif [[ ! -x $plexus_bench ]]; then
  die "plexus-bench not found at $plexus_bench" \
    "(build the plexus-bench target, or pass --peers-only)"
fi

run_mpi=0
run_gloo=0
if [[ -n $peers_requested ]]; then
  IFS=',' read -r -a peer_list <<<"$peers_requested"
  for peer in "${peer_list[@]}"; do
    case $peer in
      mpi)
        [[ -x $mpi_bench ]] || die "--peers mpi: $mpi_bench not built (needs libopenmpi-dev)"
        command -v mpirun >/dev/null || die "--peers mpi: mpirun not found"
        run_mpi=1
        ;;
      gloo)
        [[ -x $gloo_bench ]] || die "--peers gloo: $gloo_bench not built (needs libgloo-dev)"
        run_gloo=1
        ;;
      "") ;;
      *) die "unknown peer '$peer' in --peers (known: mpi, gloo)" ;;
    esac
  done
elif [[ -z $baseline_bench ]]; then
  if [[ -x $mpi_bench ]] && command -v mpirun >/dev/null; then
    run_mpi=1
  else
    echo "note: OpenMPI peer not built or mpirun missing; skipping it"
  fi
  if [[ -x $gloo_bench ]]; then
    run_gloo=1
  else
    echo "note: Gloo peer not built; skipping it"
  fi
fi
run_baseline=0
[[ -n $baseline_bench ]] && run_baseline=1
((run_plexus + run_baseline + run_mpi + run_gloo > 0)) || die "nothing to run"

raw_dir=$(mktemp -d "${TMPDIR:-/tmp}/plexus-compare-allreduce.XXXXXX")
echo "raw outputs: $raw_dir"
echo "allreduce float sum: $ranks ranks, $min_bytes..$max_bytes bytes x$step_factor," \
  "$iterations iterations ($warmup_iterations warmup), stat $stat," \
  "host $(hostname) with $(nproc) cores"

sweep_args=(-b "$min_bytes" -e "$max_bytes" -f "$step_factor" -n "$iterations"
  -w "$warmup_iterations" -c 1 --stat "$stat")

# run_one NAME COMMAND...: runs one program bounded by `timeout`, keeps stdout (the table) and
# stderr in $raw_dir, extracts "size time busbw" rows, and stops the script if anything fails.
run_one() {
  local name=$1
  shift
  ((round > 1)) && name=$name.$round
  local table_file=$raw_dir/$name.txt log_file=$raw_dir/$name.stderr.txt
  echo "$*" >"$raw_dir/$name.command.txt"
  echo "running $name: $*"
  local start_seconds=$SECONDS status=0
  timeout --kill-after=15 "$timeout_seconds" "$@" >"$table_file" 2>"$log_file" || status=$?
  if ((status != 0)); then
    local reason="exit status $status"
    ((status == 124 || status == 137)) && reason="timed out after ${timeout_seconds}s"
    {
      echo "$program_name: error: $name failed ($reason)"
      echo "  command: $*"
      echo "  output:  $table_file"
      echo "  stderr:  $log_file"
      echo "--- last lines of stderr ---"
      tail -n 20 "$log_file"
      echo "--- last lines of output ---"
      tail -n 10 "$table_file"
    } >&2
    exit 1
  fi
  # nccl-tests layout: skip comments; column 1 = size (B), 6 = out-of-place time, 8 = busbw.
  awk '!/^#/ && NF >= 8 && $1 ~ /^[0-9]+$/ { print $1, $6, $8 }' "$table_file" \
    >"$raw_dir/$name.parsed"
  [[ -s $raw_dir/$name.parsed ]] ||
    die "$name printed no result rows; see $table_file and $log_file"
  echo "  done in $((SECONDS - start_seconds))s"
}

run_plexus_round() {
  ((run_plexus)) || return 0
  run_one plexus "$plexus_bench" -C allreduce --spawn "$ranks" "${sweep_args[@]}" -d float -o sum
}
run_baseline_round() {
  ((run_baseline)) || return 0
  run_one baseline "$baseline_bench" -C allreduce --spawn "$ranks" "${sweep_args[@]}" \
    -d float -o sum
}
for ((round = 1; round <= repeat; round++)); do
# Old and new take turns going first: the second of two back-to-back runs was measured
# faster at some sizes even when both were the same binary.
if ((round % 2 == 1)); then
  run_plexus_round
  run_baseline_round
else
  run_baseline_round
  run_plexus_round
fi
if ((run_mpi)); then
  # vader (shared memory) + self only: the comparison is single-node; yielding when idle keeps
  # oversubscribed ranks from spinning each other off the cores.
  run_one openmpi mpirun --allow-run-as-root --oversubscribe --mca btl self,vader \
    --mca mpi_yield_when_idle 1 -np "$ranks" "$mpi_bench" "${sweep_args[@]}" \
    --timeout "$timeout_seconds"
fi
if ((run_gloo)); then
  run_one gloo "$gloo_bench" --ranks "$ranks" "${sweep_args[@]}" --timeout "$timeout_seconds"
fi
done

# Old against new on a machine whose speed drifts: each round's baseline ran right after
# the same round's plexus, so the median over rounds of the per-round ratio is steadier
# than the ratio of the medians.
paired_ratios() {
  local size rounds=()
  [[ -s $raw_dir/plexus.parsed && -s $raw_dir/baseline.parsed ]] || return 0
  echo
  echo "# Plexus/Baseline busbw, per-round pairs (round i of each), median and range over $repeat round(s)"
  printf "# %10s  %8s  %8s  %8s\n" "size (B)" median min max
  rounds=("")
  for ((r = 2; r <= repeat; r++)); do rounds+=(".$r"); done
  for size in $(awk '{print $1}' "$raw_dir/plexus.parsed"); do
    for suffix in "${rounds[@]}"; do
      awk -v s="$size" '$1 == s { print $3 }' "$raw_dir/plexus$suffix.parsed" |
        paste - <(awk -v s="$size" '$1 == s { print $3 }' "$raw_dir/baseline$suffix.parsed")
    done | awk '$1 > 0 && $2 > 0 { printf "%.4f\n", $1 / $2 }' | sort -g |
      awk -v s="$size" '{ r[++n] = $1 }
        END { if (n) printf "%12s  %8.3f  %8.3f  %8.3f\n", s, r[int((n + 1) / 2)], r[1], r[n] }'
  done
}
if ((run_baseline)); then paired_ratios | tee "$raw_dir/paired.txt"; fi

# With --repeat: each size's median busbw over the rounds (and that run's time).
if ((repeat > 1)); then
  for name in plexus baseline openmpi gloo; do
    [[ -s $raw_dir/$name.parsed ]] || continue
    cat "$raw_dir/$name.parsed" "$raw_dir/$name".[0-9]*.parsed | sort -k1,1n -k3,3g |
      awk '{ rows[$1] = rows[$1] " " $2 ":" $3; n[$1]++ }
           END { for (size in rows) { split(substr(rows[size], 2), r, " ");
                   split(r[int((n[size] + 1) / 2)], m, ":"); print size, m[1], m[2] } }' |
      sort -k1,1n >"$raw_dir/$name.median"
    mv "$raw_dir/$name.median" "$raw_dir/$name.parsed"
  done
fi

# Joins the parsed rows by size. Peers that did not run show "-".
for name in plexus baseline openmpi gloo; do
  touch "$raw_dir/$name.parsed"
done
columns=plexus labels=Plexus
((run_baseline)) && columns+=,baseline labels+=,Baseline
columns+=,openmpi,gloo labels+=,OpenMPI,Gloo
awk -v title="allreduce float sum, $ranks ranks" -v stat="$stat" \
  -v peers="$columns" -v labels="$labels" -f "$(dirname "$0")/side_by_side.awk" \
  peer=plexus "$raw_dir/plexus.parsed" peer=baseline "$raw_dir/baseline.parsed" \
  peer=openmpi "$raw_dir/openmpi.parsed" peer=gloo "$raw_dir/gloo.parsed" |
  tee "$raw_dir/comparison.txt"

echo
echo "raw outputs kept in $raw_dir"
