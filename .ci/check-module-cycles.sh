#!/usr/bin/env bash
# No import circles between the modules of a crate: each crate's modules form layers that a
# reader can take in order, lowest first. Fails naming every circle and the lines that make it.
#
# The rule. Module paths come from file paths under `crates/*/src` (`foo.rs` or `foo/mod.rs`
# is `foo`, `foo/bar.rs` is `foo::bar`; `lib.rs` and `main.rs` are the root). A module depends
# on another when its code names it: `use crate::…`, `use super::…`, `$crate::…`, or an inline
# `crate::x::…` / `super::x` path, resolved to the longest known module prefix. Then:
# - a module naming one of its own ancestors (`super::…`, or a re-export at the root) is
#   allowed: that is how Rust nests, and the ancestor declares the child anyway;
# - a parent naming its own descendants is allowed for the same reason;
# - any other edge is lifted to the two siblings just below the modules' common ancestor
#   (`a::x → b::y` is `a → b`), and those sibling edges must not form a circle, directly or
#   transitively.
# `--edges` also prints every sibling edge with the line that makes it.
# Not counted: comments (doc links included), and the test code after a file's first
# `#[cfg(test)]` (the house style puts the test module last; tests may reach across layers,
# as `.ci/check-sizes.sh` also leaves them out).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - "$@" <<'PY'
import os, re, sys
from collections import defaultdict

def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel in (["lib"], ["main"]):
        return ()
    return tuple(rel)

def code_of(path):
    text = open(path, encoding="utf-8").read()
    cut = re.search(r"^\s*#\[cfg\(test\)\]", text, re.M)
    if cut:
        text = text[: cut.start()]
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)

def expand(tree):
    """`a::{b, c::{d, e as f}}` -> ['a::b', 'a::c::d', 'a::c::e']"""
    out, depth, start, prefix = [], 0, 0, ""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [re.split(r"\s+as\s+", tree)[0].strip()]
    prefix, body = tree[:brace], tree[brace + 1 : tree.rindex("}")]
    parts = []
    for i, ch in enumerate(body):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    for part in filter(str.strip, parts):
        for sub in expand(part):
            out.append((prefix + sub) if sub != "self" else prefix.rstrip(":"))
    return out

def absolute(module, path):
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] in ("crate", "$crate"):
        return tuple(segs[1:])
    here = list(module)
    if segs[0] == "self":
        return tuple(here + segs[1:])
    if segs[0] != "super":
        return None
    while segs and segs[0] == "super":
        if not here:
            return None
        here.pop()
        segs.pop(0)
    return tuple(here + segs)

def references(module, code):
    use = re.compile(r"\buse\s+((?:\$?crate|super|self)::[^;]*);", re.S)
    inline = re.compile(r"(?<![\w:])((?:\$?crate|super)(?:::\w+)+)")
    for m in use.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        for path in expand(re.sub(r"\s+", " ", m.group(1))):
            yield line, path
    code = re.sub(r"pub\s*\(\s*in\s+[^)]*\)", "", code)
    for m in inline.finditer(code):
        yield code.count("\n", 0, m.start()) + 1, m.group(1)

def resolve(modules, target):
    for n in range(len(target), -1, -1):
        if target[:n] in modules:
            return target[:n]
    return ()

def sibling_edge(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    if n == len(a) or n == len(b):
        return None  # one is the other's ancestor: nesting, allowed
    return a[: n + 1], b[: n + 1]

def circles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out

def loop_through(edges, comp):
    """One concrete circle inside a component, starting at its first module."""
    start, members = comp[0], set(comp)
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges[v]):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in members and w not in prev:
                prev[w] = v
                queue.append(w)
    return comp

def name(m):
    return "::".join(m) or "crate"

failed = False
for src in sorted(d for d in (os.path.join("crates", c, "src") for c in os.listdir("crates")) if os.path.isdir(d)):
    files = {}
    for root, _, names in os.walk(src):
        for f in names:
            if f.endswith(".rs") and os.sep + "bin" not in root[len(src):]:
                files[module_of(src, os.path.join(root, f))] = os.path.join(root, f)
    edges, why = defaultdict(set), {}
    for module, path in sorted(files.items()):
        for line, ref in references(module, code_of(path)):
            target = absolute(module, ref)
            if target is None:
                continue
            pair = sibling_edge(module, resolve(files, target))
            if pair:
                edges[pair[0]].add(pair[1])
                edges[pair[1]]
                why.setdefault(pair, f"{path}:{line} names {ref}")
    crate = src.split(os.sep)[1]
    if "--edges" in sys.argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{crate}: {name(a)} -> {name(b)}  ({why[(a, b)]})")
    for comp in circles(edges):
        failed = True
        loop = loop_through(edges, comp)
        print(f"{crate}: module circle: {' -> '.join(name(m) for m in loop)}"
              + (f" (component: {', '.join(name(m) for m in comp)})" if len(comp) > len(loop) - 1 else ""))
        for a, b in zip(loop, loop[1:]):
            print(f"    {name(a)} -> {name(b)}: {why[(a, b)]}")
    if not any(True for _ in circles(edges)):
        print(f"{crate}: no module circles ({len(files)} modules)")
sys.exit(1 if failed else 0)
PY
