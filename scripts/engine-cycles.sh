#!/usr/bin/env bash
# Import cycles between the files of the engine (src/runtime/): the
# strongly connected groups of the file-level import graph, largest first.
#
#   scripts/engine-cycles.sh [--max N] [--all] [--edges] [DIR]   (default DIR: src/runtime)
#
# A file depends on the file that defines what a path names: every
# `crate::runtime::..`, `super::..` and `self::..` path in code (`use` lines
# with brace lists, and paths in expressions), and paths through a child
# module the file declares (`mod x;` then `x::..`). A name a `mod.rs`
# re-exports (`pub(crate) use queues::drain_one;`) is followed to the file
# that defines it, so using the door of a folder is an arrow to the room
# behind it, not to the folder's `mod.rs`. Paths that leave DIR are ignored.
# Comments, string literals and test-only code (an item, a `mod x { .. }`
# block or a module file behind `#[cfg(test)]` or `#[cfg(loom)]`) are
# skipped.
#
# Output: the number of files and arrows, then each group of two files or
# more (the largest first; only the largest without --all) with its files.
# --edges also prints every arrow ("from -> to"). Exit status 1 when a group
# has more than N files (--max N), 2 on a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
max="" all=0 alledges=0 dir=src/runtime
while [ $# -gt 0 ]; do
    case $1 in
        --max) max=$2; shift 2;;
        --all) all=1; shift;;
        --edges) alledges=1; shift;;
        -h|--help) sed -n '2,22p' "$0"; exit 0;;
        -*) echo "engine-cycles: unknown option $1" >&2; exit 2;;
        *) dir=$1; shift;;
    esac
done
[ -d "$dir" ] || { echo "engine-cycles: no directory $dir" >&2; exit 2; }
exec python3 - "$dir" "$max" "$all" "$alledges" <<'PY'
import os, re, sys

root, maxn, show_all, show_edges = sys.argv[1].rstrip('/'), sys.argv[2], sys.argv[3] == '1', sys.argv[4] == '1'
# module path of DIR from the crate root (src/runtime -> crate::runtime)
src = root
while os.path.basename(src) != 'src' and src not in ('', '/'):
    src = os.path.dirname(src)
base = ['crate'] + [p for p in os.path.relpath(root, src).split('/') if p != '.']

def modpath(f):
    rel = os.path.relpath(f, src)[:-3].split('/')
    if rel[-1] == 'mod':
        rel = rel[:-1]
    return tuple(['crate'] + rel)

files = sorted(os.path.join(d, n) for d, _, ns in os.walk(root) for n in ns if n.endswith('.rs'))
fileof = {modpath(f): f for f in files}

def strip(text):
    """Code without comments, strings and cfg(test)/cfg(loom) items; the
    names of test-only child modules declared by `mod x;`."""
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    out, testmods = [], set()
    lines = text.split('\n')
    i, n = 0, len(lines)
    def clean(l):
        l = l.replace('\\\\', '').replace('\\"', '')
        l = re.sub(r'"[^"]*"', '""', l)
        l = re.sub(r"'[{}]'", '', l)
        return re.sub(r'//.*', '', l)
    while i < n:
        l = clean(lines[i])
        if re.match(r'\s*#\[cfg\((test|loom)\)\]', l):
            i += 1
            while i < n and (re.match(r'\s*#\[', lines[i]) or not lines[i].strip()):
                i += 1
            if i >= n:
                break
            l = clean(lines[i])
            m = re.match(r'\s*(pub(\([a-z: ]+\))?\s+)?mod\s+(\w+)\s*;', l)
            if m:
                testmods.add(m.group(3)); i += 1; continue
            depth, opened = 0, False
            while i < n:
                for ch in clean(lines[i]):
                    if ch == '{': depth += 1; opened = True
                    elif ch == '}': depth -= 1
                    elif ch == ';' and not opened and depth == 0: opened = True; depth = 0; break
                i += 1
                if opened and depth == 0:
                    break
            continue
        out.append(l); i += 1
    return ' '.join(out), testmods

code, children, testonly_mods = {}, {}, set()
for f in files:
    c, tm = strip(open(f, encoding='utf-8').read())
    code[f] = c
    m = modpath(f)
    children[f] = set(re.findall(r'(?:^|[;}\s])(?:pub(?:\([a-z: ]+\))?\s+)?mod\s+(\w+)\s*;', c))
    for t in tm:
        testonly_mods.add(m + (t,))
files = [f for f in files if not any(modpath(f)[:len(t)] == t for t in testonly_mods)]

def leaves(body, prefix):
    """Expand a `use` tree body (after `prefix::`) into full paths."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(body + ','):
        if ch == '{': depth += 1
        elif ch == '}': depth -= 1
        elif ch == ',' and depth == 0:
            items.append(body[start:i].strip()); start = i + 1
    for it in items:
        it = re.sub(r'\s+as\s+\w+$', '', it)
        if not it:
            continue
        m = re.match(r'^((?:\w+\s*::\s*)*)\{(.*)\}$', it, re.S)
        if m:
            pre = [s for s in re.split(r'\s*::\s*', m.group(1)) if s]
            yield from leaves(m.group(2), prefix + pre)
        else:
            segs = [s for s in re.split(r'\s*::\s*', it) if s and s != '*']
            if segs and segs[-1] == 'self':
                segs = segs[:-1]
            yield prefix + segs

# re-exports of each mod.rs: name -> full path it stands for
reexports = {}
def absolute(f, segs):
    m = list(modpath(f))
    if not segs:
        return None
    if segs[0] == 'crate':
        return segs
    if segs[0] == 'self':
        return m + segs[1:]
    if segs[0] == 'super':
        p = m
        while segs and segs[0] == 'super':
            p = p[:-1]; segs = segs[1:]
        return p + segs
    if segs[0] in children.get(f, ()):
        return m + segs
    return None
for f in files:
    for body in re.findall(r'\bpub(?:\([a-z: ]+\))?\s+use\s+([^;]*);', code[f]):
        for p in leaves(body, []):
            a = absolute(f, p)
            if a:
                reexports[(modpath(f), a[-1])] = tuple(a)

def resolve(path, depth=0):
    path = tuple(path)
    for k in range(len(path), 0, -1):
        pre = path[:k]
        if pre in fileof:
            if k < len(path) and (pre, path[k]) in reexports and depth < 8:
                target = reexports[(pre, path[k])] + path[k + 1:]
                if target != path:
                    return resolve(target, depth + 1)
            return fileof[pre]
    return None

edges = {f: set() for f in files}
pathre = re.compile(r'(?<![\w:$])(crate|super|self)((?:\s*::\s*(?:super|\w+))*)\s*::\s*(\{|\w+)')
for f in files:
    c = code[f]
    starts = [m.start() for m in re.finditer(r'(?<![\w:$])(?:crate|super|self)\s*::', c)]
    for ch in children.get(f, ()):
        starts += [m.start(1) for m in re.finditer(r'(?<![\w:$])(' + ch + r')\s*::', c)]
    for s in starts:
        # take the path text: identifiers, ::, and one balanced brace group
        j, depth = s, 0
        while j < len(c):
            x = c[j]
            if x == '{': depth += 1
            elif x == '}':
                if depth == 0: break
                depth -= 1
            elif depth == 0 and not (x.isalnum() or x in '_: ' or x == '*'):
                break
            elif depth == 0 and x == ' ' and not re.match(r'\s*(::|\{)', c[j:]) and not re.search(r'::\s*$', c[s:j]):
                break
            j += 1
        text = c[s:j].strip()
        for p in leaves(text, []):
            a = absolute(f, p)
            if not a:
                continue
            g = resolve(a)
            if g and g != f and g in edges:
                edges[f].add(g)

# Tarjan, iterative
index, low, onst, stack, comps, counter = {}, {}, set(), [], [], [0]
def strong(v):
    work = [(v, iter(sorted(edges[v])))]
    index[v] = low[v] = counter[0]; counter[0] += 1; stack.append(v); onst.add(v)
    while work:
        u, it = work[-1]
        for w in it:
            if w not in index:
                index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); onst.add(w)
                work.append((w, iter(sorted(edges[w])))); break
            elif w in onst:
                low[u] = min(low[u], index[w])
        else:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[u])
            if low[u] == index[u]:
                comp = []
                while True:
                    w = stack.pop(); onst.discard(w); comp.append(w)
                    if w == u: break
                comps.append(sorted(comp))
for f in files:
    if f not in index:
        strong(f)
groups = sorted((c for c in comps if len(c) > 1), key=len, reverse=True)
narrows = sum(len(e) for e in edges.values())
compof = {f: i for i, c in enumerate(comps) for f in c}
inside = sum(1 for f in files for g in edges[f] if compof[f] == compof[g] and len(comps[compof[f]]) > 1)
print(f"{root}/: {len(files)} files, {narrows} arrows between them ({inside} inside cycles)")
if not groups:
    print("  no import cycle")
for k, g in enumerate(groups if show_all else groups[:1]):
    print(f"  cycle of {len(g)} files:" + ''.join(' ' + os.path.relpath(x, root) for x in g))
if not show_all and len(groups) > 1:
    print(f"  ({len(groups) - 1} smaller cycle(s): --all lists them)")
if show_edges:
    for f in files:
        for g in sorted(edges[f]):
            print(f"  {os.path.relpath(f, root)} -> {os.path.relpath(g, root)}")
big = len(groups[0]) if groups else 0
sys.exit(1 if maxn and big > int(maxn) else 0)
PY
