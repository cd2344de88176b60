#!/usr/bin/env bash
# Lists the import cycles of the crate: between its top-level modules (the
# gate) and between its files (for the reader).
#
#   scripts/module-cycles.sh [SRC_DIR]      (default: src of this checkout)
#
# A file depends on the file that defines the module a path names: every
# `crate::a::b::..` path in code (in `use` lines, brace lists included, and
# in expressions), `super::`/`self::` paths, and paths through a child
# module the file declares (`mod x;` then `x::..`). A root name re-exported
# by lib.rs (`crate::Runtime`) counts as a use of the module it comes from;
# lib.rs itself (declarations and re-exports only) has no edges. Comments,
# string literals and test-only code are skipped: an item, a `mod x { .. }`
# block or a module file behind `#[cfg(test)]` or `#[cfg(loom)]` (tests may
# use anything).
#
# Output: the cycles between top-level modules (strongly connected groups of
# the module graph, each edge with the files that make it), or "none"; then
# the file cycles, each with its files. Exit status 1 when a cycle crosses
# top-level modules (a cycle among files of one module, such as those inside
# src/runtime/, is reported but allowed), 2 on a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-src}
[ -f "$src/lib.rs" ] || { echo "module-cycles: no $src/lib.rs (give the crate's src directory)" >&2; exit 2; }
files=$(find "$src" -name '*.rs' | LC_ALL=C sort)
# shellcheck disable=SC2086
exec awk -v src="$src" '
# ---- per file: strip comments, strings, test-only items; keep code text ----
function modpath(f,   p) {
    p = substr(f, length(src) + 2)
    sub(/\.rs$/, "", p)
    sub(/\/mod$/, "", p)
    if (p == "lib") return ""
    gsub(/\//, "::", p)
    return p
}
function top(f,   m) {
    m = modpath(f)
    if (m == "") return "lib"
    sub(/::.*/, "", m)
    return m
}
FNR == 1 {
    file = FILENAME; nfiles++; order[nfiles] = file
    mp = modpath(file); fileof[mp] = file; code[file] = ""
    pending = 0; skipping = 0; depth = 0; opened = 0
}
{
    line = $0
    gsub(/\\\\/, "", line)                  # escaped backslashes
    gsub(/\\"/, "", line)                   # escaped quotes
    gsub(/"[^"]*"/, "\"\"", line)           # string literals (one line)
    gsub(/'"'"'[{}]'"'"'/, "", line)        # brace char literals
    sub(/\/\/.*/, "", line)                 # line comments, doc comments
    if (skipping) {
        n = split(line, ch, "")
        for (i = 1; i <= n; i++) {
            if (ch[i] == "{") { depth++; opened = 1 }
            else if (ch[i] == "}") depth--
            else if (ch[i] == ";" && !opened && depth == 0) { skipping = 0; break }
            if (opened && depth == 0) { skipping = 0; break }
        }
        next
    }
    if (line ~ /^[ \t]*#\[cfg\((test|loom)\)\]/) { pending = 1; next }
    if (pending && line ~ /^[ \t]*#\[/) next
    if (pending && line ~ /^[ \t]*$/) next
    if (pending) {
        pending = 0
        if (match(line, /^[ \t]*(pub(\([a-z:]+\))?[ \t]+)?mod[ \t]+[A-Za-z0-9_]+[ \t]*;/)) {
            name = line; sub(/^[ \t]*(pub(\([a-z:]+\))?[ \t]+)?mod[ \t]+/, "", name); sub(/[ \t]*;.*/, "", name)
            testchild[file, name] = 1
            next
        }
        skipping = 1; depth = 0; opened = 0
        n = split(line, ch, "")
        for (i = 1; i <= n; i++) {
            if (ch[i] == "{") { depth++; opened = 1 }
            else if (ch[i] == "}") depth--
            else if (ch[i] == ";" && !opened && depth == 0) { skipping = 0; break }
            if (opened && depth == 0) { skipping = 0; break }
        }
        next
    }
    if (match(line, /^[ \t]*(pub(\([a-z:]+\))?[ \t]+)?mod[ \t]+[A-Za-z0-9_]+[ \t]*;/)) {
        name = line; sub(/^[ \t]*(pub(\([a-z:]+\))?[ \t]+)?mod[ \t]+/, "", name); sub(/[ \t]*;.*/, "", name)
        nchild[file]++; child[file, nchild[file]] = name
        next
    }
    code[file] = code[file] " " line
}

# ---- paths -> files ----
# The file defining the longest module prefix of path p (segments joined by
# "::", from the crate root), or "" when no prefix is a module.
function resolve(p,   q) {
    q = p
    while (q != "") {
        if (q in fileof) return fileof[q]
        if (!sub(/::[^:]*$/, "", q)) q = ""
    }
    return ""
}
function addedge(f, p,   g, r) {
    g = resolve(p)
    if (g == "") {
        r = p; sub(/::.*/, "", r)
        if (r in reexport) g = resolve(reexport[r])
    }
    if (g == "" || g == f || (f SUBSEP g) in edge) return
    edge[f, g] = 1; nadj[f]++; adj[f, nadj[f]] = g
}
# Expands one path expression starting at position i of text s (after a
# prefix already known, "prefix::"), adding an edge per leaf.
function parsepath(f, s, i, prefix,   j, c, seg, d, inner) {
    seg = ""
    while (i <= length(s)) {
        c = substr(s, i, 1)
        if (c ~ /[A-Za-z0-9_]/) { seg = seg c; i++; continue }
        if (substr(s, i, 2) == "::") {
            if (seg != "") { prefix = (prefix == "" ? seg : prefix "::" seg); seg = "" }
            i += 2
            continue
        }
        if (c == "{") {
            d = 1; j = i + 1
            while (j <= length(s) && d > 0) {
                c = substr(s, j, 1)
                if (c == "{") d++
                else if (c == "}") d--
                j++
            }
            inner = substr(s, i + 1, j - i - 2)
            expand(f, inner, prefix)
            return
        }
        break
    }
    if (seg == "self" || seg == "") seg = ""
    addedge(f, seg == "" ? prefix : (prefix == "" ? seg : prefix "::" seg))
}
function expand(f, body, prefix,   d, i, c, start, item) {
    d = 0; start = 1
    for (i = 1; i <= length(body) + 1; i++) {
        c = (i <= length(body)) ? substr(body, i, 1) : ","
        if (c == "{") d++
        else if (c == "}") d--
        else if (c == "," && d == 0) {
            item = substr(body, start, i - start)
            gsub(/^[ \t]+|[ \t]+$/, "", item)
            sub(/[ \t]+as[ \t]+.*$/, "", item)
            if (item != "") parsepath(f, item, 1, prefix)
            start = i + 1
        }
    }
}
function parent(m) {
    if (m !~ /::/) return ""
    sub(/::[^:]*$/, "", m)
    return m
}
END {
    # lib.rs re-exports: root name -> module path it comes from
    lib = src "/lib.rs"
    s = code[lib]
    while (match(s, /pub[ \t]+use[ \t]+[^;]*;/)) {
        u = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
        sub(/^pub[ \t]+use[ \t]+/, "", u); sub(/;$/, "", u); sub(/^crate::/, "", u)
        if (match(u, /\{.*\}/)) {
            pre = substr(u, 1, RSTART - 1); sub(/::$/, "", pre)
            n = split(substr(u, RSTART + 1, RLENGTH - 2), it, ",")
            for (k = 1; k <= n; k++) {
                nm = it[k]; gsub(/[ \t]/, "", nm)
                if (nm != "") reexport[nm] = pre "::" nm
            }
        } else {
            nm = u; sub(/.*::/, "", nm); reexport[nm] = u
        }
    }
    # test-only module files
    for (k = 1; k <= nfiles; k++) {
        f = order[k]; m = modpath(f)
        for (key in testchild) {
            split(key, pr, SUBSEP)
            cm = modpath(pr[1]); cm = (cm == "" ? pr[2] : cm "::" pr[2])
            if (m == cm || index(m, cm "::") == 1) testonly[f] = 1
        }
    }
    for (k = 1; k <= nfiles; k++) {
        f = order[k]
        if (f in testonly || f == lib) continue
        s = code[f]; m = modpath(f)
        while (match(s, /(^|[^A-Za-z0-9_:$])(crate|super|self)::/)) {
            st = RSTART; if (substr(s, st, 1) !~ /[cs]/) st++
            kw = substr(s, st); sub(/::.*/, "", kw)
            rest = st + length(kw) + 2
            if (kw == "crate") pre = ""
            else if (kw == "self") pre = m
            else { pre = (f ~ /\/mod\.rs$/ || modpath(f) !~ /::/) ? parent(m) : parent(m) }
            # super:: chains
            while (substr(s, rest, 7) == "super::") { pre = parent(pre); rest += 7 }
            parsepath(f, s, rest, pre)
            s = substr(s, rest)
        }
        for (c = 1; c <= nchild[f]; c++) {
            nm = child[f, c]
            if ((f SUBSEP nm) in testchild) continue
            t = " " code[f]
            if (match(t, "[^A-Za-z0-9_:]" nm "::")) addedge(f, (m == "" ? nm : m "::" nm))
        }
    }
    # ---- strongly connected groups: files, then top-level modules ----
    for (k = 1; k <= nfiles; k++) if (!(order[k] in idx)) sc(order[k])
    nf = 0; fcyc = 0
    for (c = 1; c <= ncomp; c++) if (csize[c] > 1) fcyc++
    for (k = 1; k <= nfiles; k++) {
        f = order[k]
        for (j = 1; j <= nadj[f]; j++) {
            g = adj[f, j]; a = top(f); b = top(g)
            if (a == b) continue
            if (!((a SUBSEP b) in medge)) { medge[a, b] = ""; mn[a]++; madj[a, mn[a]] = b; mods[a] = 1; mods[b] = 1 }
            if (index(" " medge[a, b] " ", " " f " ") == 0) medge[a, b] = medge[a, b] " " f
        }
    }
    for (a in mods) if (!(a in midx)) msc(a)
    bad = 0
    print "Cycles between top-level modules of " src "/:"
    for (c = 1; c <= mncomp; c++) {
        if (mcsize[c] < 2) continue
        bad++
        list = ""; for (a in mcomp) if (mcomp[a] == c) list = list " " a
        print "  cycle " bad " (" mcsize[c] " modules):" list
        for (key in medge) {
            split(key, pr, SUBSEP)
            if (mcomp[pr[1]] == c && mcomp[pr[2]] == c) print "    " pr[1] " -> " pr[2] ":" medge[key]
        }
    }
    if (bad == 0) print "  none"
    print "Cycles between files (allowed inside one top-level module):"
    nshown = 0
    for (c = 1; c <= ncomp; c++) {
        if (csize[c] < 2) continue
        nshown++
        list = ""; tops = ""; nt = 0; split("", seen)
        for (k = 1; k <= nfiles; k++) if (order[k] in comp && comp[order[k]] == c) {
            list = list " " order[k]; t = top(order[k])
            if (!(t in seen)) { seen[t] = 1; nt++; tops = tops " " t }
        }
        print "  " csize[c] " files in " nt " top-level module(s) (" substr(tops, 2) "):" list
    }
    if (nshown == 0) print "  none"
    exit bad > 0 ? 1 : 0
}
function sc(v,   i, w) {
    idx[v] = ictr; low[v] = ictr; ictr++
    stk[++sp] = v; onst[v] = 1
    for (i = 1; i <= nadj[v]; i++) {
        w = adj[v, i]
        if (!(w in idx)) { sc(w); if (low[w] < low[v]) low[v] = low[w] }
        else if (onst[w] && idx[w] < low[v]) low[v] = idx[w]
    }
    if (low[v] == idx[v]) {
        ncomp++
        do { w = stk[sp--]; onst[w] = 0; comp[w] = ncomp; csize[ncomp]++ } while (w != v)
    }
}
function msc(v,   i, w) {
    midx[v] = mictr; mlow[v] = mictr; mictr++
    mstk[++msp] = v; monst[v] = 1
    for (i = 1; i <= mn[v]; i++) {
        w = madj[v, i]
        if (!(w in midx)) { msc(w); if (mlow[w] < mlow[v]) mlow[v] = mlow[w] }
        else if (monst[w] && midx[w] < mlow[v]) mlow[v] = midx[w]
    }
    if (mlow[v] == midx[v]) {
        mncomp++
        do { w = mstk[msp--]; monst[w] = 0; mcomp[w] = mncomp; mcsize[mncomp]++ } while (w != v)
    }
}
' $files
