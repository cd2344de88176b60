#!/usr/bin/env bash
# memcheck.sh - run a small stress program under valgrind's memcheck and fail
# on any memory error. Fiber stacks are registered with valgrind (corosensei
# does it for guarded stacks, numafiber for slab stacks), so stack switches
# are not reported.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { ${SUDO:-} apt-get install -y -qq valgrind >/dev/null; }
cargo build --release --example memcheck_stress
valgrind --tool=memcheck --error-exitcode=99 ${CARGO_TARGET_DIR:-target}/release/examples/memcheck_stress 2>&1 | tail -n 4
