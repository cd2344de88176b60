#!/usr/bin/env bash
# bench-startup.sh - start-up + shutdown of a default runtime against rayon
# (BENCHMARKS.md "Start-up, part 5"), all in one short run:
#
#   scripts/bench-startup.sh [ROUNDS] [BASE_YIELD_COUNT_BINARY]
#
# 1. Repeated in one process: ROUNDS interleaved processes of
#    `yield_count startup 300` and `yield_count rayon_startup 300` (µs per
#    build + block_on/install + shutdown/drop), medians and their ratio.
# 2. The same at SCHED_FIFO priority 1 (`chrt -f 1`, if allowed): other
#    processes' builds cannot preempt the benchmark's threads, so the
#    figures hardly move with the machine's load (a different scheduling
#    regime: compare builds with each other there, not with the default run).
# 3. Fresh processes: ROUNDS interleaved `startup 1` / `rayon_startup 1`,
#    with Debian's hwloc plugins and with them blacklisted
#    (HWLOC_PLUGINS_BLACKLIST), plus `hwloc_split 1` (hwloc's init and load
#    apart).
# A second argument (another yield_count build, e.g. main's copied to /tmp)
# joins every round of 1-3 as "base". ROUNDS defaults to 7 (21 for the fresh
# processes: 3 x ROUNDS).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-7}
BASE=${2:-}
case "$ROUNDS" in ''|*[!0-9]*) echo "ROUNDS must be a positive integer" >&2; exit 2;; esac
if [ -n "$BASE" ] && [ ! -x "$BASE" ]; then echo "$BASE is not an executable yield_count build" >&2; exit 2; fi
cargo build --release -p numafiber-peers --example yield_count >/dev/null 2>&1 || cargo build --release -p numafiber-peers --example yield_count
NEW=${CARGO_TARGET_DIR:-target}/release/examples/yield_count
BL=hwloc_gl,hwloc_opencl,hwloc_pci,hwloc_xml_libxml

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# us per op from a `startup N` / `rayon_startup N` line (third field)
us() { "$@" | awk '{print $3}'; }

repeated() { # $1: label, rest: command prefix (empty or chrt -f 1)
    local label=$1; shift
    local n="" r="" b=""
    for _ in $(seq "$ROUNDS"); do
        [ -n "$BASE" ] && b+="$(us "$@" "$BASE" startup 300) "
        n+="$(us "$@" "$NEW" startup 300) "
        r+="$(us "$@" "$NEW" rayon_startup 300) "
    done
    local mr mn; mr=$(echo "$r" | median); mn=$(echo "$n" | median)
    echo "$label: rayon $r-> median $mr us"
    echo "$label: numafiber $n-> median $mn us, $(ratio "$mn" "$mr")x rayon"
    if [ -n "$BASE" ]; then
        local mb; mb=$(echo "$b" | median)
        echo "$label: base $b-> median $mb us, $(ratio "$mb" "$mr")x rayon"
    fi
}

echo "== repeated, 300 runtimes per process ($(uptime | sed 's/.*load/load/'))"
repeated "default scheduling"
if chrt -f 1 true 2>/dev/null; then
    repeated "SCHED_FIFO 1" chrt -f 1
else
    echo "SCHED_FIFO 1: skipped (chrt -f 1 not permitted)"
fi

echo "== fresh processes ($(uptime | sed 's/.*load/load/'))"
for env in default blacklisted; do
    n="" r="" b="" init="" load=""
    for _ in $(seq $((3 * ROUNDS))); do
        if [ $env = blacklisted ]; then export HWLOC_PLUGINS_BLACKLIST=$BL; else unset HWLOC_PLUGINS_BLACKLIST; fi
        [ -n "$BASE" ] && b+="$(us "$BASE" startup 1) "
        n+="$(us "$NEW" startup 1) "
        r+="$(us "$NEW" rayon_startup 1) "
        line=$("$NEW" hwloc_split 1)
        init+="$(echo "$line" | awk '{print $3}') "
        load+="$(echo "$line" | awk '{print $6}') "
    done
    unset HWLOC_PLUGINS_BLACKLIST
    mr=$(echo "$r" | median); mn=$(echo "$n" | median)
    echo "$env: rayon median $mr us; numafiber median $mn us, $(ratio "$mn" "$mr")x rayon; hwloc init $(echo "$init" | median) us, load $(echo "$load" | median) us"
    if [ -n "$BASE" ]; then mb=$(echo "$b" | median); echo "$env: base median $mb us, $(ratio "$mb" "$mr")x rayon"; fi
done
