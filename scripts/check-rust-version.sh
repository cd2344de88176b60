#!/usr/bin/env bash
# check-rust-version.sh - fail unless each workspace package's `rust-version`
# is exactly the newest Rust that its build needs: the highest rust-version
# (or edition minimum: 2021 -> 1.56, 2024 -> 1.85) among the packages that
# building it compiles, as `cargo metadata` resolves them for this host.
#
#   scripts/check-rust-version.sh
#
# For the root package the graph is what the README's commands build
# (`cargo run --release --example thesis_bench`, `cargo test --release`):
# its normal, build and dev-dependencies, then their normal and build
# dependencies. The same for benches/ (numafiber-peers). A dependency that
# declares no rust-version counts by its edition only; those are listed.
# Needs python3. Exit status 1 on a mismatch, with the packages that set it.
set -euo pipefail
cd "$(dirname "$0")/.."
host=$(rustc -vV | sed -n 's/^host: //p')
cargo metadata --format-version 1 --locked --filter-platform "$host" |
python3 -c "$(cat <<'PY'
import json, sys

meta = json.load(sys.stdin)
pkgs = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
EDITION = {"2015": (1, 0), "2018": (1, 31), "2021": (1, 56), "2024": (1, 85)}

def ver(s):
    parts = [int(x) for x in s.split(".")]
    return tuple((parts + [0, 0])[:2])

def need(p):
    v = EDITION.get(p["edition"], (1, 0))
    if p.get("rust_version"):
        v = max(v, ver(p["rust_version"]))
    return v

def graph(root):
    seen, todo = set(), [root]
    first = True
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for d in nodes[pid]["deps"]:
            kinds = {k["kind"] for k in d["dep_kinds"]}
            # dev-dependencies count for the package itself (tests, examples) only
            if first or kinds - {"dev"}:
                todo.append(d["pkg"])
        first = False
    return seen

bad = 0
for member in meta["workspace_members"]:
    p = pkgs[member]
    ours = p.get("rust_version")
    deps = graph(member) - {member}
    top = max((need(pkgs[d]) for d in deps), default=(1, 0))
    top = max(top, EDITION.get(p["edition"], (1, 0)))
    who = sorted(f"{pkgs[d]['name']} {pkgs[d]['version']}" for d in deps if need(pkgs[d]) == top)
    silent = sorted(pkgs[d]["name"] for d in deps if not pkgs[d].get("rust_version"))
    want = f"{top[0]}.{top[1]}"
    line = f"{p['name']}: rust-version {ours}, its build graph ({len(deps)} packages) needs {want} ({', '.join(who[:4])})"
    if ours is None or ver(ours) != top:
        print("check-rust-version: MISMATCH " + line + f"; set rust-version = '{want}' in its Cargo.toml")
        bad = 1
    else:
        print("check-rust-version: ok " + line)
    if silent:
        print(f"  (no rust-version declared, counted by edition: {', '.join(silent)})")
sys.exit(bad)
PY
)"
