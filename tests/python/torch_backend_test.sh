#!/usr/bin/env bash
# torch.distributed backend "plexus" against a private plexusd: the cases of
# torch_backend_test.py with 2 and 4 ranks. Exit 77 (skipped, with the reason) where
# /usr/bin/python3 has no torch or plexus_torch was not built.
# usage: torch_backend_test.sh PLEXUSD PYTHON_BUILD_DIR
set -euo pipefail
plexusd=$1 pydir=$2
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
source "$here/../lib/require_torch.sh"
source "$here/../lib/private_plexusd.sh"
start_private_plexusd "$plexusd" plexus-torch-test
export PYTHONPATH=$pydir
# The cases set what they need; a developer's own setting must not change them.
unset PLEXUS_TORCH_POOL_ALLOCATOR PLEXUS_POOL_SIZE

run() {
  echo "== $1 with $2 ranks"
  local s=0
  "$python" -W ignore "$here/torch_backend_test.py" "$1" "$2" >"$dir/out" 2>&1 || s=$?
  # torch's glog preamble is noise here.
  grep -v -e "Logging before InitGoogleLogging" "$dir/out" || true
  return $s
}
status=0
run collectives 2 || status=1
run collectives 4 || status=1
run pool 2 || status=1
run pool_full 2 || status=1
run pool_off 2 || status=1
echo "== PLEXUS_TORCH_POOL_ALLOCATOR=yes"
if out=$(PLEXUS_TORCH_POOL_ALLOCATOR=yes "$python" -c "import plexus_torch" 2>&1); then
  echo "FAIL: import with PLEXUS_TORCH_POOL_ALLOCATOR=yes succeeded"; status=1
elif ! grep -q "PLEXUS_TORCH_POOL_ALLOCATOR=yes: expected 0 (off) or 1" <<< "$out"; then
  echo "FAIL: the error does not name the setting: $out"; status=1
else
  echo "ok PLEXUS_TORCH_POOL_ALLOCATOR=yes refused at import, naming it"
fi
run failures 4 || status=1
run timeout 2 || status=1
run ddp 2 || status=1
run ddp 4 || status=1
run recovery 3 || status=1
exit $status
