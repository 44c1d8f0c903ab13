#!/usr/bin/env bash
# tools/gpu-check without a GPU: the bundle is made from this build and every binary in it
# runs with the bundle alone (its own chroot check); a dry run of a few steps passes the
# ones that need no GPU and skips a GPU step saying why. Exit 77 with the reason where it
# cannot run: not root (the check chroots), or a sanitizer build (its runtime reads /proc).
# usage: gpu_check_test.sh SOURCE_DIR BUILD_DIR SANITIZE(1|0)
set -euo pipefail
src=$1 build=$2 sanitize=$3
[ "$(id -u)" -eq 0 ] || { echo "SKIP the bundle's check chroots, which needs root"; exit 77; }
case $sanitize in 1) echo "SKIP a sanitizer build is not bundled (its runtime needs /proc, absent in the chroot)"; exit 77 ;; esac
work=$(mktemp -d /tmp/gpu-check-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$src/tools/gpu-check" bundle "$work/bundle" --no-build --build-dir "$build"
status=0
"$src/tools/gpu-check" run "$work/bundle" "$work/out" --dry-run \
  --steps environment,no_kernel_symbols,gpu_tests,allreduce_2r_host,copy_engine_64mib || status=$?
summary=$work/out/summary.txt
expect() { # PATTERN WHAT
  grep -qE "$1" "$summary" || { echo "FAIL $2 (pattern '$1' not in the summary)"; status=1; }
}
expect '^no_kernel_symbols +PASS' "the symbol check did not pass"
expect '^allreduce_2r_host +PASS .*64 MiB busbw [0-9.]+ GB/s.*wrong 0/0' "the host allreduce did not pass with a figure"
expect '^copy_engine_64mib +SKIP .*needs a GPU: dry run' "the GPU step was not skipped with its reason"
expect '^gpu_tests +(PASS|SKIP)' "the GPU test binary did not run"
[ -s "$work/out/logs.tar.gz" ] || { echo "FAIL no logs.tar.gz"; status=1; }
[ $status -eq 0 ] && echo "ok gpu-check bundle and dry run"
exit $status
