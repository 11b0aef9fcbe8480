"""The layout keeps one direction: no import cycle between the modules of fertility, trainer
and eval, and no module imports another module's underscore name.

Every import counts as an edge of the graph, at module level or inside a function, except one
marked `# deferred: <why>` (on its line, or above a run of imports): an optional or heavy
dependency loaded only when used. The graph is read
from the source with `ast`, not by importing it, so an import that only runs in a function
is still seen.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("fertility", "trainer", "eval")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources() -> dict[str, Path]:
    return {
        module_name(p): p
        for package in PACKAGES
        for p in sorted((REPO / package).rglob("*.py"))
        if "__pycache__" not in p.parts
    }


MODULES = sources()


def deferred_lines(tree: ast.Module, lines: list[str]) -> set[int]:
    """First lines of the imports a `# deferred:` comment covers: one on the statement's own
    lines, or one on the line above a run of adjacent imports."""
    out = set()
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            run, prev_end = False, None
            for st in body:
                if not isinstance(st, (ast.Import, ast.ImportFrom)):
                    run, prev_end = False, None
                    continue
                above = st.lineno >= 2 and lines[st.lineno - 2].strip().startswith("# deferred:")
                run = above or (run and prev_end is not None and st.lineno == prev_end + 1)
                own = any("# deferred:" in lines[i] for i in range(st.lineno - 1, st.end_lineno))
                if run or own:
                    out.add(st.lineno)
                prev_end = st.end_lineno
    return out


def imports(name: str, deferred_too: bool = False) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names taken from it) for every project import (those marked
    deferred only with `deferred_too`)."""
    text = MODULES[name].read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    skip = set() if deferred_too else deferred_lines(tree, lines)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and node.lineno not in skip:
            out += [
                (node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] in PACKAGES
            ]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] in PACKAGES
            and node.lineno not in skip
        ):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in MODULES:  # `from package import submodule`
                    out.append((node.lineno, sub, []))
                else:
                    out.append((node.lineno, node.module, [a.name]))
    return out


def graph() -> dict[str, set[str]]:
    return {
        name: {m for _, m, _ in imports(name) if m in MODULES and m != name} for name in MODULES
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_every_package():
    edges = graph()
    assert {"fertility.measure", "fertility.tokenizers", "trainer.run", "eval.run"} <= set(edges)
    # the measuring stage reads the corpus and the tokenizers, never the other way round
    assert "fertility.corpus" in edges["fertility.measure"]
    assert "fertility.measure.passes" in edges["fertility.measure.parallel"]


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_import_of_another_modules_underscore_name(name):
    bad = []
    for line, module, names in imports(name, deferred_too=True):
        if any(part.startswith("_") and not part.startswith("__") for part in module.split(".")):
            bad.append(f"{line}: {module}")
        bad += [
            f"{line}: {module}.{n}"
            for n in names
            if n.startswith("_") and not n.startswith("__") and module != name
        ]
    assert bad == []
