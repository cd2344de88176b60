#!/usr/bin/env bash
# numa-vm-test.sh - run the NUMA tests (tests/numa_vm.rs) inside a 4-node
# QEMU guest (scripts/numa-vm.sh).
#
#   scripts/numa-vm-test.sh [--nodes N] [TEST-HARNESS ARGS...]
#
# Builds the numa_vm integration test in release mode and runs it in a guest
# of N nodes (default 4; one CPU each; distances 10 local, 20 neighbour, 30
# otherwise) with NUMAFIBER_NUMA_VM=N and --include-ignored (the tests are
# ignored in a plain `cargo test`, where they cannot check anything). In the
# guest they fail unless detection sees the N nodes, hwloc's distance matrix
# equals the kernel's and the 10/20/30 pattern, and every pinned thread runs
# on its PU. Extra arguments go to the test harness (default:
# --test-threads=1); with none, every test of the file must have passed.
#
# The first run installs QEMU and busybox and fetches Debian's kernel
# (scripts/numa-vm.sh says what it needs when it cannot install).
# Exit status: 0 only when the tests ran in the guest and passed; the tests'
# status when they failed; 124 when the guest timed out; 125 when the guest
# could not run (the tests did NOT run: the message says why).
set -euo pipefail
cd "$(dirname "$0")/.."

NODES=4
if [ "${1:-}" = --nodes ]; then NODES=${2:-}; shift 2; fi
CHECK_COUNT=1
if [ $# -eq 0 ]; then set -- --test-threads=1; else CHECK_COUNT=0; fi

not_run() { echo "numa-vm-test: the NUMA tests were NOT RUN: $*" >&2; exit 125; }

t0=$(date +%s)
echo "numa-vm-test: building the numa_vm test (release) ..." >&2
# One JSON message per line; the executable is on the compiler-artifact line
# of the target named numa_vm (no jq needed).
json=$(cargo test --release --test numa_vm --no-run --message-format=json) ||
    not_run "cargo could not build tests/numa_vm.rs"
bin=$(grep '"reason":"compiler-artifact"' <<<"$json" | grep '"name":"numa_vm"' |
      sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
[ -n "$bin" ] && [ -x "$bin" ] || not_run "cannot find the numa_vm test executable in cargo's output"
want=$("$bin" --list --include-ignored | grep -c ': test$' || true)
[ "$want" -gt 0 ] || not_run "$bin lists no tests"
t1=$(date +%s)
echo "numa-vm-test: built in $((t1 - t0)) s; running its $want tests in a $NODES-node guest ..." >&2

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# A guest that times out before the test harness printed anything never
# started the tests (seen once in CI: a boot that stalled for 600 s, where
# runs take 4-10 s): boot once more. A guest whose tests started and then
# hung is a failure, never retried.
for attempt in 1 2; do
    set +e
    scripts/numa-vm.sh --nodes "$NODES" --timeout 300 --env "NUMAFIBER_NUMA_VM=$NODES" "$bin" --include-ignored "$@" | tee "$out"
    rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" = 124 ] && [ ! -s "$out" ] && [ $attempt = 1 ]; then
        echo "numa-vm-test: the guest timed out before the tests started (a stalled boot): booting once more" >&2
        continue
    fi
    break
done
t2=$(date +%s)
echo "numa-vm-test: guest run $((t2 - t1)) s, total $((t2 - t0)) s" >&2
case $rc in
    0) ;;
    124) echo "numa-vm-test: FAILED: the guest timed out (the tests did not finish)" >&2; exit 124 ;;
    125) not_run "the guest could not run (see the numa-vm lines above)" ;;
    *) echo "numa-vm-test: FAILED: the NUMA tests failed in the guest (exit status $rc)" >&2; exit "$rc" ;;
esac
if [ $CHECK_COUNT = 1 ]; then
    line=$(grep '^test result:' "$out" | tail -n 1)
    if ! grep -q "^test result: ok\. $want passed; 0 failed; 0 ignored" <<<"$line"; then
        echo "numa-vm-test: FAILED: expected all $want tests to pass in the guest, the harness said: ${line:-nothing}" >&2
        exit 1
    fi
fi
echo "numa-vm-test: ok: the NUMA tests passed in a $NODES-node guest" >&2
