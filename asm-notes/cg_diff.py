#!/usr/bin/env python3
"""Per-operation instruction counts from two callgrind runs.

usage: cg_diff.py SMALL.out LARGE.out OPS_DIFFERENCE [--inclusive]

Runs `callgrind_annotate` on both profiles, sums Ir by function (inlined
code is attributed to the function it was inlined into; recursion marks
like '2 are folded), and prints (Ir_large - Ir_small) / OPS_DIFFERENCE for
every function that differs by at least 0.5 instructions per op.
"""
import re
import subprocess
import sys
from collections import defaultdict


def load(path, inclusive):
    args = ["callgrind_annotate", "--auto=no", "--threshold=100"]
    if inclusive:
        args.append("--inclusive=yes")
    out = subprocess.run(args + [path], capture_output=True, text=True, check=True).stdout
    total = None
    per = defaultdict(int)
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(\([^)]*\))?\s*(.*)$", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        rest = m.group(3)
        if "PROGRAM TOTALS" in rest:
            total = n
            continue
        if ":" not in rest:
            continue
        fn = rest.split(":", 1)[1]
        fn = re.sub(r"\s*\[.*\]$", "", fn)
        fn = re.sub(r"'\d+$", "", fn)
        per[fn] += n
    return total, per


def main():
    small, large, ops = sys.argv[1], sys.argv[2], float(sys.argv[3])
    inclusive = "--inclusive" in sys.argv
    ts, s = load(small, inclusive)
    tl, l = load(large, inclusive)
    print(f"total: {(tl - ts) / ops:.1f} Ir per op")
    rows = []
    for fn in set(s) | set(l):
        d = (l.get(fn, 0) - s.get(fn, 0)) / ops
        if abs(d) >= 0.5:
            rows.append((d, fn))
    for d, fn in sorted(rows, reverse=True):
        print(f"{d:8.1f}  {fn}")


if __name__ == "__main__":
    main()
