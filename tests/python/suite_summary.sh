#!/usr/bin/env bash
# The counts of a unittest run's log (PyTorch's distributed suite): prints
# "passed: P of R (skipped S, errors E, failures F)"; exits 1 if the log has no "Ran N tests"
# line or any error or failure. The verdict lines interleave with the rank processes' output,
# so the counts come from unittest's summary: passed = ran - skipped - errors - failures.
#   suite_summary.sh LOG
set -euo pipefail
log=$1
# "FAILED (errors=4, skipped=192)" or "OK (skipped=218)"; not "expected failures=N".
count() {
  grep -aoE "^(OK|FAILED) \(.*\)" "$log" | tail -1 | grep -oE "(\(|, )$1=[0-9]+" | cut -d= -f2 || true
}
ran=$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' "$log" | tail -1)
skipped=$(count skipped) errors=$(count errors) failures=$(count failures)
echo "passed: $((${ran:-0} - ${skipped:-0} - ${errors:-0} - ${failures:-0})) of ${ran:-0}" \
  "(skipped ${skipped:-0}, errors ${errors:-0}, failures ${failures:-0})"
[ -n "$ran" ] && [ "${errors:-0}" -eq 0 ] && [ "${failures:-0}" -eq 0 ]
