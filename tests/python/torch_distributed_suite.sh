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
source "$here/../lib/private_plexusd.sh"
start_private_plexusd "$plexusd" plexus-torch-suite
export PYTHONPATH=$pydir TEMP_DIR=$dir
# The suite logs every process start at INFO; the verdicts and the summary are what matter.
status=0
# With CI=true (as .ci/run sets it) the suite writes JUnit XML through xmlrunner, which
# Debian does not ship.
env -u CI "$python" -W ignore "$here/torch_distributed_suite.py" -v >"$dir/suite.log" 2>&1 || status=$?
grep -E " \.\.\. |^(ERROR|FAIL):|^Ran |^OK|^FAILED" "$dir/suite.log" || true
bash "$here/suite_summary.sh" "$dir/suite.log" || true
[ "$status" -eq 0 ] || tail -60 "$dir/suite.log"
exit "$status"
