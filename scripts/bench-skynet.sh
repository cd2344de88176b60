#!/usr/bin/env bash
# bench-skynet.sh - skynet (1,000,000 leaves, 1,111,111 fibers) with DEFAULT
# settings: numafiber (benches/examples/skynet.rs: Runtime::builder().workers(W)),
# Go (benches/go/skynet, GOMAXPROCS=W) and may (default config, W
# workers), on 1 and 2 workers; numafiber_wf is numafiber with
# PolicyOptions::work_first (the one non-default setting, for comparison);
# numafiber_local spawns every child with fiber::Builder::local(true)
# (default policy; shows what NLH's choice of worker costs this tree).
#
#   scripts/bench-skynet.sh [ROUNDS] [LEAVES]     (defaults: 5, 1000000)
#
# Each round runs every variant once, in a fresh process, interleaved, so a
# noisy machine hits all of them alike. Per variant it reports the median
# over rounds of: wall time of the skynet run (as the program measures it),
# CPU time of the process (user + sys, from /usr/bin/time) and peak RSS
# (VmHWM, from the program itself), then numafiber/Go ratios. Go is
# installed if missing (scripts/peers-lib.sh) or skipped with a message. A
# variant that crashes (may: stack mmap ENOMEM at 1M) is reported FAILED
# with its first error line.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
LEAVES=${2:-1000000}
OUT=${OUT:-target/bench-skynet}
mkdir -p "$OUT"
. scripts/peers-lib.sh

cargo build --release -p numafiber-peers --example skynet >&2
BIN=${CARGO_TARGET_DIR:-target}/release/examples/skynet
GO=""
if need_go; then
    build_go_peer skynet "$OUT/skynet_go" && GO="$OUT/skynet_go"
fi

variants=("numafiber 1" "numafiber 2" "numafiber_wf 1" "numafiber_wf 2" "numafiber_local 1" "numafiber_local 2" "may 1" "may 2")
[ -n "$GO" ] && variants+=("go 1" "go 2")

# run VARIANT WORKERS -> appends "ms cpu_s hwm_kib" or "FAILED reason" to $OUT/<v>_<w>.txt
run() {
    local v=$1 w=$2 log="$OUT/run.log" res
    if [ "$v" = go ]; then
        res=$(GOMAXPROCS=$w /usr/bin/time -f "TIME %U %S" "$GO" "$LEAVES" 1 2>"$log" || true)
    else
        res=$(RUST_BACKTRACE=0 /usr/bin/time -f "TIME %U %S" "$BIN" "$v" "$w" "$LEAVES" 1 2>"$log" || true)
    fi
    local ms hwm cpu
    ms=$(sed -n 's/.* ms=\([0-9.]*\) .*/\1/p' <<<"$res" | head -1)
    hwm=$(sed -n 's/.*vmhwm_kib=\([0-9]*\).*/\1/p' <<<"$res" | head -1)
    cpu=$(awk '/^TIME/ {print $2 + $3}' "$log")
    if [ -n "$ms" ] && [ -n "$hwm" ]; then
        echo "$ms $cpu $hwm" >>"$OUT/${v}_$w.txt"
    else
        echo "FAILED $(grep -v "^TIME\|^$\|Command exited" "$log" | head -1 | cut -c1-160)" >>"$OUT/${v}_$w.txt"
    fi
}

rm -f "$OUT"/*_[12].txt
for r in $(seq 1 "$ROUNDS"); do
    for vw in "${variants[@]}"; do run $vw; done
    echo "round $r/$ROUNDS done" >&2
done


echo "skynet, $LEAVES leaves, default settings, median of $ROUNDS fresh processes ($(uname -r), $(nproc) CPUs)"
printf "%-15s %7s %10s %10s %12s  %s\n" variant workers wall_ms cpu_s peak_rss_MiB notes
declare -A WALL CPU HWM
for vw in "${variants[@]}"; do
    set -- $vw
    f="$OUT/${1}_$2.txt"
    ok=$(grep -vc '^FAILED' "$f" || true)
    if [ "$ok" = 0 ]; then
        printf "%-15s %7s %10s %10s %12s  %s\n" "$1" "$2" - - - "$(head -1 "$f")"
        continue
    fi
    WALL[$vw]=$(grep -v '^FAILED' "$f" | awk '{print $1}' | median)
    CPU[$vw]=$(grep -v '^FAILED' "$f" | awk '{print $2}' | median)
    HWM[$vw]=$(grep -v '^FAILED' "$f" | awk '{print $3 / 1024}' | median)
    fails=$(grep -c '^FAILED' "$f" || true)
    printf "%-15s %7s %10s %10s %12.1f  %s\n" "$1" "$2" "${WALL[$vw]}" "${CPU[$vw]}" "${HWM[$vw]}" \
        "$([ "$fails" != 0 ] && echo "$fails runs FAILED")"
done
if [ -n "$GO" ]; then
    for w in 1 2; do
      for v in numafiber numafiber_wf numafiber_local; do
        n="$v $w" g="go $w"
        if [ -n "${WALL[$n]:-}" ] && [ -n "${WALL[$g]:-}" ]; then
            awk -v a="${WALL[$n]}" -v b="${WALL[$g]}" -v c="${CPU[$n]}" -v d="${CPU[$g]}" -v e="${HWM[$n]}" -v f="${HWM[$g]}" -v w="$w" -v v="$v" \
                'BEGIN {printf "%s/Go, %d workers: wall %.2fx, cpu %.2fx, peak RSS %.2fx\n", v, w, a/b, c/d, e/f}'
        fi
      done
    done
fi
