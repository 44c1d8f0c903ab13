#!/usr/bin/env bash
# PyTorch's own distributed test suite with backend "plexus" and a private plexusd
# (torch_distributed_suite.py says how). Exit 77 (skipped, with the reason) without torch
# or the built module. usage: torch_distributed_suite.sh PLEXUSD PYTHON_BUILD_DIR
set -euo pipefail
plexusd=$1 pydir=$2
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
"$python" -c "import torch" 2>/dev/null || { echo "SKIP: $python has no torch (python3-torch)"; exit 77; }
ls "$pydir"/plexus_torch*.so >/dev/null 2>&1 || { echo "SKIP: plexus_torch was not built in $pydir"; exit 77; }
dir=$(mktemp -d /tmp/plexus-torch-suite.XXXXXX)
daemon=
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
export PLEXUS_SOCKET=$dir/plexusd.sock PLEXUS_AUTOSTART=0 PYTHONPATH=$pydir TEMP_DIR=$dir
"$plexusd" --socket "$PLEXUS_SOCKET" >"$dir/plexusd.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$PLEXUS_SOCKET" ] && break; sleep 0.05; done
[ -S "$PLEXUS_SOCKET" ] || { echo "FAIL: plexusd did not start"; cat "$dir/plexusd.log"; exit 1; }
# The suite logs every process start at INFO; the verdicts and the summary are what matter.
status=0
"$python" -W ignore "$here/torch_distributed_suite.py" -v >"$dir/suite.log" 2>&1 || status=$?
grep -E " \.\.\. |^(ERROR|FAIL):|^Ran |^OK|^FAILED" "$dir/suite.log" || true
echo "passed: $(grep -c ' \.\.\. ok$' "$dir/suite.log" || true)"
[ "$status" -eq 0 ] || tail -60 "$dir/suite.log"
exit "$status"
