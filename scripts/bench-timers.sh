#!/usr/bin/env bash
# bench-timers.sh - many sleepers: N fibers / tokio tasks / may coroutines /
# goroutines, each sleeping a fixed period in a loop, so that timers wake a
# batch of them every tick (peers/examples/timer_storm.rs, peers/go/timers).
# Reports wakes per second and the process CPU time per wake (user + sys,
# getrusage over a window after a warm-up), on WORKERS workers
# (GOMAXPROCS for Go), median over rounds, each round running every
# variant once in a fresh process, interleaved.
#
#   scripts/bench-timers.sh [ROUNDS]        (default 3)
#   WORKERS=2 CONFIGS="10000x50 10000x10 100000x500" SECS=3 scripts/bench-timers.sh
#
# CONFIGS: FIBERSxPERIOD_MS pairs. Go is installed if missing
# (scripts/peers-lib.sh) or skipped with a message; a variant that fails
# (may cannot allocate 100,000 stacks) is reported FAILED.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
WORKERS=${WORKERS:-2}
CONFIGS=${CONFIGS:-"10000x50 10000x10 100000x500"}
SECS=${SECS:-3}
OUT=${OUT:-target/bench-timers}
mkdir -p "$OUT"
. scripts/peers-lib.sh

cargo build --release -q -p numafiber-peers --example timer_storm >&2
BIN=${CARGO_TARGET_DIR:-target}/release/examples/timer_storm
variants=(numafiber tokio may)
if need_go; then
    (cd peers/go/timers && GO111MODULE=off GOFLAGS= go build -o "../../../$OUT/timers_go" main.go) && variants+=(go)
fi

# run VARIANT FIBERS PERIOD -> appends "wakes_per_s cpu_ns_per_wake" or "FAILED reason"
run() {
    local v=$1 n=$2 p=$3 res f="$OUT/${1}_${2}x${3}.txt"
    if [ "$v" = go ]; then
        res=$(GOMAXPROCS=$WORKERS timeout 120 "$OUT/timers_go" "$n" "$p" "$SECS" 2>"$OUT/run.log" || true)
    else
        res=$(RUST_BACKTRACE=0 timeout 120 "$BIN" "$v" "$WORKERS" "$n" "$p" "$SECS" 2>"$OUT/run.log" || true)
    fi
    if [[ "$res" == *wakes_per_s=* ]]; then
        sed -E 's/.*wakes_per_s=([0-9]+) user_ns_per_wake=([0-9]+) sys_ns_per_wake=([0-9]+).*/\1 \2 \3/' <<<"$res" |
            awk '{ print $1, $2 + $3 }' >>"$f"
    else
        echo "FAILED $(grep -v '^$' "$OUT/run.log" | grep -v 'stall:' | head -1 | cut -c1-120)" >>"$f"
    fi
}

rm -f "$OUT"/*x*.txt
echo "bench-timers: workers $WORKERS, $ROUNDS rounds x ${SECS}s, configs [$CONFIGS]; load at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$ROUNDS"); do
    for c in $CONFIGS; do
        for v in "${variants[@]}"; do run "$v" "${c%x*}" "${c#*x}"; done
    done
    echo "round $r/$ROUNDS done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
echo "timers: N sleepers x period, $WORKERS workers, median of $ROUNDS fresh processes; CPU = user + sys per wake; ratio = numafiber CPU per wake / the variant's"
printf "%-10s %-12s %12s %14s %8s\n" config variant wakes_per_s cpu_ns_per_wake ratio
for c in $CONFIGS; do
    base=$(grep -v '^FAILED' "$OUT/numafiber_$c.txt" 2>/dev/null | awk '{print $2}' | median || echo -)
    for v in "${variants[@]}"; do
        f="$OUT/${v}_$c.txt"
        if ! grep -qv '^FAILED' "$f"; then
            printf "%-10s %-12s %12s %14s %8s  %s\n" "$c" "$v" - - - "$(head -1 "$f")"
            continue
        fi
        w=$(grep -v '^FAILED' "$f" | awk '{print $1}' | median)
        n=$(grep -v '^FAILED' "$f" | awk '{print $2}' | median)
        ratio=$(awk -v a="$base" -v b="$n" 'BEGIN { if (a == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
        printf "%-10s %-12s %12s %14s %8s\n" "$c" "$v" "$w" "$n" "$ratio"
    done
done
