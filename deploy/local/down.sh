#!/usr/bin/env bash
# Stops what deploy/local/up.sh (and `just scale`) started: the tiers first, every copy
# (SIGTERM, they finish what they hold), Redis last.
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ -d "$dir/run" ] || { echo "nothing is running"; exit 0; }

for tier in eg-ingress eg-sender eg-scheduler eg-deadletter; do
  for name in $(copies "$tier"); do stop "$name"; done
done
stop eg-demo-receiver
stop redis
