#!/usr/bin/env bash
# Size limits of the crate's source: no file of src/ over MAX_FILE lines,
# no function over MAX_FN lines (from its `fn` line to its closing brace,
# tests included).
#
#   scripts/size-limits.sh [SRC_DIR]    (default: src of this checkout)
#   MAX_FILE=900 MAX_FN=100 (environment) change the limits.
#
# Prints each file and function over its limit, then the largest of each
# (so a passing run still shows the margin). Exit status 1 when something
# is over a limit, 2 on a usage error. Braces inside string literals and
# comments are skipped; a brace in a char literal ('{') is too.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-src}
max_file=${MAX_FILE:-900}
max_fn=${MAX_FN:-100}
[ -d "$src" ] || { echo "size-limits: no directory $src" >&2; exit 2; }
files=$(find "$src" -name '*.rs' | LC_ALL=C sort)
# shellcheck disable=SC2086
exec awk -v max_file="$max_file" -v max_fn="$max_fn" '
FNR == 1 {
    if (NR > 1) endfile()
    file = FILENAME; depth = 0; nst = 0; pend = 0
}
{
    line = $0
    gsub(/\\\\/, "", line)
    gsub(/\\"/, "", line)
    gsub(/"[^"]*"/, "\"\"", line)
    gsub(/'"'"'[{}]'"'"'/, "", line)
    sub(/\/\/.*/, "", line)
    if (match(line, /(^|[^A-Za-z0-9_])fn[ \t]+[A-Za-z0-9_]+/)) {
        name = substr(line, RSTART, RLENGTH); sub(/^.*fn[ \t]+/, "", name)
        pend = 1; pname = name; pstart = FNR
    }
    n = length(line)
    for (i = 1; i <= n; i++) {
        c = substr(line, i, 1)
        if (c == "{") {
            depth++
            if (pend) { nst++; sname[nst] = pname; sstart[nst] = pstart; sdepth[nst] = depth; pend = 0 }
        } else if (c == "}") {
            if (nst > 0 && sdepth[nst] == depth) {
                len = FNR - sstart[nst] + 1
                fnlen = len; fnwhere = file ":" sstart[nst] " " sname[nst]
                if (len > max_fn) { print "function over " max_fn " lines: " fnwhere " (" len " lines)"; bad++ }
                if (len > top_fn) { top_fn = len; top_fn_where = fnwhere }
                nst--
            }
            depth--
        } else if (c == ";" && pend) {
            pend = 0 # a declaration without a body
        }
    }
}
function endfile() {
    if (lines_of > max_file) { print "file over " max_file " lines: " prev " (" lines_of " lines)"; bad++ }
}
{ prev = FILENAME; lines_of = FNR; if (FNR > top_file) { top_file = FNR; top_file_where = FILENAME } }
END {
    endfile()
    print "largest file: " top_file_where " (" top_file " lines; limit " max_file ")"
    print "longest function: " top_fn_where " (" top_fn " lines; limit " max_fn ")"
    exit bad > 0 ? 1 : 0
}
' $files
