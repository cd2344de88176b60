#!/usr/bin/env bash
# callgrind-table.sh - the per-operation instruction and locked-instruction
# table of the speed round in one command: numafiber (benches/examples/yield_count.rs, one
# worker), raw corosensei, rayon::join, Go and Boost.Fiber (one worker /
# GOMAXPROCS=1), each through scripts/callgrind-ops.sh (two runs differing
# only in the op count, so start-up and shutdown cancel out). These counts do
# not move with the machine's load, unlike the wall-clock times of
# scripts/bench-peers.sh.
#
#   scripts/callgrind-table.sh            # about 1.5 minutes
#
# Go runs with GODEBUG=asyncpreemptoff=1 (callgrind crashes on Go's
# preemption signals otherwise). A peer that cannot be installed is skipped
# with a message (scripts/peers-lib.sh). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/peers-lib.sh
command -v valgrind >/dev/null || { echo "callgrind-table: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }

OUT=target/peers
mkdir -p "$OUT"
cargo build --release -p numafiber-peers --example yield_count -q
Y=${CARGO_TARGET_DIR:-target}/release/examples/yield_count
have_go=0
if need_go; then
    for p in yield spawn_join ping_pong; do
        build_go_peer "$p" "$OUT/go_$p"
    done
    have_go=1
fi
have_boost=0
if need_boost_fiber; then
    for p in yield spawn_join ping_pong; do
        g++ -O2 -std=c++17 -o "$OUT/boost_$p" "benches/boost/$p.cpp" -lboost_fiber -lboost_context -pthread
    done
    have_boost=1
fi

ops() { scripts/callgrind-ops.sh "$@" | awk '{print $1 " / " $3}'; }
# fib(N) performs F(N+1) - 1 joins: fib(24) - fib(20) is F(25) - F(21) =
# 64,079 joins; callgrind-ops.sh divides by 24 - 20 = 4.
joins() { scripts/callgrind-ops.sh 20 24 "$@" | awk '{gsub(",","",$1); gsub(",","",$3); printf "%.1f / %.2f\n", $1*4/64079, $3*4/64079}'; }
on_go() { if [ $have_go = 1 ]; then GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 ops "$@"; else echo "-"; fi; }
on_boost() { if [ $have_boost = 1 ]; then ops "$@"; else echo "-"; fi; }

N1=20000 N2=40000
echo "| per op (Ir / locked) | numafiber | Go | Boost.Fiber | other |"
echo "| --- | ---: | ---: | ---: | --- |"
echo "| yield | $(ops $N1 $N2 $Y numafiber {N}) | $(on_go $N1 $N2 $OUT/go_yield 1 {N} 1) | $(on_boost $N1 $N2 $OUT/boost_yield 1 {N} 1) | raw corosensei $(ops $N1 $N2 $Y raw {N}) |"
echo "| spawn + join | $(ops $N1 $N2 $Y spawn {N}) | $(on_go $N1 $N2 $OUT/go_spawn_join 1 {N} 1) | $(on_boost $N1 $N2 $OUT/boost_spawn_join 1 {N} 1) | |"
echo "| rendezvous round trip | $(ops $N1 $N2 $Y rendezvous {N}) | $(on_go $N1 $N2 $OUT/go_ping_pong 1 0 {N} 1) | $(on_boost $N1 $N2 $OUT/boost_ping_pong 1 0 {N} 1) | |"
echo "| capacity-1 round trip | $(ops $N1 $N2 $Y cap1 {N}) | $(on_go $N1 $N2 $OUT/go_ping_pong 1 1 {N} 1) | $(on_boost $N1 $N2 $OUT/boost_ping_pong 1 1 {N} 1) | |"
echo "| fiber::join (fib) | $(joins $Y join {N}) | | | rayon::join $(joins $Y rayon_join {N}) |"
