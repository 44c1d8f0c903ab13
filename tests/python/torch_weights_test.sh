#!/usr/bin/env bash
# plexus_torch.weights (the weight store from Python) against a private plexusd. Exit 77
# (skipped, with the reason) where /usr/bin/python3 has no torch or plexus_torch was not built.
# usage: torch_weights_test.sh PLEXUSD PYTHON_BUILD_DIR
set -euo pipefail
plexusd=$1 pydir=$2
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
source "$here/../lib/require_torch.sh"
source "$here/../lib/private_plexusd.sh"
start_private_plexusd "$plexusd" plexus-weights-test
export PYTHONPATH=$pydir
unset PLEXUS_TORCH_POOL_ALLOCATOR PLEXUS_POOL_SIZE
s=0
timeout 120 "$python" -W ignore "$here/torch_weights_test.py" >"$dir/out" 2>&1 || s=$?
grep -v -e "Logging before InitGoogleLogging" "$dir/out" || true
exit $s
