#!/usr/bin/env bash
# bench-echo.sh - TCP echo, 64-byte messages, at 100 and 1,000 connections:
# numafiber (examples/echo_server) against may::net, tokio, Go and a
# std::thread-per-connection server (benches/examples/echo_peers.rs,
# benches/go/echo). The same numafiber echo_client drives every
# server; it prints requests/s and p50/p99. Then the memory of 10,000 idle
# connections on the numafiber server (VmRSS before/after).
#
#   scripts/bench-echo.sh            # full run
#   MSGS100=500 MSGS1000=100 WORKERS=1 CLIENT_WORKERS=1 IDLE=10000 scripts/bench-echo.sh
#
# Loopback (127.0.0.1) only; every server is killed at the end (trap).
set -u
cd "$(dirname "$0")/.."
. scripts/peers-lib.sh

MSGS100=${MSGS100:-500}      # messages per connection at 100 connections
MSGS1000=${MSGS1000:-100}    # messages per connection at 1,000 connections
WORKERS=${WORKERS:-1}        # server worker threads (numafiber, may, tokio, GOMAXPROCS)
CLIENT_WORKERS=${CLIENT_WORKERS:-1}
IDLE=${IDLE:-10000}
SIZE=64
OUT=target/bench-echo
mkdir -p "$OUT"

cargo build --release --example echo_server --example echo_client -q || exit 1
cargo build --release -p numafiber-peers --example echo_peers -q || exit 1
BIN=${CARGO_TARGET_DIR:-target}/release/examples
GO=""
if need_go; then
    build_go_peer echo "$OUT/go_echo" && GO="$OUT/go_echo"
fi

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

# start NAME PORT CMD... : start a server, wait (bounded) until it listens.
start() {
    local name=$1 port=$2; shift 2
    rm -f "$OUT/$name.log"
    "$@" > "$OUT/$name.log" 2>&1 &
    SERVER=$!
    PIDS+=("$SERVER")
    for _ in $(seq 1 100); do
        if grep -q listening "$OUT/$name.log" 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "bench-echo: $name did not start: $(cat "$OUT/$name.log")" >&2
    return 1
}

declare -A RPS P99
port=7400
run_server() {
    local name=$1; shift
    for conns in 100 1000; do
        port=$((port + 1))
        local msgs=$MSGS100; [ "$conns" = 1000 ] && msgs=$MSGS1000
        local cmd=("$@")
        cmd=("${cmd[@]//PORT/$port}")
        start "$name-$conns" "$port" "${cmd[@]}" || continue
        local line
        line=$(timeout 300 "$BIN/echo_client" "127.0.0.1:$port" "$conns" "$msgs" "$SIZE" "$CLIENT_WORKERS")
        echo "$name @ $conns: $line"
        RPS[$name,$conns]=$(sed -E 's/.*: ([0-9]+) requests\/s.*/\1/' <<<"$line")
        P99[$name,$conns]=$(sed -E 's/.*p99 ([^ ]+) .*/\1/' <<<"$line")
        kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null
    done
}

run_server numafiber "$BIN/echo_server" 127.0.0.1:PORT "$WORKERS"
run_server may "$BIN/echo_peers" may 127.0.0.1:PORT "$WORKERS"
run_server tokio "$BIN/echo_peers" tokio 127.0.0.1:PORT "$WORKERS"
if [ -n "$GO" ]; then run_server go env GOMAXPROCS="$WORKERS" "$GO" 127.0.0.1:PORT; fi
run_server threads "$BIN/echo_peers" threads 127.0.0.1:PORT

echo
echo "64-byte echo, server workers $WORKERS, client workers $CLIENT_WORKERS; ratio = numafiber requests/s / peer requests/s"
printf '%-10s %6s %12s %10s %8s\n' server conns requests/s p99 ratio
for name in numafiber may tokio go threads; do
    for conns in 100 1000; do
        r=${RPS[$name,$conns]:-}
        [ -z "$r" ] && continue
        n=${RPS[numafiber,$conns]:-0}
        printf '%-10s %6s %12s %10s %8s\n' "$name" "$conns" "$r" "${P99[$name,$conns]}" \
            "$(awk -v n="$n" -v r="$r" 'BEGIN { if (r > 0) printf "%.2f", n / r; else print "-" }')"
    done
done

# Idle connections: RSS of the numafiber server before and after IDLE
# connections are open (each has had one echo, so its fiber exists and
# waits in read).
echo
port=$((port + 1))
start idle "$port" "$BIN/echo_server" "127.0.0.1:$port" "$WORKERS" || exit 1
rss() { awk '/VmRSS/ { print $2 }' "/proc/$1/status"; }
before=$(rss "$SERVER")
rm -f "$OUT/hold.log"
"$BIN/echo_peers" hold "127.0.0.1:$port" "$IDLE" 30 > "$OUT/hold.log" 2>&1 &
HOLD=$!
PIDS+=("$HOLD")
for _ in $(seq 1 600); do grep -q holding "$OUT/hold.log" 2>/dev/null && break; sleep 0.1; done
if ! grep -q holding "$OUT/hold.log"; then echo "bench-echo: hold failed: $(cat "$OUT/hold.log")" >&2; exit 1; fi
sleep 1
after=$(rss "$SERVER")
echo "idle: numafiber server VmRSS $before KiB -> $after KiB with $IDLE idle connections:" \
    "$(awk -v a="$after" -v b="$before" -v n="$IDLE" 'BEGIN { printf "%.2f KiB per connection", (a - b) / n }')"
