#!/usr/bin/env bash
# scale.sh TIER N: runs exactly N copies of a tier of the local deployment (sender,
# scheduler or deadletter), starting or stopping (SIGTERM) the extra ones. Copies run
# with the environment `just up` gives the tiers; the first copy is named eg-<tier>,
# the others eg-<tier>-2, eg-<tier>-3, … (pid files in $EG_LOCAL_DIR/run, logs in
# $EG_LOCAL_DIR/logs). Extra copies serve their ops endpoints on a free port, written
# in their log ("listening"), since the default one is taken by the first.
set -euo pipefail
source "$(dirname "$0")/common.sh"

usage() { echo "usage: just scale sender|scheduler|deadletter N" >&2; exit 2; }
[ $# -eq 2 ] || usage
tier=${1#eg-}
want=$2
case "$tier" in sender | scheduler | deadletter) ;; *) echo "error: $1 cannot be scaled locally (ingress copies would share a port)" >&2; usage ;; esac
[[ "$want" =~ ^[0-9]+$ ]] || { echo "error: N must be a number, got $want" >&2; usage; }
[ -f "$dir/run/redis.pid" ] || { echo "error: the local deployment is not running (just up)" >&2; exit 1; }

tier_env
name_of() { if [ "$1" -eq 1 ]; then echo "eg-$tier"; else echo "eg-$tier-$1"; fi; }
listen_var="EG__${tier^^}__LISTEN"

# Stop copies numbered above N (the highest first), and forget dead ones.
for name in $(copies "eg-$tier" | sort -t- -k3 -n -r); do
  index=${name#eg-$tier}; index=${index#-}; index=${index:-1}
  if [ "$index" -gt "$want" ]; then stop "$name"
  elif ! running "$name"; then rm -f "$dir/run/$name.pid"
  fi
done
# Start the missing ones.
for i in $(seq 1 "$want"); do
  name=$(name_of "$i")
  running "$name" && continue
  if [ "$i" -eq 1 ]; then
    start "$name"
  else
    (export "$listen_var=127.0.0.1:0"; start "$name" "eg-$tier")
  fi
  echo "started $name"
done

count=0
for name in $(copies "eg-$tier"); do running "$name" && count=$((count + 1)); done
echo "eg-$tier: $count running"
