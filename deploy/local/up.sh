#!/usr/bin/env bash
# Starts a local deployment in the background: Redis (append-only file under
# $EG_LOCAL_DIR/data), eg-ingress, eg-scheduler, eg-sender, eg-deadletter and the demo
# receiver; creates topic "demo" with a subscription to the receiver; prints the delivery
# settings the tiers run with, the broker and storage connections they were given (names
# only) and a curl.
#
# Broker and storage connections are given as for any deployment, in the environment:
# `EG__BROKERS__NATS__EVENTS__URL=nats://127.0.0.1:4222 just up` (docs/operations.md,
# "Broker and storage connections with just up").
#
# Every port is checked before anything starts; a port that is taken is named with the
# component that wanted it and the variable that moves it. If anything fails on the way
# (a component dies at start-up, the demo topic cannot be created), what this run started
# is stopped again.
set -euo pipefail
source "$(dirname "$0")/common.sh"
tier_env

components=(redis eg-ingress eg-scheduler eg-sender eg-deadletter eg-demo-receiver)
tiers=(eg-ingress eg-scheduler eg-sender eg-deadletter eg-demo-receiver)

# The settings as the tiers read them (a bad value stops here, before anything starts).
[ -x "$bin/eg-sender" ] || { echo "error: $bin/eg-sender is missing; build it with \`cargo build -p eg-sender\`" >&2; exit 1; }
settings=$(RUST_BACKTRACE=0 "$bin/eg-sender" --print-settings) || { echo "error: the tiers' settings are not valid (above)" >&2; exit 1; }

# Ports: those of components not running yet must be free.
taken=0
for name in "${components[@]}"; do
  running "$name" && continue
  read -r address variable <<<"$(listen_address "$name")" || true
  [ -n "${address:-}" ] || continue
  if port_taken "$address"; then
    echo "error: port ${address##*:} ($address), which $name needs, is taken by another process; set $variable to a free one (docs/configuration.md, \"Ports of the local setup\")" >&2
    taken=1
  fi
done
[ "$taken" = 0 ] || { echo "nothing was started" >&2; exit 1; }

# From here on, what this run starts is stopped again unless it all comes up.
started=()
finished=0
clean_up() {
  [ "$finished" = 1 ] && return
  [ ${#started[@]} -gt 0 ] || return
  echo "just up did not finish; stopping what it started: ${started[*]}" >&2
  local tiers_started=() name
  for name in "${started[@]}"; do [ "$name" = redis ] || tiers_started+=("$name"); done
  stop "${tiers_started[@]}" >&2
  if [[ " ${started[*]} " == *" redis "* ]]; then stop redis >&2; fi
}
trap clean_up EXIT

# connections: the broker and storage connections in the environment the tiers start
# with, as "<kind> <name>, …" (names as subscriptions name them: lower case), or
# "none". Only names: the values (URLs, passwords, keys) are secrets.
connections() {
  local variable kind rest key joined found=()
  local -A seen=()
  while IFS= read -r variable; do
    case "$variable" in
      EG__BROKERS__RABBITMQ__*__*) kind=RabbitMQ rest=${variable#EG__BROKERS__RABBITMQ__} ;;
      EG__BROKERS__NATS__*__*) kind=NATS rest=${variable#EG__BROKERS__NATS__} ;;
      EG__STORAGE__ACCOUNTS__*__*) kind="Azure storage account" rest=${variable#EG__STORAGE__ACCOUNTS__} ;;
      EG__STORAGE__S3__*__*) kind=S3 rest=${variable#EG__STORAGE__S3__} ;;
      *) continue ;;
    esac
    rest=${rest%%__*}
    key="$kind ${rest,,}"
    [ -n "${seen[$key]:-}" ] && continue
    seen[$key]=1
    found+=("$key")
  done < <(compgen -e | sort)
  if [ ${#found[@]} -eq 0 ]; then echo none; return; fi
  printf -v joined '%s, ' "${found[@]}"
  echo "${joined%, }"
}

# died NAME: says that NAME stopped at start-up, with its error (its last `Error:` and
# what follows, without a backtrace), or else the end of its log.
died() {
  local log="$dir/logs/$1.log" why
  why=$(awk '/^Error: /{e=""; keep=1} /^Stack backtrace:/{keep=0} keep{e=e $0 "\n"} END{printf "%s", e}' "$log")
  [ -n "$why" ] || why=$(tail -n 5 "$log")
  echo "error: $1 stopped while starting (see $log):" >&2
  printf '%b\n' "$why" | sed '/^$/d; s/^/  /' >&2
  exit 1
}

if [ -n "${EG__REDIS__CLUSTER_NODES:-}" ]; then
  # Any user:password@ in the node URLs is not printed.
  redis_where="the Redis Cluster at $(printf '%s' "$EG__REDIS__CLUSTER_NODES" | sed -E 's#//[^/@,]*@#//***@#g')"
else
  if ! running redis; then
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir/data" \
      --appendonly yes --appendfsync always --save "" --stream-node-max-bytes 16384 \
      --pidfile "$dir/run/redis.pid" --logfile "$dir/logs/redis.log" --daemonize yes
    started+=(redis)
  fi
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" ping >/dev/null || { echo "error: Redis did not start; see $dir/logs/redis.log" >&2; exit 1; }
  redis_where="Redis on 127.0.0.1:$port"
fi

already_running=0
for tier in "${tiers[@]}"; do
  running "$tier" && { echo "$tier is already running"; already_running=1; continue; }
  start "$tier"
  started+=("$tier")
done

# Each started process must come up: answer on its address, or it died (a port taken
# meanwhile, a bad setting) and its log says why.
ready_path() { case "$1" in eg-ingress) echo /readyz ;; eg-demo-receiver) echo /events ;; *) echo /healthz ;; esac; }
for name in "${started[@]}"; do
  [ "$name" = redis ] && continue
  read -r address _ <<<"$(listen_address "$name")"
  for _ in $(seq 150); do
    running "$name" || died "$name"
    curl -fs "http://$address$(ready_path "$name")" >/dev/null 2>&1 && break
    sleep 0.1
  done
  running "$name" || died "$name"
  curl -fs "http://$address$(ready_path "$name")" >/dev/null 2>&1 || { echo "error: $name is not ready after 15 s; see $dir/logs/$name.log" >&2; exit 1; }
done

ingress="http://$EG__INGRESS__LISTEN"
admin() { curl -fsS -H "Authorization: Bearer $EG__ADMIN__TOKEN" -H 'content-type: application/json' "$@"; }
admin -X PUT "$ingress/admin/topics/demo" -d '{"properties":{"inputSchema":"EventGridSchema"}}' >/dev/null
admin -X PUT "$ingress/admin/topics/demo/eventSubscriptions/demo-receiver" -d "{\"properties\":{
  \"destination\":{\"endpointType\":\"WebHook\",\"properties\":{\"endpointUrl\":\"http://$EG_DEMO_RECEIVER_LISTEN/hook\"}},
  \"retryPolicy\":{\"maxDeliveryAttempts\":5,\"eventTimeToLiveInMinutes\":60},
  \"deadLetterDestination\":{\"endpointType\":\"LocalDirectory\",\"properties\":{\"containerName\":\"demo\"}}}}" >/dev/null
key=$(admin -X POST "$ingress/admin/topics/demo/listKeys" | sed -E 's/.*"key1":"([^"]+)".*/\1/')
finished=1
echo "$settings" > "$dir/delivery-settings.txt"
given=$(connections)
if [ "$given" = none ]; then
  given="none (give them as for any deployment: EG__BROKERS__NATS__<NAME>__URL=… just up; docs/operations.md)"
fi
if [ "$already_running" = 1 ]; then
  given="$given (tiers that were already running keep the ones they started with)"
fi

cat <<TXT

$settings

eg is running: $redis_where, ingress on $ingress, demo receiver on http://$EG_DEMO_RECEIVER_LISTEN
Ops endpoints: sender $EG__SENDER__LISTEN, scheduler $EG__SCHEDULER__LISTEN, deadletter $EG__DEADLETTER__LISTEN
Admin token: $dir/admin-token   Logs: $dir/logs/   Dead-letters: $dir/deadletters/
Broker and storage connections: $given

Publish an event:

  curl -i -X POST '$ingress/topics/demo/api/events?api-version=2018-01-01' \\
    -H 'aeg-sas-key: $key' -H 'content-type: application/json' \\
    -d '[{"id":"'\$RANDOM'","subject":"/demo/hello","eventType":"Demo.Hello","eventTime":"'\$(date -u +%FT%TZ)'","dataVersion":"1.0","data":{"hello":"world"}}]'

See it arrive:   curl -s http://$EG_DEMO_RECEIVER_LISTEN/events    (or: just logs)
Operate it:      just status, just egctl --help (docs/egctl.md), just scale sender 3
Settings again:  just settings (docs/configuration.md)
Stop it all:     just down
TXT
