#!/usr/bin/env bash
# check-paths.sh - fail when the scripts, CI, tests, examples, benches or user
# docs name a path outside the repository (a sibling directory of the clone,
# or the /work tree of the machine this project was built on): a fresh clone
# has neither, so such a path breaks for everyone else.
#
#   scripts/check-paths.sh        # exit 0: none found; 1: each hit printed as file:line: text
set -euo pipefail
cd "$(dirname "$0")/.."
# The patterns are split so that this file does not match itself.
patterns=(-e '\.\./'"shared" -e '/'"work/" -e '\$HOME/'"\.\./")
where=(scripts .ci tests examples benches README.md Cargo.toml)
hits=$(grep -rnIE "${patterns[@]}" "${where[@]}" 2>/dev/null || true)
if [ -n "$hits" ]; then
    echo "check-paths: paths outside the repository (a fresh clone does not have them):" >&2
    echo "$hits" >&2
    exit 1
fi
echo "check-paths: ok (no path outside the repository in ${where[*]})"
