#!/usr/bin/env bash
# Creates a JetStream stream with nothing but bash, for NatsJetStream subscriptions
# (eg creates no stream, and the `nats` CLI is not in Debian's packages):
#
#   deploy/local/nats-stream.sh NAME SUBJECT…       e.g. EVENTS 'events.>'
#   just nats-stream EVENTS 'events.>'
#
# The server is $NATS_URL (default nats://127.0.0.1:4222). A user and password, or a
# token, go in it: nats://user:password@host:4222, nats://token@host:4222. It speaks
# NATS's text protocol over plain TCP (no TLS) and sends JetStream's own API request,
# $JS.API.STREAM.CREATE.<NAME>: a stream on disk with the server's defaults (no limits,
# a 2-minute duplicate window). Creating a stream that exists with the same subjects
# succeeds again; any refusal (subjects another stream takes, no JetStream) is printed.
set -euo pipefail
export LC_ALL=C

usage() { echo "usage: $0 NAME SUBJECT… (e.g. EVENTS 'events.>'); the server is \$NATS_URL, default nats://127.0.0.1:4222" >&2; exit 2; }
fail() { echo "error: $*" >&2; exit 1; }

[ $# -ge 2 ] || usage
name=$1
shift
[[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || fail "stream name \"$name\": letters, digits, - and _ only"
subjects=""
for subject in "$@"; do
  [[ "$subject" =~ ^[A-Za-z0-9_.*\>$-]+$ ]] || fail "subject \"$subject\": letters, digits and . * > - _ \$ only"
  subjects+="${subjects:+,}\"$subject\""
done

# The server's address and credentials, from the URL.
url="${NATS_URL:-nats://127.0.0.1:4222}"
url="${url%%,*}"
case "$url" in
  tls://*) fail "$url: this script speaks plain TCP only; use the nats CLI (https://github.com/nats-io/natscli) for TLS" ;;
esac
rest="${url#nats://}"
rest="${rest%%/*}"
credentials=""
if [[ "$rest" == *@* ]]; then
  userinfo="${rest%@*}"
  rest="${rest##*@}"
  json_escape() { local s=${1//\\/\\\\}; printf '%s' "${s//\"/\\\"}"; }
  if [[ "$userinfo" == *:* ]]; then
    credentials=",\"user\":\"$(json_escape "${userinfo%%:*}")\",\"pass\":\"$(json_escape "${userinfo#*:}")\""
  else
    credentials=",\"auth_token\":\"$(json_escape "$userinfo")\""
  fi
fi
host="${rest%:*}"
port="${rest##*:}"
[ "$host" != "$rest" ] || port=4222
host="${host#[}"
host="${host%]}"
where="$host:$port"

{ exec 3<>"/dev/tcp/$host/$port"; } 2>/dev/null || fail "cannot connect to NATS at $where (is nats-server running? \`nats-server -js\` starts one with JetStream)"

# next_line: the server's next protocol line into $line, without its CR (5 s at most).
next_line() {
  IFS= read -r -t 5 -u 3 line || fail "NATS at $where did not answer in 5 s"
  line="${line%$'\r'}"
}

next_line
[[ "$line" == INFO* ]] || fail "$where did not greet as a NATS server does: $line"
[[ "$line" != *'"tls_required":true'* ]] || fail "NATS at $where requires TLS; this script speaks plain TCP only: use the nats CLI"
[[ "$line" == *'"jetstream":true'* ]] || fail "NATS at $where has no JetStream: start it with \`nats-server -js\` (or \`jetstream: enabled\` in its configuration)"

inbox="_INBOX.eg_stream_$$_$RANDOM"
request="{\"name\":\"$name\",\"subjects\":[$subjects],\"storage\":\"file\"}"
printf 'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,"name":"eg nats-stream.sh","lang":"bash","version":"1","protocol":1%s}\r\nPING\r\n' "$credentials" >&3
while next_line; do
  case "$line" in
    PONG) break ;;
    PING) printf 'PONG\r\n' >&3 ;;
    -ERR*) fail "NATS at $where refused the connection: ${line#-ERR }" ;;
  esac
done
printf 'SUB %s 1\r\nPUB %s %s %d\r\n%s\r\n' "$inbox" "\$JS.API.STREAM.CREATE.$name" "$inbox" "${#request}" "$request" >&3

# The answer: a MSG with JetStream's JSON, or an HMSG with status 503 when nothing
# answers the API subject (JetStream off for this account).
while next_line; do
  case "$line" in
    PING) printf 'PONG\r\n' >&3 ;;
    -ERR*) fail "NATS at $where refused the request: ${line#-ERR }" ;;
    HMSG*) fail "nothing answered JetStream's API at $where (no responders): JetStream is not enabled for this user's account" ;;
    MSG*)
      IFS= read -r -t 5 -u 3 -N "${line##* }" answer || fail "NATS at $where did not finish its answer"
      break
      ;;
  esac
done
exec 3>&-

if [[ "$answer" == *'"error"'* ]]; then
  description=$(sed -nE 's/.*"description":"([^"]*)".*/\1/p' <<<"$answer")
  fail "JetStream at $where refused stream $name: ${description:-$answer}"
fi
echo "stream $name on $where stores subjects $*"
