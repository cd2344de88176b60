#!/usr/bin/env bash
# callgrind-ops.sh - instructions and locked (bus) instructions per
# operation, from two callgrind runs that differ only in the number of
# operations, so start-up and shutdown cancel out. These counts
# do not move with the machine's load, unlike wall-clock times.
#
#   scripts/callgrind-ops.sh N1 N2 CMD ARGS...   # '{N}' in ARGS is replaced
#   scripts/callgrind-ops.sh 50000 100000 target/release/examples/yield_count rendezvous {N}
#   scripts/callgrind-ops.sh 50000 100000 target/peers/go_ping_pong 1 0 {N} 1
#
# Prints: "<Ir per op> Ir  <Ge per op> locked  per op" where Ge is
# callgrind's global bus event count (--collect-bus=yes: locked
# instructions, including xchg with memory).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 N1 N2 CMD ARGS... ('{N}' in ARGS is the op count)" >&2; exit 2; }
n1=$1 n2=$2; shift 2
case "$n1$n2" in *[!0-9]*) echo "N1 and N2 must be integers" >&2; exit 2;; esac
[ "$n2" -gt "$n1" ] || { echo "N2 must be larger than N1" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in "$n1" "$n2"; do
    args=()
    for a in "$@"; do args+=("${a//\{N\}/$n}"); done
    valgrind -q --tool=callgrind --collect-bus=yes --callgrind-out-file="$tmp/cg.$n" "${args[@]}" >/dev/null 2>"$tmp/err.$n" ||
        { cat "$tmp/err.$n" >&2; exit 1; }
done
python3 - "$tmp/cg.$n1" "$tmp/cg.$n2" "$((n2 - n1))" <<'PY'
import sys
def totals(path):
    ev, tot = None, None
    for line in open(path, errors="replace"):
        if line.startswith("events:"):
            ev = line.split()[1:]
        elif line.startswith(("summary:", "totals:")):
            tot = [int(x) for x in line.split()[1:]]
    return dict(zip(ev, tot))
a, b, ops = totals(sys.argv[1]), totals(sys.argv[2]), int(sys.argv[3])
ir = (b["Ir"] - a["Ir"]) / ops
ge = (b.get("Ge", 0) - a.get("Ge", 0)) / ops
print(f"{ir:,.1f} Ir  {ge:.2f} locked  per op")
PY
