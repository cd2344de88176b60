#!/usr/bin/env bash
# bench-io.sh - servers under load generators numafiber does not ship:
# HTTP keep-alive with wrk (Debian's wrk 4.1) and 64-byte TCP echo with a
# goroutine-per-connection generator (benches/go/echoload), against
# numafiber (examples/http_hello, examples/echo_server), tokio (hand-written
# responder and hyper), may (hand-written) and may_minihttp
# (benches/examples/io_peers.rs), and Go (benches/go/http, benches/go/echo).
# Every server runs on WORKERS workers (GOMAXPROCS for Go), one
# task/fiber/goroutine per connection; the servers are interleaved within
# each round, a fresh server process per measurement.
#
# Per measurement: requests/s and p50/p99 from the generator, the server's
# CPU per request (utime+stime from /proc/PID/stat over the run; user_us
# is the utime part), and for echo two per-connection figures: fairness,
# the round trips of the 1st-percentile connection / the median
# connection's (is anyone starved?),
# and top, the 99th-percentile connection's / the median's (is anyone
# favoured? A server that serves a few connections far more often than the
# rest gains requests/s and a lower p99 from them). Also the share of the
# machine's CPU time that was idle during the generator's whole run,
# connection set-up included (idle%: capacity neither the server nor the
# generator used), and cs/req, the context switches of the server's
# threads per request (voluntary and involuntary, from
# /proc/PID/task/*/status over the run; a thread that exits during the
# run is not counted): at one connection each request must wake the
# server at least once, and a server that also wakes a second thread per
# event shows it here. After the medians, paired ratios: in every round
# numafiber's req/s over each peer's of the same round and cell, and over
# the best peer of that round, as median, lowest-highest and the rounds
# numafiber was at or above (the rounds of one cell run minutes apart, so
# the machine's drift between rounds cancels in a pair; a ratio of
# medians, and above all one against the best of five medians, does not).
# Last, the same paired figure for every server against the best of the
# others, which tells which server leads a cell, and how far below 1
# servers of about equal speed (three or more) come out against the best
# of the rest.
# With SYSCALLS=1
# (default) one extra short run per server at SYSCALL_CONNS connections
# under `strace -c -f` gives system calls and recv-type calls per request
# (strace slows the server; the counts per request are what it is for,
# not the rate).
#
#   scripts/bench-io.sh                                  # full run (~10 min)
#   ROUNDS=1 SECS=2 HTTP_CONNS="1 64" ECHO_CONNS="64" SYSCALLS=0 scripts/bench-io.sh   # quick look
#   ONLY="numafiber tokio" scripts/bench-io.sh           # a subset of servers
#   BASE=/dir/with/http_hello+echo_server scripts/bench-io.sh
#       # also a second numafiber, "numafiber_base", from another build (A/B)
#   SERVER_CPUS=0 CLIENT_CPUS=0 HTTP_CONNS=1 ECHO_CONNS=1 scripts/bench-io.sh
#       # server and generator held to CPU sets (taskset): at one connection
#       # the rate depends mostly on whether the kernel runs both ends on one
#       # CPU (a same-CPU ping-pong) or on two (each message wakes the other
#       # CPU); fixing the placement compares the servers, not the kernel's
#       # choice. numafiber_pinned is skipped then (it binds its own workers).
#
# Output: a table on stdout, every raw line in target/bench-io/results.tsv.
# Loopback (127.0.0.1) only; every process started is killed at the end.
set -u
cd "$(dirname "$0")/.."
. scripts/peers-lib.sh

WORKERS=${WORKERS:-2}
ROUNDS=${ROUNDS:-2}
SECS=${SECS:-5}
HTTP_CONNS=${HTTP_CONNS:-"1 64 1000"}
ECHO_CONNS=${ECHO_CONNS:-"1 64 1000 10000"}
SYSCALLS=${SYSCALLS:-1}
SYSCALL_CONNS=${SYSCALL_CONNS:-"1 64"}
SYSCALL_SECS=${SYSCALL_SECS:-2}
ONLY=${ONLY:-}
SERVER_CPUS=${SERVER_CPUS:-}
CLIENT_CPUS=${CLIENT_CPUS:-}
OUT=target/bench-io
TARGET=${CARGO_TARGET_DIR:-target}
mkdir -p "$OUT"
RES="$OUT/results.tsv"
: > "$RES"

# 10,000 connections need as many fds in the server and in the generator.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
if [ "$(ulimit -n)" -lt 10100 ]; then
    echo "bench-io: ulimit -n is $(ulimit -n): dropping 10000 echo connections" >&2
    ECHO_CONNS=${ECHO_CONNS//10000/}
fi

# --- tools and servers --------------------------------------------------------
if ! command -v wrk >/dev/null 2>&1; then _peers_apt wrk || true; fi
HAVE_WRK=1
command -v wrk >/dev/null 2>&1 || { echo "bench-io: wrk is not installed and could not be: skipping HTTP" >&2; HAVE_WRK=0; }
HAVE_GO=0
if need_go; then
    HAVE_GO=1
    for p in echoload http echo; do
        build_go_peer "$p" "$OUT/go_$p" || HAVE_GO=0
    done
fi
if [ "$HAVE_GO" = 0 ]; then
    echo "bench-io: no Go toolchain: no echo load generator and no Go peers: skipping echo" >&2
    ECHO_CONNS=""
fi
SRV_PIN=""
CLI_PIN=""
if [ -n "$SERVER_CPUS$CLIENT_CPUS" ]; then
    command -v taskset >/dev/null 2>&1 || _peers_apt util-linux || true
    if ! command -v taskset >/dev/null 2>&1; then
        echo "bench-io: SERVER_CPUS/CLIENT_CPUS need taskset (util-linux), which is not installed" >&2
        exit 1
    fi
    [ -n "$SERVER_CPUS" ] && SRV_PIN="taskset -c $SERVER_CPUS"
    [ -n "$CLIENT_CPUS" ] && CLI_PIN="taskset -c $CLIENT_CPUS"
fi
HAVE_STRACE=0
if [ "$SYSCALLS" = 1 ]; then
    command -v strace >/dev/null 2>&1 || _peers_apt strace || true
    if command -v strace >/dev/null 2>&1; then HAVE_STRACE=1; else echo "bench-io: no strace: no syscall counts" >&2; fi
fi

nice -n 10 cargo build --release --example http_hello --example echo_server -q || exit 1
NF="$TARGET/release/examples"
PEERS=""
if nice -n 10 cargo build --release -q -p numafiber-peers --example io_peers; then
    PEERS="$TARGET/release/examples/io_peers"
else
    echo "bench-io: benches/examples/io_peers.rs did not build: skipping tokio, hyper, may, may_minihttp" >&2
fi

# name|kind|command (@PORT@ and @W@ are substituted)
# numafiber's server examples leave their workers unpinned (the README's
# advice for servers); numafiber_pinned is the same binary with each worker
# pinned to its PU (the runtime's default).
SERVERS=(
    "numafiber|http|$NF/http_hello 127.0.0.1:@PORT@ @W@"
    "numafiber|echo|$NF/echo_server 127.0.0.1:@PORT@ @W@"
    "numafiber_pinned|http|$NF/http_hello 127.0.0.1:@PORT@ @W@ pin"
    "numafiber_pinned|echo|$NF/echo_server 127.0.0.1:@PORT@ @W@ pin"
)
if [ -n "${BASE:-}" ]; then
    if [ -x "$BASE/http_hello" ] && [ -x "$BASE/echo_server" ]; then
        SERVERS+=(
            "numafiber_base|http|$BASE/http_hello 127.0.0.1:@PORT@ @W@"
            "numafiber_base|echo|$BASE/echo_server 127.0.0.1:@PORT@ @W@"
        )
    else
        echo "bench-io: BASE=$BASE has no http_hello and echo_server: no numafiber_base" >&2
    fi
fi
if [ -n "$PEERS" ]; then
    SERVERS+=(
        "tokio|http|$PEERS tokio-http 127.0.0.1:@PORT@ @W@"
        "hyper|http|$PEERS hyper-http 127.0.0.1:@PORT@ @W@"
        "may|http|$PEERS may-http 127.0.0.1:@PORT@ @W@"
        "may_minihttp|http|$PEERS minihttp 127.0.0.1:@PORT@ @W@"
        "tokio|echo|$PEERS tokio-echo 127.0.0.1:@PORT@ @W@"
        "may|echo|$PEERS may-echo 127.0.0.1:@PORT@ @W@"
    )
fi
if [ "$HAVE_GO" = 1 ]; then
    SERVERS+=("go|http|env GOMAXPROCS=@W@ $OUT/go_http 127.0.0.1:@PORT@" "go|echo|env GOMAXPROCS=@W@ $OUT/go_echo 127.0.0.1:@PORT@")
fi

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

port=$((20000 + RANDOM % 10000)) # below Linux's ephemeral ports (32768-)
SERVER=""
# start NAME CMD: start a server on a fresh port, wait (bounded) until it
# listens; another port if this one is taken (up to 5 tries).
start() {
    local name=$1 cmd0=$2 cmd
    for _ in 1 2 3 4 5; do
        port=$((port + 1))
        cmd=${cmd0//@PORT@/$port}
        cmd=${cmd//@W@/$WORKERS}
        # shellcheck disable=SC2086
        $SRV_PIN $cmd > "$OUT/server.log" 2>&1 &
        SERVER=$!
        PIDS+=("$SERVER")
        for _ in $(seq 1 100); do
            grep -q listening "$OUT/server.log" 2>/dev/null && return 0
            grep -qi "in use" "$OUT/server.log" 2>/dev/null && break
            sleep 0.05
        done
        grep -qi "in use" "$OUT/server.log" 2>/dev/null || break
        stop
    done
    echo "bench-io: $name did not start: $(cat "$OUT/server.log")" >&2
    stop
    return 1
}
stop() { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; SERVER=""; }
# CPU time of a process (and its threads) in clock ticks: user and system.
ticks() { awk '{ print $14, $15 }' "/proc/$1/stat" 2>/dev/null || echo 0 0; }
# Context switches of a process's threads so far, voluntary and involuntary.
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^(non)?voluntary_ctxt_switches:/ { s += $2 } END { print s + 0 }'; }
# The machine's CPU time in clock ticks: all of it, and idle + iowait.
cpu_ticks() { awk '$1 == "cpu" { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $5 + $6; exit }' /proc/stat; }
HZ=$(getconf CLK_TCK)

# load KIND CONNS SECS: run the generator against $port; prints
# "rps p50_us p99_us fairness top" (fairness and top "-" for HTTP).
load() {
    local kind=$1 conns=$2 secs=$3 out
    if [ "$kind" = http ]; then
        local t=2; [ "$conns" -lt 2 ] && t=1
        out=$(timeout $((secs + 30)) $CLI_PIN wrk -t"$t" -c"$conns" -d"${secs}s" --latency "http://127.0.0.1:$port/" 2>&1)
        awk '
            function us(v) { if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1000; if (v ~ /s$/) return v * 1000000; return v }
            /Requests\/sec:/ { rps = $2 }
            $1 == "50%" { p50 = us($2) }
            $1 == "99%" { p99 = us($2) }
            END { if (rps == "") print "- - - - -"; else printf "%.0f %.0f %.0f - -\n", rps, p50, p99 }' <<<"$out"
    else
        out=$(GOMAXPROCS=$WORKERS timeout $((secs + 120)) $CLI_PIN "$OUT/go_echoload" "127.0.0.1:$port" "$conns" "$secs" 64 2>&1)
        sed -nE 's/.*: ([0-9]+) requests\/s p50 ([0-9]+) us p99 ([0-9]+) us; .*median ([0-9]+) .* fairness ([0-9.]+);.* best1% ([0-9]+);.*/\1 \2 \3 \5 \6 \4/p' <<<"$out" |
            awk '{ printf "%s %s %s %s %s\n", $1, $2, $3, $4, ($6 > 0) ? sprintf("%.2f", $5 / $6) : "-" }' | grep . || echo "- - - - -"
    fi
    echo "$out" >> "$OUT/load.log"
}

selected() {
    if [ "$1" = numafiber_pinned ] && [ -n "$SERVER_CPUS" ]; then return 1; fi
    [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]
}

echo "bench-io: workers $WORKERS, rounds $ROUNDS x ${SECS}s, HTTP conns [$HTTP_CONNS], echo conns [$ECHO_CONNS]${SERVER_CPUS:+, server on CPUs $SERVER_CPUS}${CLIENT_CPUS:+, generator on CPUs $CLIENT_CPUS}; load at start: $(uptime | sed 's/.*load average: //')"
: > "$OUT/load.log"
for round in $(seq 1 "$ROUNDS"); do
    for kind in http echo; do
        conns_list=$HTTP_CONNS; [ "$kind" = echo ] && conns_list=$ECHO_CONNS
        [ "$kind" = http ] && [ "$HAVE_WRK" = 0 ] && continue
        for conns in $conns_list; do
            for s in "${SERVERS[@]}"; do
                IFS='|' read -r name k cmd <<<"$s"
                [ "$k" = "$kind" ] || continue
                selected "$name" || continue
                start "$name" "$cmd" || continue
                read -r u0 k0 <<<"$(ticks "$SERVER")"
                cs0=$(switches "$SERVER")
                read -r all0 idle0 <<<"$(cpu_ticks)"
                read -r rps p50 p99 fair top <<<"$(load "$kind" "$conns" "$SECS")"
                read -r u1 k1 <<<"$(ticks "$SERVER")"
                cs1=$(switches "$SERVER")
                read -r all1 idle1 <<<"$(cpu_ticks)"
                stop
                idle=$(awk -v a=$((all1 - all0)) -v i=$((idle1 - idle0)) 'BEGIN { if (a > 0) printf "%.1f", 100 * i / a; else print "-" }')
                cpu="-" usr="-" csr="-"
                if [ "$rps" != "-" ] && [ "$rps" -gt 0 ]; then
                    cpu=$(awk -v c=$((u1 + k1 - u0 - k0)) -v hz="$HZ" -v r="$rps" -v s="$SECS" 'BEGIN { printf "%.2f", c / hz * 1e6 / (r * s) }')
                    usr=$(awk -v c=$((u1 - u0)) -v hz="$HZ" -v r="$rps" -v s="$SECS" 'BEGIN { printf "%.2f", c / hz * 1e6 / (r * s) }')
                    csr=$(awk -v c=$((cs1 - cs0)) -v r="$rps" -v s="$SECS" 'BEGIN { printf "%.2f", c / (r * s) }')
                fi
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$kind" "$conns" "$name" "$rps" "$p50" "$p99" "$cpu" "$fair" "$top" "$usr" "$idle" "$csr" >> "$RES"
                printf 'round %s %-4s %5s conns %-12s %8s req/s  p50 %6s us  p99 %8s us  cpu %6s us/req (user %s)  switches %s/req  fairness %s  top %s  idle %s%%  (load %s)\n' \
                    "$round" "$kind" "$conns" "$name" "$rps" "$p50" "$p99" "$cpu" "$usr" "$csr" "$fair" "$top" "$idle" "$(cut -d' ' -f1 /proc/loadavg)"
            done
        done
    done
done
echo "bench-io: load at end of timed rounds: $(uptime | sed 's/.*load average: //')"

# --- syscalls per request -----------------------------------------------------
SYS="$OUT/syscalls.tsv"
: > "$SYS"
if [ "$HAVE_STRACE" = 1 ]; then
    for kind in http echo; do
        [ "$kind" = http ] && [ "$HAVE_WRK" = 0 ] && continue
        [ "$kind" = echo ] && [ -z "$ECHO_CONNS" ] && continue
        for conns in $SYSCALL_CONNS; do
            for s in "${SERVERS[@]}"; do
                IFS='|' read -r name k cmd <<<"$s"
                [ "$k" = "$kind" ] || continue
                selected "$name" || continue
                start "$name" "$cmd" || continue
                strace -c -f -p "$SERVER" -o "$OUT/strace.txt" 2>/dev/null &
                ST=$!
                PIDS+=("$ST")
                sleep 0.5
                read -r rps _ _ _ _ <<<"$(load "$kind" "$conns" "$SYSCALL_SECS")"
                kill -INT "$ST" 2>/dev/null; wait "$ST" 2>/dev/null
                stop
                [ "$rps" = "-" ] && continue
                # strace -c: "% time seconds usecs/call calls errors syscall"; the
                # total line has no usecs/call column on some versions.
                awk -v r="$rps" -v s="$SYSCALL_SECS" -v k="$kind" -v c="$conns" -v n="$name" '
                    $NF ~ /^(read|recvfrom|recvmsg|readv)$/ { recv += $4; if (NF == 6) eagain += $5 }
                    $NF ~ /^(futex)$/ { futex += $4 }
                    $NF ~ /^(epoll_wait|epoll_pwait|epoll_pwait2)$/ { ep += $4 }
                    $NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" { all += $4 }
                    END { q = r * s; if (q > 0) printf "%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n", k, c, n, all / q, recv / q, eagain / q, futex / q, ep / q }
                ' "$OUT/strace.txt" >> "$SYS"
            done
        done
    done
fi

# --- summary ------------------------------------------------------------------
echo
echo "Medians over $ROUNDS rounds of ${SECS} s; workers $WORKERS; ratio = numafiber / peer (req/s: >1 numafiber faster; CPU/req: <1 numafiber cheaper)"
echo "spread = (highest - lowest req/s of the rounds) / median: a ratio closer to 1 than the two rows' spreads is within the noise"
echo "fairness / top = round trips of the 1st- / 99th-percentile connection over the median connection's (echo)"
echo "idle% = the machine's idle CPU time during the run, all CPUs (the generator's included); cs/req = the server's context switches per request"
printf '%-4s %6s %-12s %10s %7s %8s %10s %9s %8s %6s %6s %9s %6s %10s %10s\n' kind conns server req/s spread p50_us p99_us cpu_us/req user_us idle% cs/req fairness top 'req/s x' 'cpu x'
awk -F'\t' '
    function median(key,   n, i, j, t, a) {
        n = split(vals[key], a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        if (n == 0) return "-"
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    # (highest - lowest) / median of the rounds, or "-" for one round.
    function spread(key, med,   n, i, a, lo, hi) {
        n = split(vals[key], a, " ")
        if (n < 2 || med <= 0) return "-"
        lo = hi = a[1] + 0
        for (i = 2; i <= n; i++) { if (a[i] + 0 < lo) lo = a[i] + 0; if (a[i] + 0 > hi) hi = a[i] + 0 }
        return sprintf("%.0f%%", 100 * (hi - lo) / med)
    }
    $5 != "-" {
        k = $2 SUBSEP $3 SUBSEP $4
        if (!(k in seen)) { seen[k] = 1; order[++m] = k }
        vals[k, "rps"] = vals[k, "rps"] " " $5; vals[k, "p50"] = vals[k, "p50"] " " $6
        vals[k, "p99"] = vals[k, "p99"] " " $7; vals[k, "cpu"] = vals[k, "cpu"] " " $8
        vals[k, "fair"] = vals[k, "fair"] " " $9; vals[k, "top"] = vals[k, "top"] " " $10
        vals[k, "usr"] = vals[k, "usr"] " " $11
        if ($12 ~ /^[0-9.]+$/) vals[k, "idle"] = vals[k, "idle"] " " $12
        if ($13 ~ /^[0-9.]+$/) vals[k, "cs"] = vals[k, "cs"] " " $13
    }
    END {
        for (i = 1; i <= m; i++) {
            k = order[i]; split(k, f, SUBSEP)
            rps[k] = median(k SUBSEP "rps"); cpu[k] = median(k SUBSEP "cpu")
        }
        for (i = 1; i <= m; i++) {
            k = order[i]; split(k, f, SUBSEP)
            nk = f[1] SUBSEP f[2] SUBSEP "numafiber"
            fair = (f[1] == "echo") ? sprintf("%.2f", median(k SUBSEP "fair")) : "-"
            top = (f[1] == "echo" && vals[k, "top"] ~ /[0-9]/) ? sprintf("%.2f", median(k SUBSEP "top")) : "-"
            rx = (nk in rps && rps[k] > 0) ? sprintf("%.2f", rps[nk] / rps[k]) : "-"
            cx = (nk in cpu && cpu[k] > 0) ? sprintf("%.2f", cpu[nk] / cpu[k]) : "-"
            idle = (vals[k, "idle"] ~ /[0-9]/) ? sprintf("%.1f", median(k SUBSEP "idle")) : "-"
            cs = (vals[k, "cs"] ~ /[0-9]/) ? sprintf("%.2f", median(k SUBSEP "cs")) : "-"
            printf "%-4s %6s %-12s %10.0f %7s %8.0f %10.0f %9.2f %8.2f %6s %6s %9s %6s %10s %10s\n", f[1], f[2], f[3], rps[k], spread(k SUBSEP "rps", rps[k]), median(k SUBSEP "p50"), median(k SUBSEP "p99"), cpu[k], median(k SUBSEP "usr"), idle, cs, fair, top, rx, cx
        }
    }' "$RES" | sort -s -k1,1r -k2,2n
if [ "$ROUNDS" -gt 1 ]; then
    echo
    echo "Paired ratios: numafiber's req/s / the peer's in the same round and cell, over $ROUNDS rounds (best = the best peer of each round)"
    printf '%-4s %6s %-12s %8s %11s %8s\n' kind conns peer median lowest-hi 'at/above'
    awk -F'\t' '
    function med(s,   n, i, j, t, a) {
        n = split(s, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function ext(s, want_hi,   n, i, a, m) {
        n = split(s, a, " "); m = a[1] + 0
        for (i = 2; i <= n; i++) if (want_hi ? a[i] + 0 > m : a[i] + 0 < m) m = a[i] + 0
        return m
    }
    function ahead(s,   n, i, a, k) { n = split(s, a, " "); k = 0; for (i = 1; i <= n; i++) if (a[i] + 0 >= 1) k++; return k "/" n }
    function row(kind, conns, peer, s) {
        if (s != "") printf "%-4s %6s %-12s %8.2f %5.2f-%-5.2f %8s\n", kind, conns, peer, med(s), ext(s, 0), ext(s, 1), ahead(s)
    }
    $5 ~ /^[0-9]+$/ && $5 > 0 {
        cell = $2 SUBSEP $3
        if (!(cell in seen)) { seen[cell] = 1; cells[++nc] = cell }
        if (!($1 in rseen)) { rseen[$1] = 1; rounds[++nr] = $1 }
        r[$1, cell, $4] = $5 + 0
        if ($4 != "numafiber" && $4 !~ /^numafiber_/) {
            if (!((cell, $4) in pseen)) { pseen[cell, $4] = 1; peers[cell] = peers[cell] " " $4 }
            if ($5 + 0 > best[$1, cell]) best[$1, cell] = $5 + 0
        }
    }
    END {
        for (c = 1; c <= nc; c++) {
            cell = cells[c]; split(cell, f, SUBSEP)
            np = split(peers[cell], pl, " ")
            for (p = 1; p <= np; p++) {
                s = ""
                for (i = 1; i <= nr; i++) if (((rounds[i], cell, "numafiber") in r) && ((rounds[i], cell, pl[p]) in r))
                    s = s " " r[rounds[i], cell, "numafiber"] / r[rounds[i], cell, pl[p]]
                row(f[1], f[2], pl[p], s)
            }
            s = ""
            for (i = 1; i <= nr; i++) if (((rounds[i], cell, "numafiber") in r) && ((rounds[i], cell) in best))
                s = s " " r[rounds[i], cell, "numafiber"] / best[rounds[i], cell]
            if (np > 1) row(f[1], f[2], "best", s)
        }
    }' "$RES" | sort -s -k1,1r -k2,2n
    echo
    echo "Each server against the best of the others, paired: the median over rounds of its req/s / the best other server's of the same round"
    echo "(numafiber_pinned and numafiber_base left out). Among three or more servers of about equal speed each comes out below 1: the best of several noisy rounds lies above a typical one."
    awk -F'\t' '
    function med(s,   n, i, j, t, a) {
        n = split(s, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    $5 ~ /^[0-9]+$/ && $5 > 0 && $4 !~ /^numafiber_/ {
        cell = $2 SUBSEP $3
        if (!(cell in seen)) { seen[cell] = 1; cells[++nc] = cell }
        if (!((cell, $4) in sseen)) { sseen[cell, $4] = 1; srv[cell] = srv[cell] " " $4 }
        if (!($1 in rseen)) { rseen[$1] = 1; rounds[++nr] = $1 }
        r[$1, cell, $4] = $5 + 0
    }
    END {
        for (c = 1; c <= nc; c++) {
            cell = cells[c]; split(cell, f, SUBSEP)
            ns = split(srv[cell], sl, " ")
            if (ns < 2) continue
            line = ""; topv = 0; top = ""
            for (x = 1; x <= ns; x++) {
                s = ""
                for (i = 1; i <= nr; i++) {
                    if (!((rounds[i], cell, sl[x]) in r)) continue
                    b = 0
                    for (y = 1; y <= ns; y++) if (y != x && ((rounds[i], cell, sl[y]) in r) && r[rounds[i], cell, sl[y]] > b) b = r[rounds[i], cell, sl[y]]
                    if (b > 0) s = s " " r[rounds[i], cell, sl[x]] / b
                }
                if (s == "") continue
                v = med(s)
                line = line sprintf("  %s %.2f", sl[x], v)
                if (v > topv) { topv = v; top = sl[x] }
            }
            printf "%-4s %6s  top: %-12s|%s\n", f[1], f[2], top, line
        }
    }' "$RES" | sort -s -k1,1r -k2,2n
fi
if [ -s "$SYS" ]; then
    echo
    echo "System calls per request under strace -c -f (${SYSCALL_SECS} s runs; recv = read/recvfrom/recvmsg/readv, failed = those that returned an error, mostly EAGAIN)"
    printf '%-4s %6s %-12s %8s %8s %8s %8s %8s\n' kind conns server all recv 'recv err' futex epoll
    awk -F'\t' '{ printf "%-4s %6s %-12s %8s %8s %8s %8s %8s\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$SYS"
fi
echo
echo "bench-io: done; load now: $(uptime | sed 's/.*load average: //'); raw: $RES $SYS"
