#!/usr/bin/env bash
# Stops what deploy/local/up.sh (and `just scale`) started: the tiers first, every copy
# at once (SIGTERM, they finish what they hold), Redis last.
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ -d "$dir/run" ] || { echo "nothing is running"; exit 0; }

# Every tier copy and the demo receiver at once (one wait, not one per process), Redis last.
names=()
for tier in eg-ingress eg-sender eg-scheduler eg-deadletter; do
  for name in $(copies "$tier"); do names+=("$name"); done
done
stop "${names[@]}" eg-demo-receiver
stop redis
