"""The weightlift package's own modules import each other without a cycle.

A cycle (weightlift._tp <-> weightlift._group was one, the back edge hidden
in a function body) makes the import order matter and a module half
initialised when the other reads it. The graph is read from the source
(python/weightlift) with ast: every ``import`` and ``from ... import`` of a
package module, at the top of a file or inside a function, is an edge. The
compiled extension (weightlift._native) has no imports of its own and is
left out.
"""

import ast
import os

import pytest

from conftest import ROOT

PACKAGE_DIR = os.path.join(ROOT, "python", "weightlift")


def _modules(pkg_dir):
    """{dotted name: path} of every .py file under PKG_DIR."""
    top = os.path.dirname(pkg_dir)
    out = {}
    for root, _, files in os.walk(pkg_dir):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                name = os.path.relpath(path, top)[:-3].replace(os.sep, ".")
                if name.endswith(".__init__"):
                    name = name[:-len(".__init__")]
                out[name] = path
    return out


def _edges(name, path, mods):
    """The package modules NAME (at PATH) imports, anywhere in the file."""
    is_pkg = path.endswith("__init__.py")
    here = name if is_pkg else name.rsplit(".", 1)[0]
    out = set()

    def add(target):
        if target in mods and target != name:
            out.add(target)

    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                for k in range(1, len(parts) + 1):
                    add(".".join(parts[:k]))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = ".".join(base[:len(base) - (node.level - 1)])
                module = base + ("." + node.module if node.module else "")
            else:
                module = node.module or ""
            if node.module:  # `from . import x` imports x, not "."
                add(module)
            for a in node.names:
                sub = module + "." + a.name
                if sub in mods:
                    add(sub)
                elif a.name != "_native" and module in mods:
                    add(module)  # a name defined by the module itself
    return out


def _cycles(graph):
    """The strongly connected components of GRAPH with more than one node
    (Tarjan), each sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _graph(pkg_dir):
    mods = _modules(pkg_dir)
    return {m: _edges(m, p, mods) for m, p in mods.items()}


def test_package_imports_have_no_cycle():
    graph = _graph(PACKAGE_DIR)
    assert "weightlift._tp" in graph and "weightlift._group" in graph
    cycles = _cycles(graph)
    detail = "; ".join(
        " <-> ".join(c) + " (" + ", ".join(
            f"{a} imports {b}" for a in c for b in sorted(graph[a]) if b in c)
        + ")" for c in cycles)
    assert not cycles, f"import cycles in python/weightlift: {detail}"


def test_the_checker_sees_a_cycle_hidden_in_a_function(tmp_path):
    """The check itself: a back edge inside a function body is found."""
    pkg = tmp_path / "weightlift"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_a.py").write_text("from . import _b\n")
    (pkg / "_b.py").write_text("def f():\n    from ._a import g\n")
    (pkg / "_c.py").write_text("from . import _native\nimport weightlift._a\n")
    assert _cycles(_graph(str(pkg))) == [["weightlift._a", "weightlift._b"]]
    (pkg / "_b.py").write_text("def f():\n    pass\n")
    assert _cycles(_graph(str(pkg))) == []


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
