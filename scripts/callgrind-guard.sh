#!/usr/bin/env bash
# callgrind-guard.sh - instruction-count guard: the per-operation counts of
# peers/examples/yield_count.rs (one worker), through
# scripts/callgrind-ops.sh, against the bounds in
# scripts/callgrind-bounds.txt. Instruction counts do not move with the
# machine's load, so a bound holds on a busy CI machine where a timed test
# could not; a change that adds instructions to a guarded path fails here
# and has to raise the bound on purpose (with its measurement in
# BENCHMARKS.md).
#
#   scripts/callgrind-guard.sh          # every operation in the bounds file
#   scripts/callgrind-guard.sh rendezvous
#
# Bounds file: one "<yield_count mode> <max Ir per op>" a line; '#' starts
# a comment. Exit status 1 when an operation is over its bound.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "callgrind-guard: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
cargo build --release -p numafiber-peers --example yield_count -q
Y=${CARGO_TARGET_DIR:-target}/release/examples/yield_count
fail=0
while read -r mode bound _; do
    case $mode in ''|'#'*) continue;; esac
    if [ $# -gt 0 ] && [[ " $* " != *" $mode "* ]]; then continue; fi
    ir=$(scripts/callgrind-ops.sh 20000 40000 "$Y" "$mode" {N} | awk '{gsub(",", "", $1); print $1}')
    if awk -v a="$ir" -v b="$bound" 'BEGIN { exit !(a > b) }'; then
        echo "callgrind-guard: $mode: $ir Ir per op, over its bound $bound" >&2
        fail=1
    else
        echo "callgrind-guard: $mode: $ir Ir per op (bound $bound)"
    fi
done < scripts/callgrind-bounds.txt
exit $fail
