#!/bin/sh
# Run the loom models of tests/loom.rs.
# Separate target dir so the normal build is not invalidated.
# Extra arguments go to the test harness (e.g. a model name filter).
# LOOM_MAX_PREEMPTIONS overrides the per-model preemption bounds.
set -e
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/loom}" \
    cargo test --release --test loom -- --nocapture --test-threads 1 "$@"
