#!/usr/bin/env bash
# bench-peers.sh - numafiber against Go and Boost.Fiber beside
# the criterion benches' own peers (raw corosensei, may, rayon).
#
#   scripts/bench-peers.sh            # one round, ~5 minutes
#   ROUNDS=3 scripts/bench-peers.sh   # three rounds, median ratio per row
#
# Builds the peer programs (benches/go/<name>/main.go,
# benches/boost/<name>.cpp) into target/peers/, installing golang-go
# and libboost-fiber-dev when missing or skipping that peer with a message
# (scripts/peers-lib.sh). Each round runs the criterion benches (switch,
# spawn_join, the ping_pong group of sync, fib30_no_cutoff of fib), then
# every peer program in the same shape, then the start-up probe
# (benches/examples/yield_count.rs startup / rayon_startup, fresh processes), and
# prints a table of per-operation times and ratios numafiber / peer from
# that round. Wall-clock figures move with the machine's load: compare
# ratios from one round, and repeat.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/peers-lib.sh

OUT=target/peers
mkdir -p "$OUT"
ROUNDS=${ROUNDS:-1}
REPS=${REPS:-7}
CRIT=(--warm-up-time 1 --measurement-time ${MEASURE_SECS:-3} --noplot)

have_go=0
if need_go; then
    for p in yield spawn_join ping_pong fib; do
        build_go_peer "$p" "$OUT/go_$p"
    done
    have_go=1
fi
have_boost=0
if need_boost_fiber; then
    for p in yield spawn_join ping_pong fib; do
        g++ -O2 -std=c++17 -o "$OUT/boost_$p" "benches/boost/$p.cpp" -lboost_fiber -lboost_context -pthread
    done
    have_boost=1
fi
cargo build --release -p numafiber-peers --example yield_count -q
cargo bench -p numafiber-peers --no-run -q --bench switch --bench spawn_join --bench sync --bench fib 2>/dev/null || \
    cargo bench -p numafiber-peers --no-run --bench switch --bench spawn_join --bench sync --bench fib

for round in $(seq 1 "$ROUNDS"); do
    R="$OUT/round$round.txt"
    : > "$R"
    echo "== round $round of $ROUNDS: criterion benches" >&2
    cargo bench -p numafiber-peers -q --bench switch -- "${CRIT[@]}" >&2
    cargo bench -p numafiber-peers -q --bench spawn_join -- "${CRIT[@]}" >&2
    cargo bench -p numafiber-peers -q --bench sync -- "^ping_pong/" "${CRIT[@]}" >&2
    cargo bench -p numafiber-peers -q --bench fib -- fib30_no_cutoff "${CRIT[@]}" >&2
    python3 - "$R" <<'PY'
import json, os, sys
base = os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "criterion")
rows = {
    "nf_yield_1w": ("yield_round_trip/numafiber_yield_now", 1),
    "raw_yield": ("yield_round_trip/corosensei_resume_suspend", 1),
    "may_yield_1w": ("yield_round_trip/may_yield_now", 1),
    "nf_spawn_join_1w": ("spawn_join/numafiber_1w", 1),
    "nf_spawn_join_2w": ("spawn_join/numafiber_2w", 1),
    "may_spawn_join_1w": ("spawn_join/may_1w", 1),
    "nf_cap0_1w": ("ping_pong/numafiber_cap0_1w", 1000),
    "nf_cap1_1w": ("ping_pong/numafiber_cap1_1w", 1000),
    "nf_cap0_2w": ("ping_pong/numafiber_cap0_2w", 1000),
    "nf_cap1_2w": ("ping_pong/numafiber_cap1_2w", 1000),
    "nf_fib30_2w": ("fib30_no_cutoff/numafiber", 1),
    "nf_fib30_1w": ("fib30_no_cutoff/numafiber_1w", 1),
    "rayon_fib30_2w": ("fib30_no_cutoff/rayon", 1),
}
with open(sys.argv[1], "a") as out:
    for key, (path, div) in rows.items():
        f = os.path.join(base, path, "new", "estimates.json")
        try:
            v = json.load(open(f))["median"]["point_estimate"] / div
        except (OSError, KeyError, ValueError):
            continue
        out.write(f"{key} {v:.1f}\n")
PY
    echo "== round $round: peers" >&2
    peer() { # key program args...
        local key=$1; shift
        local line
        if line=$("$@" 2>&1 | tail -1); then
            echo "$key $(echo "$line" | awk '{print $(NF-1)}')" >> "$R"
        else
            echo "peer $key failed: $line" >&2
        fi
    }
    if [ $have_go = 1 ]; then
        peer go_yield_1w "$OUT/go_yield" 1 2000000 "$REPS"
        for w in 1 2; do
            peer go_spawn_join_${w}w "$OUT/go_spawn_join" $w 300000 "$REPS"
            peer go_cap0_${w}w "$OUT/go_ping_pong" $w 0 200000 "$REPS"
            peer go_cap1_${w}w "$OUT/go_ping_pong" $w 1 200000 "$REPS"
        done
        peer go_fib30_2w "$OUT/go_fib" 2 30 3
    fi
    if [ $have_boost = 1 ]; then
        peer boost_yield_1w "$OUT/boost_yield" 1 2000000 "$REPS"
        for w in 1 2; do
            peer boost_spawn_join_${w}w "$OUT/boost_spawn_join" $w 300000 "$REPS"
            peer boost_cap0_${w}w "$OUT/boost_ping_pong" $w 0 200000 "$REPS"
            peer boost_cap1_${w}w "$OUT/boost_ping_pong" $w 1 200000 "$REPS"
        done
        peer boost_fib30_2w "$OUT/boost_fib" 2 30 1
    fi
    # Start-up + shutdown in a fresh process (hwloc discovery included):
    # median of 11 processes each.
    for m in startup rayon_startup; do
        vals=()
        for _ in $(seq 11); do
            vals+=("$(${CARGO_TARGET_DIR:-target}/release/examples/yield_count $m 1 | awk '{print $(NF-7)}')")
        done
        med=$(printf '%s\n' "${vals[@]}" | sort -g | sed -n 6p)
        # microseconds -> ns like every other row
        echo "${m/startup/nf_startup} $(python3 -c "print(float('$med')*1000)")" | sed 's/rayon_nf_startup/rayon_startup/' >> "$R"
    done
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
data = []
for r in range(1, rounds + 1):
    d = {}
    for line in open(f"{out}/round{r}.txt"):
        k, v = line.split()
        d[k] = float(v)
    data.append(d)

def med(key):
    vals = [d[key] for d in data if key in d]
    return statistics.median(vals) if vals else None

def ratio(a, b):
    vals = [d[a] / d[b] for d in data if a in d and b in d and d[b] > 0]
    return statistics.median(vals) if vals else None

def fmt(v, unit):
    if v is None:
        return "-"
    return f"{v / 1e6:.2f} ms" if unit == "ms" else f"{v:,.1f}"

rows = [
    ("yield, 1 worker (ns)", "nf_yield_1w", "go_yield_1w", "boost_yield_1w", [("raw corosensei", "raw_yield"), ("may", "may_yield_1w")], "ns"),
    ("spawn + join, 1 worker (ns)", "nf_spawn_join_1w", "go_spawn_join_1w", "boost_spawn_join_1w", [("may", "may_spawn_join_1w")], "ns"),
    ("spawn + join, 2 workers (ns)", "nf_spawn_join_2w", "go_spawn_join_2w", "boost_spawn_join_2w", [], "ns"),
    ("ping-pong rendezvous, 1 worker (ns/round trip)", "nf_cap0_1w", "go_cap0_1w", "boost_cap0_1w", [], "ns"),
    ("ping-pong capacity 1, 1 worker", "nf_cap1_1w", "go_cap1_1w", "boost_cap1_1w", [], "ns"),
    ("ping-pong rendezvous, 2 workers", "nf_cap0_2w", "go_cap0_2w", "boost_cap0_2w", [], "ns"),
    ("ping-pong capacity 1, 2 workers", "nf_cap1_2w", "go_cap1_2w", "boost_cap1_2w", [], "ns"),
    ("fib(30) no cutoff, 2 workers", "nf_fib30_2w", "go_fib30_2w", "boost_fib30_2w", [("rayon", "rayon_fib30_2w"), ("numafiber 1 worker", "nf_fib30_1w")], "ms"),
    ("start-up + shutdown, fresh process", "nf_startup", None, None, [("rayon", "rayon_startup")], "ms"),
]
print(f"\n{rounds} round(s); times are medians over rounds, ratios are medians of per-round ratios (numafiber / peer)\n")
print("| per op | numafiber | Go | Boost.Fiber | others | nf/Go | nf/Boost | nf/others |")
print("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- |")
for name, nf, go, bo, others, unit in rows:
    o = "; ".join(f"{n} {fmt(med(k), unit)}" for n, k in others if med(k) is not None) or "-"
    orat = "; ".join(f"{n} {ratio(nf, k):.2f}x" for n, k in others if ratio(nf, k) is not None) or "-"
    rg = ratio(nf, go) if go else None
    rb = ratio(nf, bo) if bo else None
    print(f"| {name} | {fmt(med(nf), unit)} | {fmt(med(go), unit) if go else '-'} | {fmt(med(bo), unit) if bo else '-'} | {o} | "
          f"{f'{rg:.2f}x' if rg else '-'} | {f'{rb:.2f}x' if rb else '-'} | {orat} |")
PY
