"""The runtime's imports form no cycle; the operator core imports none of its fast paths.

Every module of ``wql/runtime`` is read with ``ast`` and every import
statement counts -- also those under ``TYPE_CHECKING`` and inside
functions, because a cycle through a type-only or deferred import is the
same knot in the layering. An import names the module it loads
(``from wql.runtime import snapshot`` names ``wql.runtime.snapshot``), and
so do the packages Python initialises on the way there from outside them
(``wql.runtime.vectorized`` for ``wql.runtime.columnar`` importing
``wql.runtime.vectorized.kernels``); a package's modules importing each
other inside it are not edges to the package (its ``__init__`` is already
running).

``wql.runtime.window_operator`` is the core: the plain Flink port and the
interface its fast paths (``fastpath``, ``columnar``, ``vectorized``) work
through. The paths import the core; ``operator_factory`` picks them and
installs them in the core when ``wql.runtime`` is imported.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAST_PATHS = ("wql.runtime.fastpath", "wql.runtime.columnar", "wql.runtime.vectorized")


def module_graph(package_dir: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (by ``ast``, every import statement)."""
    names: dict[Path, str] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[path] = ".".join([package, *parts])
    modules = set(names.values())
    graph: dict[str, set[str]] = {}
    for path, name in names.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, name, is_package)
                for alias in node.names:
                    child = f"{base}.{alias.name}"
                    edges.add(child if child in modules else base)
        # the packages initialised on the way to each target, from outside them
        edges |= {p for e in edges for p in _parents(e) if not _inside(name, p)}
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    # a package's __init__ is its own package; a module's package is its parent
    keep = len(parts) - node.level + (1 if is_package else 0)
    return ".".join(parts[:keep] + ([node.module] if node.module else []))


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found is not None:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found is not None:
                return found
    return None


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def runtime_graph() -> dict[str, set[str]]:
    return module_graph(ROOT / "wql" / "runtime", "wql.runtime")


def test_the_runtime_imports_have_no_cycle() -> None:
    graph = runtime_graph()
    assert "wql.runtime.window_operator" in graph and "wql.runtime.vectorized.apply" in graph
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or ())


def test_the_operator_core_imports_none_of_its_fast_paths() -> None:
    graph = runtime_graph()
    reached = _reachable(graph, "wql.runtime.window_operator")
    assert not {m for m in reached if m.startswith(FAST_PATHS)}
    assert "wql.runtime.operator_factory" not in reached
    # the paths import the core, the factory imports both
    assert "wql.runtime.window_operator" in graph["wql.runtime.fastpath"]
    assert {"wql.runtime.window_operator", "wql.runtime.columnar"} <= graph[
        "wql.runtime.operator_factory"
    ]


def test_the_walk_finds_a_cycle_and_resolves_relative_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg import a\n")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import b\n"
    )
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    import pkg.c\n")
    (pkg / "c.py").write_text("from pkg.a import x\n")
    graph = module_graph(pkg, "pkg")
    assert graph["pkg"] == {"pkg.a"}
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.b"}  # importing pkg.sub.b runs pkg.sub first
    assert graph["pkg.sub"] == {"pkg.sub.b"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub", "pkg.sub.b", "pkg.c", "pkg.a"]
    (pkg / "c.py").write_text("x = 1\n")
    assert find_cycle(module_graph(pkg, "pkg")) is None
    # a cycle only through a package's __init__: pkg.d imports pkg.sub.b, whose package
    # pkg.sub imports pkg.d
    (pkg / "sub" / "__init__.py").write_text("from . import b\nimport pkg.d\n")
    (pkg / "d.py").write_text("from pkg.sub.b import f\n")
    cycle = find_cycle(module_graph(pkg, "pkg"))
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"pkg.d", "pkg.sub"}


def test_an_operator_takes_its_fast_paths_whatever_module_was_imported() -> None:
    # importing the core alone initialises wql.runtime first, which installs the paths
    code = (
        "from wql.runtime.window_operator import WindowOperator\n"
        "from wql.runtime.config import OperatorConfig\n"
        "from wql.runtime.assigners import SlidingWindows\n"
        "from wql.runtime.aggregates import AggregateSpec\n"
        "c = OperatorConfig(SlidingWindows(10, 2), (AggregateSpec('COUNT_STAR'),))\n"
        "print(type(WindowOperator(c)._path).__name__, WindowOperator(c, fast=False)._path)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["ColumnarWindows", "None"]
