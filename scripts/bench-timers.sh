#!/usr/bin/env bash
# bench-timers.sh - fibers woken in batches (benches/examples/wake_storm.rs,
# benches/go/timers): N fibers / tokio tasks / may coroutines / goroutines
# each sleeping a fixed period in a loop, so that timers wake a batch of
# them every tick ("sleep" configs: FIBERSxPERIOD_MS), and N fibers meeting
# at one barrier in a loop, the last arrival waking the other N - 1
# ("barrier" configs: FIBERS; no Go peer: Go has no barrier). Reports wakes
# per second and the process CPU time per wake (user + sys, getrusage over
# a window after a warm-up), on WORKERS workers (GOMAXPROCS for Go), median
# over rounds, each round running every variant once in a fresh process,
# interleaved. numafiber_slack1ms is numafiber with Builder::timer_slack of
# 1 ms (sleep configs only).
#
#   scripts/bench-timers.sh [ROUNDS]        (default 3)
#   WORKERS=2 CONFIGS="10000x50 10000x10" BARRIERS="10000" SECS=3 scripts/bench-timers.sh
#
# Go is installed if missing (scripts/peers-lib.sh) or skipped with a
# message; a variant that fails (may cannot allocate 100,000 stacks) is
# reported FAILED.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
WORKERS=${WORKERS:-2}
CONFIGS=${CONFIGS:-"10000x50 10000x10 100000x500"}
BARRIERS=${BARRIERS:-"1000 10000"}
SECS=${SECS:-3}
OUT=${OUT:-target/bench-timers}
mkdir -p "$OUT"
. scripts/peers-lib.sh

cargo build --release -q -p numafiber-peers --example wake_storm >&2
BIN=${CARGO_TARGET_DIR:-target}/release/examples/wake_storm
variants=(numafiber numafiber_slack1ms tokio may)
if need_go; then
    build_go_peer timers "$OUT/timers_go" && variants+=(go)
fi

# run KIND VARIANT FIBERS PERIOD CONFIG -> appends "wakes_per_s cpu_ns_per_wake" or "FAILED reason"
run() {
    local k=$1 v=$2 n=$3 p=$4 res f="$OUT/${2}_$5.txt"
    if [ "$v" = go ]; then
        res=$(GOMAXPROCS=$WORKERS timeout 120 "$OUT/timers_go" "$n" "$p" "$SECS" 2>"$OUT/run.log" || true)
    else
        res=$(RUST_BACKTRACE=0 timeout 120 "$BIN" "$k" "$v" "$WORKERS" "$n" "$p" "$SECS" 2>"$OUT/run.log" || true)
    fi
    if [[ "$res" == *wakes_per_s=* ]]; then
        sed -E 's/.*wakes_per_s=([0-9]+) user_ns_per_wake=([0-9]+) sys_ns_per_wake=([0-9]+).*/\1 \2 \3/' <<<"$res" |
            awk '{ print $1, $2 + $3 }' >>"$f"
    else
        echo "FAILED $(grep -v '^$' "$OUT/run.log" | grep -v 'stall:' | head -1 | cut -c1-120)" >>"$f"
    fi
}

rm -f "$OUT"/*_*.txt
echo "bench-timers: workers $WORKERS, $ROUNDS rounds x ${SECS}s, sleep [$CONFIGS], barrier [$BARRIERS]; load at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$ROUNDS"); do
    for c in $CONFIGS; do
        for v in "${variants[@]}"; do run sleep "$v" "${c%x*}" "${c#*x}" "$c"; done
    done
    for c in $BARRIERS; do
        for v in "${variants[@]}"; do [ "$v" = go ] || [ "$v" = numafiber_slack1ms ] || run barrier "$v" "$c" 1 "barrier$c"; done
    done
    echo "round $r/$ROUNDS done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

echo "timers: N sleepers x period (FIBERSxMS), barrierN: N fibers at one barrier; $WORKERS workers, median of $ROUNDS fresh processes; CPU = user + sys per wake; ratio = numafiber CPU per wake / the variant's"
printf "%-12s %-18s %12s %14s %8s\n" config variant wakes_per_s cpu_ns_per_wake ratio
for c in $CONFIGS $(for b in $BARRIERS; do echo "barrier$b"; done); do
    base=$(grep -v '^FAILED' "$OUT/numafiber_$c.txt" 2>/dev/null | awk '{print $2}' | median || echo -)
    for v in "${variants[@]}"; do
        f="$OUT/${v}_$c.txt"
        [ -e "$f" ] || continue
        if ! grep -qv '^FAILED' "$f"; then
            printf "%-12s %-18s %12s %14s %8s  %s\n" "$c" "$v" - - - "$(head -1 "$f")"
            continue
        fi
        w=$(grep -v '^FAILED' "$f" | awk '{print $1}' | median)
        n=$(grep -v '^FAILED' "$f" | awk '{print $2}' | median)
        ratio=$(awk -v a="$base" -v b="$n" 'BEGIN { if (a == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
        printf "%-12s %-18s %12s %14s %8s\n" "$c" "$v" "$w" "$n" "$ratio"
    done
done
