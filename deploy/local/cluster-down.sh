#!/usr/bin/env bash
# Stops the nodes `just cluster-up` started (their data stays under
# $EG_LOCAL_DIR/cluster for the next cluster-up) and makes `just up` use a single Redis
# again. Stop the tiers first (`just down`): they would only retry against a gone cluster.
set -euo pipefail
source "$(dirname "$0")/common.sh"
for f in "$dir/run"/redis-[0-9]*.pid; do
  [ -f "$f" ] || continue
  name=$(basename "$f" .pid)
  redis-cli -p "${name#redis-}" shutdown >/dev/null 2>&1 || true
  stop "$name"
done
rm -f "$dir/cluster-nodes"
echo "Redis Cluster stopped (data kept in $dir/cluster; \`rm -r $dir/cluster\` forgets it)."
