#!/usr/bin/env bash
# The Grafana dashboard (tools/grafana/plexus-dashboard.json) asks only for metrics plexusd
# exports: every plexus_* name in its queries (histogram suffixes aside) is a family
# daemon/control/admin_metrics.cc defines, and the file is one JSON object with panels.
set -euo pipefail
repo=$1
dashboard=$repo/tools/grafana/plexus-dashboard.json
source=$repo/daemon/control/admin_metrics.cc
grep -q '"panels"' "$dashboard" || { echo "FAIL: no panels in $dashboard"; exit 1; }
used=$(grep -o '"expr": "[^"]*' "$dashboard" | grep -o 'plexus_[a-z0-9_]*' |
  sed -E 's/_(bucket|sum|count)$//' | sort -u)
[ -n "$used" ] || { echo "FAIL: no plexus_ metric in any query"; exit 1; }
missing=0
for name in $used; do
  if ! grep -q "\"$name\"" "$source"; then
    echo "FAIL: the dashboard queries $name, which plexusd does not export"
    missing=1
  fi
done
[ $missing -eq 0 ] || exit 1
echo "PASS: $(echo "$used" | wc -l) metrics queried, all exported"
