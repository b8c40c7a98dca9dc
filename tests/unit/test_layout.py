"""The source tree's shape, as issues 20 and 32 set it: small modules, names that say
which is which (no two modules, no two classes of one name), no import cycles. Each
check names what breaks it and where."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import grimp

SRC = Path(__file__).parents[2] / "src" / "jobrelay"
MAX_LINES = 500
# A package's own files, whose names say what the package is, not what is in it.
PACKAGE_FILES = {"__init__.py", "__main__.py"}


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(SRC)): n
        for path in _modules()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these by concern: {long}"


def test_no_two_modules_share_a_name() -> None:
    where: dict[str, list[str]] = collections.defaultdict(list)
    for path in _modules():
        if path.name not in PACKAGE_FILES:
            where[path.name].append(str(path.relative_to(SRC)))
    repeated = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not repeated, f"rename so a file's name says what it is: {repeated}"


def test_no_two_classes_share_a_name() -> None:
    found: dict[str, list[str]] = collections.defaultdict(list)
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(str(path.relative_to(SRC)))
    repeated = {name: where for name, where in found.items() if len(where) > 1}
    assert not repeated, f"one class per name: {repeated}"


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module and its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _names_a_kind(text: str, kinds: frozenset[str], labels: frozenset[str]) -> bool:
    """Whether a string literal is a kind's name, or holds one of its pods' labels (an
    unprefixed label only as the whole text or a selector's key)."""
    if text in kinds:
        return True
    return any(
        (label in text) if "/" in label else (text == label or text.startswith(f"{label}="))
        for label in labels
    )


def kind_findings(root: Path = SRC) -> list[str]:
    """Each string literal of the modules under ``root`` but outside its kinds/ (docstrings
    aside) that names a kind the adapters know, or a label of their pods, as
    ``path:line: text``."""
    from jobrelay.kinds.catalog import DEDICATED

    kinds = frozenset(kind.ref.kind for kind in DEDICATED.values())
    labels = frozenset(label for kind in DEDICATED.values() for label in kind.pod_labels)
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] == "kinds":
            continue
        tree = ast.parse(path.read_text())
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and _names_a_kind(node.value, kinds, labels)
            ):
                found.append(f"{relative}:{node.lineno}: {node.value[:60]!r}")
    return sorted(found)


def test_only_the_kinds_adapters_name_a_kind_or_its_pods_labels() -> None:
    """A kind's name or a label of its pods written anywhere but in kinds/ is a kind fact
    said twice: ask the kind's adapter (kinds/base.py: WorkloadKind) instead."""
    found = kind_findings()
    assert not found, "take these from the kinds' adapters:\n" + "\n".join(found)


def test_the_kind_check_finds_a_kind_name_and_a_pod_label(tmp_path: Path) -> None:
    (tmp_path / "relayapi").mkdir()
    (tmp_path / "kinds").mkdir()
    (tmp_path / "relayapi" / "probe.py").write_text(
        'KIND = "RayJob"\nSELECTOR = f"batch.kubernetes.io/controller-uid={1}"\n'
        'LEGACY = "job-name"\nFINE = "a RayJob"\n'
        'def f() -> None:\n    """The ray.io/cluster label, in a docstring."""\n'
    )
    (tmp_path / "kinds" / "adapter.py").write_text('KIND = "RayJob"\n')
    found = kind_findings(tmp_path)
    assert [line.split(": ", 1)[0] for line in found] == [
        "relayapi/probe.py:1", "relayapi/probe.py:2", "relayapi/probe.py:3",
    ]  # fmt: skip


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
