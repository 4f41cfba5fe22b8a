# eg — operate it with `just`. `just --list` shows every recipe.
set shell := ["bash", "-euo", "pipefail", "-c"]

# Local Redis port for `just up` (not 6379, to stay clear of a Redis you may run already).
export EG_LOCAL_REDIS_PORT := env_var_or_default("EG_LOCAL_REDIS_PORT", "6380")
# Where `just up` keeps Redis's append-only file, logs, pids and dead-letters (git-ignored).
export EG_LOCAL_DIR := env_var_or_default("EG_LOCAL_DIR", justfile_directory() / ".eg")

# What `just up` builds and `just egctl` runs: one package list, so `just egctl` right after
# `just up` finds everything built (another selection would resolve features differently and
# recompile).
local_packages := "-p eg-ingress -p eg-scheduler -p eg-sender -p eg-deadletter -p eg-demo-receiver -p egctl"

default:
    @just --list

# Start a local Redis, the four tiers and a demo receiver; create a demo topic and subscription; print the delivery settings (ports: docs/configuration.md).
up:
    deploy/local/ensure-redis.sh
    cargo build {{local_packages}}
    deploy/local/up.sh

# The delivery settings the local tiers run with, as `just up` printed them (retry schedule, minimums, probation, dead-letter delay).
settings:
    #!/usr/bin/env bash
    set -euo pipefail
    file="$EG_LOCAL_DIR/delivery-settings.txt"
    if [ ! -f "$file" ]; then echo "error: no local deployment has been started in $EG_LOCAL_DIR (just up)" >&2; exit 1; fi
    cat "$file"

# Stop everything `just up` started (SIGTERM, then SIGKILL after 15 s).
down:
    deploy/local/down.sh

# Follow the logs of everything `just up` started, or of one tier (`just logs sender`: every copy).
logs TIER="":
    #!/usr/bin/env bash
    set -euo pipefail
    tier="{{TIER}}"
    if [ -z "$tier" ]; then exec tail -n 50 -F "$EG_LOCAL_DIR"/logs/*.log; fi
    case "$tier" in redis) pattern="redis" ;; *) pattern="eg-${tier#eg-}" ;; esac
    files=()
    for f in "$EG_LOCAL_DIR/logs/$pattern.log" "$EG_LOCAL_DIR/logs/$pattern"-[0-9]*.log; do
      if [ -f "$f" ]; then files+=("$f"); fi
    done
    if [ ${#files[@]} -eq 0 ]; then
      echo "error: no log of $tier in $EG_LOCAL_DIR/logs (tiers: ingress, sender, scheduler, deadletter, demo-receiver, redis)" >&2
      exit 1
    fi
    exec tail -n 50 -F "${files[@]}"

# Run egctl against the local deployment (`just egctl topics list`, `just egctl --help`; docs/egctl.md).
[positional-arguments]
[no-exit-message]
egctl *ARGS:
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build -q {{local_packages}}
    # EGCTL_HINT_PREFIX: egctl's hints then say `just egctl …`, the command to type here.
    export EGCTL_URL="http://${EG__INGRESS__LISTEN:-127.0.0.1:8080}" EGCTL_TOKEN_FILE="$EG_LOCAL_DIR/admin-token" EGCTL_HINT_PREFIX="just egctl"
    exec "${CARGO_TARGET_DIR:-target}/debug/egctl" "$@"

# The local deployment at a glance: topics, subscriptions, rates, queues.
[no-exit-message]
status:
    @{{just_executable()}} egctl status

# Redrive every dead letter of a subscription of the local deployment: `just redrive demo/demo-receiver`.
[no-exit-message]
redrive SUB:
    #!/usr/bin/env bash
    set -euo pipefail
    sub="{{SUB}}"
    if [[ "$sub" != */* ]]; then echo "error: SUB is topic/subscription, e.g. demo/demo-receiver" >&2; exit 2; fi
    exec {{just_executable()}} egctl deadletters redrive "${sub%%/*}" "${sub#*/}" --all

# Create a JetStream stream for NatsJetStream subscriptions with nothing but bash: `just nats-stream EVENTS 'events.>'` (server: $NATS_URL, default nats://127.0.0.1:4222; docs/destinations.md).
[positional-arguments]
[no-exit-message]
nats-stream NAME +SUBJECTS:
    @deploy/local/nats-stream.sh "$@"

# Start a local 3-primary Redis Cluster (ports 7001-7003; EG_LOCAL_CLUSTER_REPLICAS=1 adds a replica each); `just up` then uses it.
cluster-up:
    deploy/local/ensure-redis.sh
    deploy/local/cluster-up.sh

# Stop the local Redis Cluster (its data stays for the next cluster-up); `just up` goes back to one Redis.
cluster-down:
    deploy/local/cluster-down.sh

# Run exactly N copies of a tier of the local deployment: `just scale sender 3` (sender, scheduler or deadletter).
scale TIER N:
    deploy/local/scale.sh {{TIER}} {{N}}

# Run the whole test suite: unit, property, Redis integration and end-to-end tests (part of them again on a Redis Cluster), then a one-minute chaos run.
test:
    deploy/local/ensure-redis.sh
    deploy/local/ensure-test-tools.sh
    cargo build --workspace --bins
    cargo test --workspace
    {{just_executable()}} test-cluster
    cargo run -q -p eg-chaos -- --duration 60s --json target/chaos-report.json

# The end-to-end areas that do not stop Redis, again on a 3-primary Redis Cluster (part of `just test`); each filter is an area's module path in the one `system` test binary.
test-cluster:
    EG_TEST_REDIS=cluster cargo test -p eg-system-tests --test system -- pipeline:: management:: schemas:: \
        filtering:: signing:: access:: bad_input:: protection:: operations:: egctl:: ordering:: rate_limits::

# Kill tiers, Redis and the brokers and stop Azurite while publishing; check every event answered 200 is delivered or dead-lettered (`just chaos --help`).
chaos *ARGS:
    deploy/local/ensure-redis.sh
    deploy/local/ensure-test-tools.sh
    cargo build -p eg-ingress -p eg-scheduler -p eg-sender -p eg-deadletter -p eg-chaos
    cargo run -q -p eg-chaos -- {{ARGS}}

# Formatting, unused dependencies (cargo-machete), layout and docs checks, and lints, as CI checks them.
lint:
    cargo fmt --all -- --check
    @command -v cargo-machete >/dev/null || { echo "error: cargo-machete is missing: cargo install --locked cargo-machete" >&2; exit 1; }
    cargo machete
    {{just_executable()}} check-layout
    {{just_executable()}} check-docs
    {{just_executable()}} check-openapi
    cargo clippy --workspace --all-targets -- -D warnings
    {{just_executable()}} check-deploy

# The layout rules of docs/architecture.md (no import cycle in a crate, no Redis key or script outside eg-store, no fate reason outside eg-core, bins/ only deployable programs, architecture.md in step with the tree), and every citation (`behaviour.md#<anchor>`, `<name>.md#<anchor>`) naming a file and heading that exist.
check-layout:
    python3 tools/check-layout.py

# Every setting, metric and HTTP route of the code documented (README.md, docs/*.md, deploy/README.md), and every one documented real.
check-docs:
    python3 tools/check-docs.py

# docs/openapi.yaml is valid OpenAPI 3.1 (openapi-spec-validator), documents every route the tiers serve with its methods and nothing else, and every example matches its schema; installs its pinned tools into target/openapi-check on first use.
check-openapi:
    tools/check-openapi.sh

# Check every file in deploy/ against its schema (Kubernetes, KEDA, compose, Prometheus), the Dockerfile, the dashboard's metrics and every EG__ setting; installs pinned tools into target/deploy-check on first use.
check-deploy:
    deploy/check.sh

# Benchmarks: the tiers built with --release around a real Redis; prints a table, writes target/bench/bench.json and docs/benchmarks.md (`just bench --quick`: a smoke check, its report goes to target/bench/).
[positional-arguments]
bench *ARGS:
    #!/usr/bin/env bash
    set -euo pipefail
    deploy/local/ensure-redis.sh
    deploy/local/ensure-test-tools.sh
    cargo build --release -p eg-bench -p eg-ingress -p eg-scheduler -p eg-sender -p eg-deadletter
    doc=docs/benchmarks.md
    for arg in "$@"; do if [ "$arg" = "--quick" ]; then doc=target/bench/benchmarks-quick.md; fi; done
    exec target/release/eg-bench all --doc "$doc" "$@"

# One benchmark scenario alone, release build (e.g. `just bench-one pull --consumers 8`); prints its table and writes target/bench/<scenario>.json, not docs/benchmarks.md.
[positional-arguments]
bench-one SCENARIO *ARGS:
    #!/usr/bin/env bash
    set -euo pipefail
    deploy/local/ensure-redis.sh
    deploy/local/ensure-test-tools.sh
    cargo build --release -p eg-bench -p eg-ingress -p eg-scheduler -p eg-sender -p eg-deadletter
    scenario="$1"
    shift
    exec target/release/eg-bench "$scenario" "$@"
