# eg — operate it with `just`. `just --list` shows every recipe.
set shell := ["bash", "-euo", "pipefail", "-c"]

# Local Redis port for `just up` (not 6379, to stay clear of a Redis you may run already).
export EG_LOCAL_REDIS_PORT := env_var_or_default("EG_LOCAL_REDIS_PORT", "6380")
# Where `just up` keeps Redis's append-only file, logs, pids and dead-letters (git-ignored).
export EG_LOCAL_DIR := env_var_or_default("EG_LOCAL_DIR", justfile_directory() / ".eg")

default:
    @just --list

# Start a local Redis, the four tiers and a demo receiver; create a demo topic and subscription.
up:
    deploy/local/ensure-redis.sh
    cargo build --workspace --bins
    deploy/local/up.sh

# Stop everything `just up` started (SIGTERM, then SIGKILL after 15 s).
down:
    deploy/local/down.sh

# Follow the logs of everything `just up` started.
logs:
    tail -n 50 -F "$EG_LOCAL_DIR"/logs/*.log

# Run the whole test suite: unit, property, Redis integration and end-to-end tests, then a one-minute chaos run.
test:
    deploy/local/ensure-redis.sh
    cargo build --workspace --bins
    cargo test --workspace
    cargo run -q -p eg-chaos -- --duration 60s --json target/chaos-report.json

# Kill tiers and Redis at random while publishing; check every event answered 200 is delivered or dead-lettered (`just chaos --help`).
chaos *ARGS:
    deploy/local/ensure-redis.sh
    cargo build --workspace --bins
    cargo run -q -p eg-chaos -- {{ARGS}}

# Formatting and lints, as CI checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
