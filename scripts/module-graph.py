#!/usr/bin/env python3
"""Checks the import graph of the workspace's library crates: no import circle, a bounded depth,
no import through the crate root's re-exports.

Every `use crate::..`, `use super::..`, `use self::..` (and every such path written inline in
code) is resolved to the file that *defines* the item, following `pub use` re-exports, so the
graph is the real one, not "everything points at lib.rs". A `pub use` is a re-export, not an
import: it makes no edge. `#[cfg(test)]` modules are left out (tests may reach anywhere).

A file's level is the length of the longest import chain that starts at it (a file importing
nothing of its crate is level 1). One bend is allowed, named in BENT: `compactor/mod.rs` holds
the `Compactor` type together with its pipeline (compact, rehydrate, resolve), so it sits one
level above what the type alone would need, and what names the type (the `impl Compactor`
files beside it, `builder.rs` and `transcript.rs`, and `pointer_tool/resolver.rs`) one level
deeper still. `session/mod.rs` is bent the same way: `Session` and `SessionBuilder` sit above
the compactor's builder and the pointer tool, kept with the impls that name them; the files
beside it name neither, so nothing imports it. A chain through a BENT file may be one level longer than the limit; nothing
else may. Fails (exit 1) when a crate has an import circle, a level above
its limit, an import that names a root re-export (`use crate::Name` for an item defined
elsewhere), or a path it cannot resolve.

    scripts/module-graph.py            # check every crate with its limit
    scripts/module-graph.py --verbose  # also print every file's level and edges
    scripts/module-graph.py --root DIR # check another checkout
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if "--root" in sys.argv:
    ROOT = Path(sys.argv[sys.argv.index("--root") + 1]).resolve()
# (crate source dir, deepest level allowed)
CRATES = [("compaction-core/src", 5), ("compaction-derive/src", 4)]
# Files that count as no level of their own (see the module docs): a type kept with its impls.
BENT = {"compaction-core/src": {"compactor/mod.rs", "session/mod.rs"}}

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ITEM_RE = re.compile(
    r"\b(?:struct|enum|trait|fn|type|const|static|union)\s+(" + IDENT + r")"
    r"|\bmacro_rules!\s*(" + IDENT + r")"
)


def strip(text):
    """Removes comments, string and char literals (keeping line structure)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
        elif re.match(r'b?r#*"', text[i : i + 10]) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'b?r(#*)"', text[i:])
            close = '"' + m.group(1)
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_tree(tree):
    """Expands a use tree (`a::{b, c::{d as e}, f::*}`) into (segments, alias) pairs."""
    tree = tree.strip()
    m = re.match(r"^(.*?)::\{(.*)\}$", tree, re.S) if tree.endswith("}") else None
    if tree.startswith("{") and tree.endswith("}"):
        prefix, inner = "", tree[1:-1]
    elif m:
        prefix, inner = m.group(1), m.group(2)
    else:
        parts = re.split(r"\s+as\s+", tree)
        segs = [s.strip() for s in parts[0].split("::") if s.strip()]
        alias = parts[1].strip() if len(parts) > 1 else (segs[-1] if segs else "")
        return [(segs, alias)]
    items, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    out = []
    for item in items:
        if not item.strip():
            continue
        for segs, alias in split_tree(item):
            full = [s for s in prefix.split("::") if s] + segs
            if segs == ["self"]:
                full = [s for s in prefix.split("::") if s]
                alias = alias if alias != "self" else full[-1]
            out.append((full, alias))
    return out


class Module:
    def __init__(self, path, file, dir_):
        self.path = path  # tuple of names from the crate root
        self.file = file  # the file holding its body
        self.dir = dir_  # where its child files live
        self.children = {}  # name -> Module
        self.items = set()
        self.reexports = []  # (segments, alias)
        self.uses = []  # (segments, line)


class Crate:
    def __init__(self, src):
        self.src = src
        self.root = Module((), src / "lib.rs", src)
        self.modules = [self.root]
        self.problems = []
        self.parse_file(self.root)

    def child_module(self, parent, name, attrs):
        m = re.search(r'#\[path\s*=\s*""\]', attrs)
        if m:
            self.problems.append(f"{parent.file}: #[path] is not supported (mod {name})")
        for cand, dir_ in (
            (parent.dir / f"{name}.rs", parent.dir / name),
            (parent.dir / name / "mod.rs", parent.dir / name),
        ):
            if cand.exists():
                mod = Module(parent.path + (name,), cand, dir_)
                parent.children[name] = mod
                self.modules.append(mod)
                self.parse_file(mod)
                return
        self.problems.append(f"{parent.file}: no file for `mod {name};`")

    def parse_file(self, module):
        text = strip(module.file.read_text())
        self.parse_body(module, text, module.dir)

    def parse_body(self, module, text, dir_):
        i, n, depth = 0, len(text), 0
        pending_attrs = ""
        while i < n:
            c = text[i]
            if c == "{":
                depth += 1
                i += 1
                continue
            if c == "}":
                depth -= 1
                i += 1
                continue
            if c == "#" and text.startswith("#[", i) or text.startswith("#![", i):
                j, d = text.index("[", i), 0
                k = j
                while k < n:
                    d += text[k] == "["
                    d -= text[k] == "]"
                    k += 1
                    if d == 0:
                        break
                pending_attrs += text[i:k]
                i = k
                continue
            m = re.compile(
                r"(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])"
            ).match(text, i)
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                name, kind = m.group(1), m.group(2)
                if kind == ";":
                    if depth == 0 and "cfg(test)" not in pending_attrs:
                        self.child_module(module, name, pending_attrs)
                    i = m.end()
                else:
                    end = self.block_end(text, m.end() - 1)
                    if "cfg(test)" not in pending_attrs and depth == 0:
                        inline = Module(module.path + (name,), module.file, dir_ / name)
                        module.children[name] = inline
                        self.modules.append(inline)
                        self.parse_body(inline, text[m.end() : end - 1], dir_ / name)
                    i = end
                pending_attrs = ""
                continue
            m = re.compile(r"(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]*);").match(text, i)
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                line = text.count("\n", 0, i) + 1
                for segs, alias in split_tree(m.group(2)):
                    if m.group(1) and depth == 0:
                        module.reexports.append((segs, alias))
                    else:
                        module.uses.append((segs, line))
                i = m.end()
                pending_attrs = ""
                continue
            m = ITEM_RE.match(text, i)
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                if depth == 0:
                    module.items.add(m.group(1) or m.group(2))
                i = m.end()
                pending_attrs = ""
                continue
            m = re.compile(IDENT + r"(?:::" + IDENT + r")+").match(text, i)
            if (
                m
                and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_:$#"))
                and m.group(0).split("::")[0] in ("crate", "super", "self", *module.children)
            ):
                line = text.count("\n", 0, i) + 1
                module.uses.append((m.group(0).split("::"), line))
                i = m.end()
                continue
            if not c.isspace() and c not in ";":
                if c.isalnum() or c == "_":
                    m = re.compile(r"[A-Za-z0-9_]+").match(text, i)
                    i = m.end()
                else:
                    i += 1
                if c not in "#":
                    pending_attrs = ""
                continue
            i += 1

    @staticmethod
    def block_end(text, open_at):
        depth, k = 0, open_at
        while k < len(text):
            depth += text[k] == "{"
            depth -= text[k] == "}"
            k += 1
            if depth == 0:
                break
        return k

    def find(self, path):
        mod = self.root
        for name in path:
            mod = mod.children.get(name)
            if mod is None:
                return None
        return mod

    def start(self, module, segs):
        """The module a path starts from, and the rest of the path; None for external."""
        first = segs[0]
        if first == "crate":
            return self.root, segs[1:]
        if first == "self":
            return module, segs[1:]
        if first == "super":
            base, rest = module, segs
            while rest and rest[0] == "super":
                base = self.find(base.path[:-1])
                rest = rest[1:]
            return base, rest
        if first in module.children:
            return module, segs
        return None, segs

    def resolve(self, module, segs, seen=None):
        """The defining (module, name) of a path, or None when external or unknown."""
        seen = seen or set()
        base, rest = self.start(module, segs)
        if base is None:
            return None
        while rest and rest[0] in base.children:
            base = base.children[rest[0]]
            rest = rest[1:]
        if not rest:
            return (base, None)
        name = rest[0]
        if name in base.items:
            return (base, name)
        key = (base.path, name)
        if key in seen:
            return None
        seen.add(key)
        for rsegs, alias in base.reexports:
            if alias == name and rsegs[-1] != "*":
                return self.resolve(base, rsegs, seen) or ("external", name)
        for rsegs, alias in base.reexports:
            if rsegs[-1] == "*":
                found = self.resolve(base, rsegs[:-1] + [name], seen)
                if found and found[0] != "external":
                    return found
        return ("unknown", name)

    def graph(self):
        edges = {}
        for mod in self.modules:
            edges.setdefault(mod.file, set())
            for segs, line in mod.uses:
                if segs[-1] == "*":
                    segs = segs[:-1]
                if not segs or segs[0] not in ("crate", "self", "super") and segs[0] not in mod.children:
                    continue
                found = self.resolve(mod, segs)
                where = f"{mod.file.relative_to(ROOT)}:{line}"
                if found is None or found[0] == "external":
                    continue
                if found[0] == "unknown":
                    # `Self::`-like paths into an enum or a trait's items resolve to their type.
                    self.problems.append(f"{where}: cannot resolve `{'::'.join(segs)}`")
                    continue
                target, name = found
                base, rest = self.start(mod, segs)
                if (
                    segs[0] == "crate"
                    and len(segs) >= 2
                    and segs[1] not in self.root.children
                    and target is not self.root
                ):
                    self.problems.append(
                        f"{where}: `{'::'.join(segs)}` imports a root re-export; name the "
                        f"defining module ({'::'.join(('crate',) + target.path)})"
                    )
                if target.file != mod.file:
                    edges[mod.file].add(target.file)
        return edges


def levels(edges, bent=frozenset()):
    """Each file's level, the longest chain from it, and every import circle. A file in `bent`
    adds no level to the chains through it."""
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            sccs.append(scc)

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            connect(v)
    cycles = [s for s in sccs if len(s) > 1]
    cyclic = {v for s in cycles for v in s}
    level, chain = {}, {}

    def depth(v):
        if v in level:
            return level[v]
        best = []
        for w in edges.get(v, ()):
            if w in cyclic or w == v:
                continue
            depth(w)
            if not best or level[w] > level[best[0]]:
                best = chain[w]
        chain[v] = [v] + best
        level[v] = (0 if v in bent else 1) + (level[best[0]] if best else 0)
        return level[v]

    for v in edges:
        if v not in cyclic:
            depth(v)
    return level, chain, cycles


def analyse(src, bent=frozenset()):
    """(files, levels, longest chain, circles, problems) of the crate rooted at `src`; files in
    `bent` (paths relative to `src`) add no level."""
    crate = Crate(src)
    edges = crate.graph()
    level, chain, cycles = levels(edges, {src / b for b in bent})
    top = max(level, key=lambda v: (level[v], str(v))) if level else None
    return edges, level, (chain[top] if top else []), cycles, crate.problems


def self_test():
    """The checker on small made-up crates: each rule must be able to fail."""
    import tempfile

    cases = {
        # a -> b -> c through a re-export in b's parent, plus an inline path; tests ignored.
        "chain": (
            {
                "lib.rs": "mod a;\nmod m;\npub use m::C;\n",
                "a.rs": "use crate::m::B;\nfn f() { let _ = crate::m::c::C; }\n",
                "m/mod.rs": "mod b;\npub(crate) mod c;\npub use b::B;\npub use c::C;\n",
                "m/b.rs": "use super::c::C;\npub struct B;\n",
                "m/c.rs": "pub struct C;\n#[cfg(test)]\nmod tests { use crate::a::*; }\n"
                "#[cfg(test)]\nmod more_tests;\n",
                "m/c/more_tests.rs": "use crate::a::*;\n",
            },
            3,
            0,
            0,
        ),
        "circle": (
            {
                "lib.rs": "mod a;\nmod b;\n",
                "a.rs": "use crate::b::B;\npub struct A;\n",
                "b.rs": "use crate::a::A;\npub struct B;\n",
            },
            None,
            1,
            0,
        ),
        "root import": (
            {
                "lib.rs": "mod a;\nmod b;\npub use b::B;\n",
                "a.rs": "use crate::B;\n",
                "b.rs": "pub struct B;\n",
            },
            2,
            0,
            1,
        ),
        # a -> b -> c with b bent: two levels, not three.
        "bent": (
            {
                "lib.rs": "mod a;\nmod b;\nmod c;\n",
                "a.rs": "use crate::b::B;\n",
                "b.rs": "use crate::c::C;\npub struct B;\n",
                "c.rs": "pub struct C;\n",
            },
            2,
            0,
            0,
        ),
    }
    ok = True
    for name, (files, want_levels, want_cycles, want_problems) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            for path, text in files.items():
                (Path(tmp) / path).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / path).write_text(text)
            global ROOT
            saved, ROOT = ROOT, Path(tmp)
            try:
                bent = {"b.rs"} if name == "bent" else set()
                _, level, chain, cycles, problems = analyse(Path(tmp), bent)
            finally:
                ROOT = saved
        deepest = level[chain[0]] if chain else 0
        got = (deepest if want_levels is not None else None, len(cycles), len(problems))
        if got != (want_levels, want_cycles, want_problems):
            ok = False
            print(f"self-test `{name}`: got (levels, circles, problems) {got}, "
                  f"want {(want_levels, want_cycles, want_problems)}: {problems}")
    return ok


def main():
    if not self_test():
        return 2
    verbose = "--verbose" in sys.argv
    failed = False
    for src, limit in CRATES:
        bent = BENT.get(src, set())
        edges, level, chain, cycles, problems = analyse(ROOT / src, bent)
        rel = lambda p: str(p.relative_to(ROOT / src))
        deepest = level[chain[0]] if chain else 0
        print(f"{src}: {len(edges)} files, {deepest} levels (limit {limit})")
        if chain:
            print("  longest chain: " + " -> ".join(rel(v) for v in chain))
        for b in sorted(bent):
            print(f"  bent: {b} adds no level (a type kept with its impls)")
        if verbose:
            for v in sorted(edges, key=lambda v: (-level.get(v, 0), rel(v))):
                deps = ", ".join(sorted(rel(w) for w in edges[v]))
                print(f"  {level.get(v, '?')} {rel(v)}: {deps}")
        for cycle in cycles:
            failed = True
            print("  IMPORT CIRCLE: " + " <-> ".join(sorted(rel(v) for v in cycle)))
        # The same between top-level modules (a directory counts as one): plan/ may not import
        # render.rs while render.rs imports anything in plan/.
        top_module = lambda p: rel(p).split("/")[0].removesuffix(".rs")
        module_edges = {}
        for v, ws in edges.items():
            module_edges.setdefault(top_module(v), set()).update(
                top_module(w) for w in ws if top_module(w) != top_module(v)
            )
        for cycle in levels(module_edges)[2]:
            failed = True
            print("  MODULE CIRCLE: " + " <-> ".join(sorted(cycle)))
        if deepest > limit:
            failed = True
            print(f"  TOO DEEP: {deepest} levels, at most {limit}")
        for problem in problems:
            failed = True
            print("  " + problem)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
