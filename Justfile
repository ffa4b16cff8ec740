# Bloodraven's commands. Run ./setup first on a fresh machine (README quick start).

set shell := ["bash", "-euo", "pipefail", "-c"]

# The checkout the harness and the playground work on (not the one a shared target dir's
# binary was first built in).
export BLOODRAVEN_ROOT := justfile_directory()

# list recipes
default:
    @just --list

# format check, clippy with warnings denied, and every test (root: localkube and MariaDB tests)
test:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo run -q -p bloodraven-sim --release -- --seeds 0..200
    cargo test --workspace --no-fail-fast

# regenerate fixtures/crds from the bloodraven-api types
crdgen:
    cargo run -q -p bloodraven-api --bin crdgen

# regenerate scenarios/schema.json (the scenario files' JSON Schema) from the scenario model
scenario-schema:
    cargo run -q -p bloodraven-harness --bin scenario-schema

# run the deterministic simulator over a seed range, e.g. `just sim 0..10000`
sim seeds="0..1000" *flags="":
    cargo run -q -p bloodraven-sim --release -- --seeds {{seeds}} {{flags}}

# run exactly one chaos scenario, by number, against a live cluster, e.g. `just chaos 38`
chaos id *flags="": _release-build
    target_dir="${CARGO_TARGET_DIR:-target}"; "$target_dir/release/bloodraven-harness" --ids {{id}} {{flags}}

# the whole catalogue on one reused cluster, then a summary table (`--repeat N`: pass rates; `--ids 1,20`)
conformance *flags="": _release-build
    target_dir="${CARGO_TARGET_DIR:-target}"; "$target_dir/release/bloodraven-harness" --reuse {{flags}}

# one operator running N groups (the playground and N-1 more, three MariaDB sites each): 020 killed in the playground, the others checked Valid throughout, the operator's CPU, memory, API requests and poll p50/p99 in the report, e.g. `just bench-fleet 30`
bench-fleet n *flags="": _release-build
    target_dir="${CARGO_TARGET_DIR:-target}"; "$target_dir/release/bloodraven-harness" --ids 20 --fleet {{n}} --run-id "fleet-{{n}}-$(date -u +%Y%m%dT%H%M%SZ)" {{flags}}

# is operator build B safe to roll out over A? `just upgrade --from main~3 [--to REF] [--smoke 20,22]` (B: the working tree), or by image on any cluster: `--from-image IMAGE --to-image IMAGE`
upgrade *flags="": _release-build
    target_dir="${CARGO_TARGET_DIR:-target}"; "$target_dir/release/bloodraven-upgrade" {{flags}}

# render the trends page from reports/trend.jsonl
report:
    cargo run -q -p bloodraven-harness --bin bloodraven-harness --release -- --trends

# start the live playground on localkube (builds what is missing; state in .localkube/)
up: _release-build
    target_dir="${CARGO_TARGET_DIR:-target}"; "$target_dir/release/bloodraven-playground" up

# stop the playground: every process, namespace, link and port-forward it made
down:
    target_dir="${CARGO_TARGET_DIR:-target}"; if [ -x "$target_dir/release/bloodraven-playground" ]; then "$target_dir/release/bloodraven-playground" down; else echo "nothing to stop (not built)"; fi

# the release binaries the live commands run; a cold build says what it builds and shows
# cargo's progress (BLOODRAVEN_QUIET=1: cargo -q)
[private]
_release-build:
    #!/usr/bin/env bash
    set -euo pipefail
    target_dir="${CARGO_TARGET_DIR:-target}"
    quiet=(); if [ -n "${BLOODRAVEN_QUIET:-}" ] && [ "${BLOODRAVEN_QUIET}" != 0 ]; then quiet=(-q); fi
    if [ ! -x "$target_dir/release/bloodraven-harness" ]; then
      echo "just: building the workspace's release binaries (operator, sidecar, counter, harness, localkube) into $target_dir/release; the first build takes 10-15 minutes on 2 cores" >&2
      cargo build "${quiet[@]}" --release --workspace --bins
    else
      cargo build -q --release --workspace --bins
    fi
