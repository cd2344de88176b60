#!/usr/bin/env bash
# numa-vm-test.sh - run tests/numa_vm.rs inside a 4-node NUMA QEMU VM.
#
#   scripts/numa-vm-test.sh [--nodes N] [TEST-HARNESS ARGS...]
#
# Builds the `numa_vm` integration test in release mode, boots it with
# /work/shared/numa-vm/numa-vm.sh --nodes N (default 4; 1 CPU per node,
# SLIT 10 local / 20 neighbour / 30 otherwise) and sets NUMAFIBER_NUMA_VM=N in
# the guest, which puts the tests in in-VM mode: they FAIL unless detection
# sees N nodes whose distance matrix equals the kernel's and numa-vm's
# pattern, and every pinned thread runs on its PU. Extra arguments go to the
# test harness (default: --test-threads=1 --nocapture).
# Exit status: the tests' (124 = VM timeout, 125 = VM could not run).
# Override the VM script with NUMA_VM=/path/to/numa-vm.sh.
set -euo pipefail

cd "$(dirname "$0")/.."
NUMA_VM=${NUMA_VM:-$(pwd)/../shared/numa-vm/numa-vm.sh}
NODES=4
if [ "${1:-}" = --nodes ]; then NODES=$2; shift 2; fi
[ $# -gt 0 ] || set -- --test-threads=1 --nocapture
[ -x "$NUMA_VM" ] || { echo "numa-vm-test: $NUMA_VM not found (set NUMA_VM=)" >&2; exit 125; }

t0=$(date +%s)
echo "numa-vm-test: building the numa_vm test (release) ..." >&2
# One JSON message per line; the test executable is in the compiler-artifact
# line of target "numa_vm" (no jq needed).
bin=$(cargo test --release --test numa_vm --no-run --message-format=json \
      | grep '"reason":"compiler-artifact"' | grep '"name":"numa_vm"' \
      | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
[ -n "$bin" ] && [ -x "$bin" ] || { echo "numa-vm-test: could not find the numa_vm test executable" >&2; exit 125; }
t1=$(date +%s)
echo "numa-vm-test: built $bin in $((t1 - t0)) s; booting a $NODES-node VM ..." >&2

set +e
"$NUMA_VM" --nodes "$NODES" --env "NUMAFIBER_NUMA_VM=$NODES" "$bin" "$@"
rc=$?
set -e
t2=$(date +%s)
echo "numa-vm-test: VM run took $((t2 - t1)) s, total $((t2 - t0)) s; exit status $rc" >&2
exit $rc
