"""The source tree's shape, as issue 20 set it: small modules, names that say which is
which, no import cycles. Each check names what breaks it and where."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import grimp

SRC = Path(__file__).parents[2] / "src" / "jobrelay"
MAX_LINES = 500
# TEMPORARY (issue 32): other helpers are splitting these three in their own branches;
# the lead removes this exemption once they are merged. Nothing else may join it.
SPLIT_ELSEWHERE = {
    "fleet/workerevents_rules.py",
    "controller/relay/queue_gate.py",
    "controller/runner.py",
}
# Names that once meant several things at once; each may exist at most once.
UNIQUE_MODULES = {"relayapi.py", "health.py", "registry.py", "jobset.py", "fleet.py"}
UNIQUE_CLASSES = {"WorkerState", "Verdict"}


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(SRC)): n
        for path in _modules()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
        and str(path.relative_to(SRC)) not in SPLIT_ELSEWHERE
    }
    assert not long, f"split these by concern: {long}"


def test_module_names_that_meant_several_things_exist_once() -> None:
    names = collections.Counter(path.name for path in _modules())
    repeated = {name: names[name] for name in UNIQUE_MODULES if names[name] > 1}
    assert not repeated, f"rename so a file's name says what it is: {repeated}"


def test_class_names_that_meant_several_things_exist_once() -> None:
    found: dict[str, list[str]] = collections.defaultdict(list)
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name in UNIQUE_CLASSES:
                found[node.name].append(str(path.relative_to(SRC)))
    repeated = {name: where for name, where in found.items() if len(where) > 1}
    assert not repeated, f"one class per name: {repeated}"


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every set of modules that import each other in a ring (Tarjan's components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        # Iterative, so a deep import chain cannot exhaust the recursion limit.
        work = [(module, iter(sorted(graph.find_modules_directly_imported_by(module))))]
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        while work:
            current, edges = work[-1]
            for imported in edges:
                if imported not in index:
                    index[imported] = low[imported] = len(index)
                    stack.append(imported)
                    on_stack.add(imported)
                    work.append(
                        (imported, iter(sorted(graph.find_modules_directly_imported_by(imported))))
                    )
                    break
                if imported in on_stack:
                    low[current] = min(low[current], index[imported])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[current])
                if low[current] == index[current]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == current:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles() -> None:
    assert _cycles(grimp.build_graph("jobrelay")) == []


def test_the_cycle_finder_finds_a_ring() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(module)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.z")
    graph.add_import(importer="a.z", imported="a.x")
    assert _cycles(graph) == [["a.x", "a.y", "a.z"]]
