#!/usr/bin/env bash
# spawn-join-wall.sh - a short wall-clock run of just spawn + join on 1 and
# 2 workers, numafiber (benches/examples/yield_count.rs `spawn` / `spawn2`,
# Policy::RandomSteal) against Go and Boost.Fiber in the same rounds
#. Much lighter than scripts/bench-peers.sh: about 30 s.
#
#   scripts/spawn-join-wall.sh [ROUNDS] [BASE_YIELD_COUNT_BINARY]
#
# numafiber's ns per op is the wall-time difference of 200k and 600k ops
# (one process each, so start-up and shutdown cancel out); Go and Boost
# print the median of 3 runs of 200k. Prints one line per round and worker
# count, then the medians and the medians of the per-round ratios. A second
# argument adds another yield_count build (e.g. main's) to every round.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/peers-lib.sh
ROUNDS=${1:-5}
BASE=${2:-}
case "$ROUNDS" in ''|*[!0-9]*) echo "ROUNDS must be a positive integer" >&2; exit 2;; esac
OUT=target/peers
mkdir -p "$OUT"
cargo build --release -p numafiber-peers --example yield_count -q
Y=${CARGO_TARGET_DIR:-target}/release/examples/yield_count
have_go=0; have_boost=0
if need_go; then build_go_peer spawn_join "$OUT/go_spawn_join"; have_go=1; fi
if need_boost_fiber; then g++ -O2 -std=c++17 -o "$OUT/boost_spawn_join" benches/boost/spawn_join.cpp -lboost_fiber -lboost_context -pthread; have_boost=1; fi
t() { local s e; s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N); echo $((e - s)); }
per() { local a b; a=$(t "$@" 200000); b=$(t "$@" 600000); awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (b - a) / 400000 }'; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in $(seq "$ROUNDS"); do
    for w in 1 2; do
        m=spawn; [ $w = 2 ] && m=spawn2
        line="round $r ${w}w numafiber $(per $Y $m)"
        [ -n "$BASE" ] && line="$line base $(per "$BASE" $m)"
        [ $have_go = 1 ] && line="$line go $("$OUT/go_spawn_join" $w 200000 3 | awk '{print $4}')"
        [ $have_boost = 1 ] && line="$line boost $("$OUT/boost_spawn_join" $w 200000 3 | awk '{print $4}')"
        line="$line load $(cut -d' ' -f1 /proc/loadavg)"
        echo "$line" | tee -a "$log"
    done
done
python3 - "$log" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
for w in ("1w", "2w"):
    R = [r for r in rows if r[2] == w]
    col = lambda k: [float(r[r.index(k) + 1]) for r in R] if k in R[0] else None
    nf = col("numafiber")
    out = [f"{w}: numafiber {st.median(nf):.0f} ns"]
    for k in ("base", "go", "boost"):
        c = col(k)
        if c:
            out.append(f"{k} {st.median(c):.0f} ns (numafiber/{k} {st.median([a / b for a, b in zip(nf, c)]):.2f}x)")
    print(", ".join(out))
PY
