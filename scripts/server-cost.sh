#!/usr/bin/env bash
# server-cost.sh - what one request costs a server under a load generator,
# beyond requests/s: the server's user and system CPU per request
# (/proc/PID/stat over the run), and, where `perf` can attach, context
# switches and system calls per request; or, with MODE=callgrind, the
# server's user-space instructions per request (callgrind, which does not
# move with the machine's load); or, with MODE=split, where the time of
# one round trip goes (below). The generator is the Go echo generator
# (benches/go/echoload, 64-byte messages), or wrk with KIND=http.
#
# With SIDES=1 the other end is measured too, because on a shared machine
# what the generator spends per request is taken from the server's rate:
# the generator's CPU and epoll_wait (+ epoll_pwait, Go's) calls per
# request (`perf stat` over its whole run, connecting included, divided by
# the requests of its timed window), the server's, and the idle share of
# the machine's CPU time during the run (/proc/stat).
#
#   scripts/server-cost.sh CONNS SECS CMD ARGS...      # @PORT@ in ARGS is the port
#   scripts/server-cost.sh 1000 4 target/release/examples/echo_server 127.0.0.1:@PORT@ 2
#   scripts/server-cost.sh 1000 4 target/release/examples/io_peers tokio-echo 127.0.0.1:@PORT@ 2
#   KIND=http SIDES=1 scripts/server-cost.sh 64 5 target/release/examples/http_hello 127.0.0.1:@PORT@ 2
#   MODE=callgrind scripts/server-cost.sh 64 6 target/release/examples/echo_server 127.0.0.1:@PORT@ 1
#   MODE=split KIND=http scripts/server-cost.sh 1 4 target/release/examples/http_hello 127.0.0.1:@PORT@ 2
#   PERF=0 scripts/server-cost.sh ...       # no perf attached (it costs the server a little per syscall)
#
# The server must print a line containing "listening" once it accepts.
# Callgrind mode divides the server's whole instruction count by the
# generator's requests (start-up included: under 1 % of a 6 s run).
# Split mode (x86_64, perf with tracepoints, python3; meant for CONNS=1,
# SECS of 4 or more) records the server's system calls for 1 s
# (`raw_syscalls`) and then the machine's scheduler for 0.5 s
# (`sched_waking`, `sched_switch`). For each server thread that made a
# tenth of the sends or more it prints, per request, the time inside
# epoll_wait, the receive calls and the send calls, the time between calls
# (user space, or waiting for a CPU), and the service time (epoll_wait's
# return to the next send); then, per woken thread (server, generator), how
# long a wake-up took from `sched_waking` to running, woken from another
# CPU or on its own. Both recordings slow the server a little; the split
# is what they are for, not the rate.
# Loopback only; the server is killed at the end.
set -u
cd "$(dirname "$0")/.."
. scripts/peers-lib.sh
[ $# -ge 3 ] || { echo "usage: $0 CONNS SECS CMD ARGS... (@PORT@ in ARGS)" >&2; exit 2; }
conns=$1 secs=$2; shift 2
case "$conns$secs" in *[!0-9]*) echo "server-cost: CONNS and SECS must be integers" >&2; exit 2;; esac
MODE=${MODE:-cpu}
case "$MODE" in cpu|callgrind|split) ;; *) echo "server-cost: MODE must be cpu, callgrind or split, got $MODE" >&2; exit 2;; esac
if [ "$MODE" = split ]; then
    [ "$(uname -m)" = x86_64 ] || { echo "server-cost: MODE=split reads x86_64 system call numbers; this is $(uname -m)" >&2; exit 1; }
    command -v perf > /dev/null 2>&1 || { echo "server-cost: MODE=split needs perf (Debian: linux-perf)" >&2; exit 1; }
    command -v python3 > /dev/null 2>&1 || { echo "server-cost: MODE=split needs python3" >&2; exit 1; }
    [ "$secs" -ge 4 ] || { echo "server-cost: MODE=split records from 1 s into the run for 1.5 s, plus perf's own start-up: SECS must be at least 4" >&2; exit 2; }
fi
# perf attached to the server (and, with SIDES=1, to the generator).
HAVE_PERF=0
[ "${PERF:-1}" != 0 ] && command -v perf > /dev/null 2>&1 && HAVE_PERF=1
KIND=${KIND:-echo}
SIDES=${SIDES:-0}
case "$KIND" in echo|http) ;; *) echo "server-cost: KIND must be echo or http, got $KIND" >&2; exit 2;; esac
OUT=target/bench-io
mkdir -p "$OUT"
if [ "$KIND" = http ]; then
    command -v wrk > /dev/null 2>&1 || _peers_apt wrk || { echo "server-cost: KIND=http needs wrk, which is not installed and could not be" >&2; exit 1; }
elif [ ! -x "$OUT/go_echoload" ]; then
    need_go || exit 1
    build_go_peer echoload "$OUT/go_echoload" || exit 1
fi
ulimit -n 65536 2>/dev/null || true
port=$((20000 + RANDOM % 10000))
args=("${@//@PORT@/$port}")
log=$(mktemp)
tmp=$(mktemp -d)
cleanup() { [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null; rm -rf "$log" "$tmp"; }
trap cleanup EXIT
if [ "$MODE" = callgrind ]; then
    valgrind -q --tool=callgrind --callgrind-out-file="$tmp/cg" "${args[@]}" > "$log" 2>&1 &
else
    "${args[@]}" > "$log" 2>&1 &
fi
SERVER=$!
for _ in $(seq 1 200); do grep -q listening "$log" && break; sleep 0.05; done
grep -q listening "$log" || { echo "server-cost: the server did not start: $(cat "$log")" >&2; exit 1; }
# gen SECS [WRAP...]: the generator's run; its last line says
# "N requests/s" (wrk's own summary is rewritten to it).
gen() {
    local s=$1; shift
    if [ "$KIND" = http ]; then
        local t=2; [ "$conns" -lt 2 ] && t=1
        "$@" wrk -t"$t" -c"$conns" -d"${s}s" "http://127.0.0.1:$port/" | awk '
            /Requests\/sec:/ { printf "wrk: %.0f requests/s\n", $2 } !/Requests\/sec:/ { print }'
    else
        "$@" "$OUT/go_echoload" "127.0.0.1:$port" "$conns" "$s" 64
    fi
}

if [ "$MODE" = callgrind ]; then
    out=$(gen "$secs")
    echo "$out" | grep "requests/s" | tail -1
    kill -INT "$SERVER"; sleep 3; kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; SERVER=""
    rps=$(sed -nE 's/.*: ([0-9]+) requests\/s.*/\1/p' <<<"$out")
    tot=$(sed -nE 's/^(summary|totals): ([0-9]+).*/\2/p' "$tmp/cg" | head -1)
    [ -n "$rps" ] && [ -n "$tot" ] || { echo "server-cost: no request rate or no profile" >&2; exit 1; }
    awk -v t="$tot" -v n=$((rps * secs)) 'BEGIN {
        printf "%.1f user-space instructions per request (%d Ir over %d requests, start-up included)\n", t / n, t, n }'
    exit
fi

gen 1 > /dev/null # warm-up: connections made and torn down once

if [ "$MODE" = split ]; then
    gen "$secs" > "$tmp/gen.out" &
    GEN=$!
    sleep 1
    perf record -q -e raw_syscalls:sys_enter,raw_syscalls:sys_exit -p "$SERVER" -o "$tmp/sys.data" -- sleep 1 2> /dev/null
    perf record -q -a -e sched:sched_waking,sched:sched_switch -o "$tmp/sch.data" -- sleep 0.5 2> /dev/null
    wait "$GEN"
    grep "requests/s" "$tmp/gen.out" | tail -1
    perf script -i "$tmp/sys.data" -F tid,time,event,trace > "$tmp/sys.txt" 2> /dev/null
    perf script -i "$tmp/sch.data" -F comm,tid,cpu,time,event,trace > "$tmp/sch.txt" 2> /dev/null
    [ -s "$tmp/sys.txt" ] && [ -s "$tmp/sch.txt" ] || { echo "server-cost: perf recorded nothing (tracepoints need perf_event_paranoid <= 1 or root)" >&2; exit 1; }
    python3 - "$tmp/sys.txt" "$tmp/sch.txt" "$SERVER" <<'EOF'
import os, re, sys
from collections import Counter
sysf, schf, server = sys.argv[1], sys.argv[2], sys.argv[3]
# x86_64 numbers: epoll_wait, epoll_pwait; read, recvfrom, recvmsg, readv; write, sendto, sendmsg, writev
WAIT, RECV, SEND = {232, 281}, {0, 45, 47, 19}, {1, 44, 46, 20}
ev = []
for line in open(sysf):
    p = line.split()
    if len(p) >= 5 and p[2].startswith("raw_syscalls:"):
        ev.append((float(p[1].rstrip(":")) * 1e6, p[0], p[2].endswith("sys_enter:"), int(p[4])))
if not ev:
    sys.exit("server-cost: no system calls recorded")
sends = Counter(e[1] for e in ev if e[2] and e[3] in SEND)
if not sends:
    sys.exit("server-cost: the server made no send")
total = sum(sends.values())
# Each server thread that made at least a tenth of the sends (the driver of
# a runtime's reactor can move from one worker to another).
for tid, n in sends.most_common():
    if n * 10 < total:
        break
    tev = [e for e in ev if e[1] == tid]
    span = tev[-1][0] - tev[0][0]
    inside, calls, user, svc = Counter(), Counter(), 0.0, []
    last_exit = enter = woke = None
    for t, _, is_enter, nr in tev:
        if is_enter:
            if last_exit is not None:
                user += t - last_exit
            enter = (t, nr)
            if nr in SEND and woke is not None:
                svc.append(t - woke)
                woke = None
        else:
            if enter is not None and enter[1] == nr:
                k = "wait" if nr in WAIT else "recv" if nr in RECV else "send" if nr in SEND else "other"
                inside[k] += t - enter[0]
                calls[k] += 1
                if nr in WAIT:
                    woke = t
            last_exit = t
    print(f"server thread {tid}: {n} of the {total} sends in {span / 1e6:.2f} s, one per {span / n:.1f} us")
    for k in ("wait", "recv", "send", "other"):
        print(f"  in {k:5s} calls: {inside[k] / n:6.1f} us per request ({calls[k] / n:.2f} calls)")
    print(f"  between calls:   {user / n:6.1f} us per request (user space, or waiting for a CPU)")
    if svc:
        svc.sort()
        print(f"  service, epoll_wait's return to the next send: p50 {svc[len(svc) // 2]:.1f} us, p90 {svc[9 * len(svc) // 10]:.1f} us")
# Wake-ups: sched_waking (on the waker's CPU) to sched_switch in (on the wakee's).
pat = re.compile(r"\s*(.+?)\s+(\d+) \[(\d+)\] ([\d.]+): sched:(\w+): (.*)")
pend, lat = {}, {}
try:
    server_tids = set(os.listdir(f"/proc/{server}/task"))
except OSError:
    server_tids = set()
for line in open(schf):
    m = pat.match(line)
    if not m:
        continue
    comm, _, cpu, t, what, rest = m.groups()
    t = float(t) * 1e6
    if what == "sched_waking":
        w = re.search(r"comm=(.+?) pid=(\d+)", rest)
        if w:
            pend.setdefault(w.group(2), (t, w.group(1), int(cpu)))
    elif what == "sched_switch":
        w = re.search(r"next_comm=(.+?) next_pid=(\d+)", rest)
        if w and w.group(2) in pend:
            t0, name, wcpu = pend.pop(w.group(2))
            who = "server" if w.group(2) in server_tids else name
            lat.setdefault((who, "from another CPU" if wcpu != int(cpu) else "on its own CPU"), []).append(t - t0)
print("wake-ups in 0.5 s (sched_waking to running), threads woken 100 times or more:")
if all(len(x) < 100 for x in lat.values()):
    print("  none: the generator had stopped before the recording (give a longer SECS), or perf lost the events")
for (who, where), x in sorted(lat.items(), key=lambda kv: -len(kv[1])):
    if len(x) >= 100:
        x.sort()
        print(f"  {who:16s} {where:17s} {len(x):6d}  p50 {x[len(x) // 2]:5.1f} us  p90 {x[9 * len(x) // 10]:5.1f} us  mean {sum(x) / len(x):5.1f} us")
EOF
    exit
fi
ticks() { awk '{ print $14, $15 }' "/proc/$SERVER/stat"; }
read -r u0 s0 < <(ticks)
PERF_PID=0
EVENTS=task-clock,context-switches,cpu-migrations,raw_syscalls:sys_enter
[ "$SIDES" = 1 ] && EVENTS=$EVENTS,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait
if [ "$HAVE_PERF" = 1 ]; then
    perf stat -x, -e "$EVENTS" -p "$SERVER" -o "$tmp/perf" -- sleep "$secs" 2> /dev/null &
    PERF_PID=$!
fi
# The machine's CPU time (user, nice, system, idle, iowait, irq, softirq,
# steal; guest time is inside user) and its idle part, in ticks.
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $5; exit }' /proc/stat; }
read -r all0 idle0 < <(cpu_ticks)
if [ "$SIDES" = 1 ] && [ "$HAVE_PERF" = 1 ]; then
    out=$(gen "$secs" perf stat -x, -e task-clock,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait -o "$tmp/perf_gen" --)
else
    out=$(gen "$secs")
fi
read -r all1 idle1 < <(cpu_ticks)
read -r u1 s1 < <(ticks)
[ "$PERF_PID" != 0 ] && wait "$PERF_PID"
rps=$(sed -nE 's/.*: ([0-9]+) requests\/s.*/\1/p' <<<"$out" | tail -1)
[ -n "$rps" ] || { echo "server-cost: the generator failed: $out" >&2; exit 1; }
echo "$out" | grep "requests/s" | tail -1
awk -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v hz="$(getconf CLK_TCK)" -v n=$((rps * secs)) 'BEGIN {
    printf "server CPU per request: user %.2f us, system %.2f us\n", u / hz * 1e6 / n, s / hz * 1e6 / n }'
if [ "$PERF_PID" != 0 ] && [ -s "$tmp/perf" ]; then
    # Counts over the same seconds (perf attaches to the threads alive at
    # its start; a server that starts threads later is undercounted).
    awk -F, -v n=$((rps * secs)) -v cpu_ms=$(( (u1 - u0 + s1 - s0) * 1000 / $(getconf CLK_TCK) )) '
        $1 ~ /^[0-9.]+$/ && $3 == "task-clock" { seen = $1 }
        $1 ~ /^[0-9.]+$/ && $3 != "task-clock" { printf "  %s per request: %.3f\n", $3, $1 / n }
        END { if (cpu_ms > 0 && (seen < 0.8 * cpu_ms || seen > 1.25 * cpu_ms))
                  printf "  (perf saw %.0f ms of the %d ms of CPU /proc counts: its counts are off by as much)\n", seen, cpu_ms }' "$tmp/perf"
fi
if [ "$SIDES" = 1 ]; then
    awk -v i=$((idle1 - idle0)) -v all=$((all1 - all0)) 'BEGIN {
        if (all > 0) printf "machine idle during the run: %.1f %% of its CPU time\n", 100 * i / all }'
    if [ -s "$tmp/perf_gen" ]; then
        awk -F, -v n=$((rps * secs)) '
            $1 ~ /^[0-9.]+$/ && $3 == "task-clock" { printf "generator CPU per request: %.2f us\n", $1 * 1000 / n }
            $1 ~ /^[0-9.]+$/ && $3 ~ /epoll_p?wait/ { e += $1 }
            END { printf "  generator epoll_wait + epoll_pwait per request: %.3f\n", e / n }' "$tmp/perf_gen"
    else
        echo "(no perf: the generator's side is not measured)"
    fi
fi
