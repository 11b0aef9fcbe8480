"""The layout keeps one direction: no import cycle between the modules of fertility, trainer
and eval, no module imports another module's underscore name, and nothing under trainer/ or
eval/ imports the command line (fertility.cli), not even deferred.

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
PACKAGES = ("fertility", "trainer", "eval")  # folders; trainer/ and eval/ install in fertility


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] in ("trainer", "eval"):  # pyproject.toml's package-dir
        parts.insert(0, "fertility")
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
                (node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "fertility"
            ]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] == "fertility"
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
    assert {"fertility.measure", "fertility.tokenizers", "fertility.trainer.run"} <= set(edges)
    assert "fertility.eval.run" in edges
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


@pytest.mark.parametrize(
    "name", sorted(m for m in MODULES if m.startswith(("fertility.trainer", "fertility.eval")))
)
def test_trainer_and_eval_never_import_the_command_line(name):
    """The command line calls the trainer, never the other way round (not even deferred):
    what both need (Terminated, the errors) lives in fertility.errors."""
    bad = [
        f"{line}: {module}"
        for line, module, _ in imports(name, deferred_too=True)
        if module == "fertility.cli" or module.startswith("fertility.cli.")
    ]
    assert bad == []


def test_the_command_line_check_sees_a_deferred_import(tmp_path, monkeypatch):
    src = tmp_path / "x.py"
    src.write_text("def f():\n    # deferred: heavy\n    from fertility.cli import main\n")
    monkeypatch.setitem(MODULES, "fertility.trainer.x", src)
    assert [m for _, m, _ in imports("fertility.trainer.x", deferred_too=True)] == ["fertility.cli"]
    assert imports("fertility.trainer.x") == []  # (the cycle check alone would not see it)


def declared_kinds() -> frozenset[str]:
    """The tokenizer kinds `fertility.tokenizers.base.Kind` declares, read from its source."""
    tree = ast.parse((REPO / "fertility" / "tokenizers" / "base.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["Kind"]:
            return frozenset(
                c.value
                for c in ast.walk(node.value)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            )
    raise AssertionError("fertility/tokenizers/base.py declares no Kind")


KINDS = declared_kinds()


def _is_kind(node: ast.AST) -> bool:
    """`x.kind`, `x["kind"]`, `x.get("kind")` or `getattr(x, "kind")`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    if isinstance(node, ast.Call) and node.args:
        first = node.args[1] if len(node.args) > 1 and ast.unparse(node.func) == "getattr" else None
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            first = node.args[0]
        return isinstance(first, ast.Constant) and first.value == "kind"
    return False


def _strings(node: ast.AST) -> list[str]:
    """The string literals of a literal, or among the items of a tuple/list/set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def kind_comparisons(path: Path) -> list[str]:
    """Comparisons that tell tokenizer kinds (or fix's training libraries, whose traits
    fertility.fix.config.BACKENDS declares) apart by name: a literal naming one (or a
    tuple/list/set holding one), and a `match` on a kind (`x.kind`, `x["kind"]`, ...).
    (numpy's `dtype.kind` is compared with its own letters.)"""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Match) and _is_kind(node.subject):
            bad.append(f"{node.lineno}: match {ast.unparse(node.subject)}")
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        named = [s for o in operands for s in _strings(o) if s in KINDS]
        if named:
            bad.append(f"{node.lineno}: {ast.unparse(node)}")
    return bad


@pytest.mark.parametrize(
    "name", sorted(m for m in MODULES if not m.startswith("fertility.tokenizers"))
)
def test_no_kind_string_is_compared_outside_the_tokenizers_package(name):
    """What differs between tokenizer formats is declared once, in fertility.tokenizers.kinds
    (a capability, the extension, the reload, the HF conversion): nothing else asks a
    tokenizer's kind by name. Comparing a report row's kind with the name PRETOKENIZER (a
    ceiling or a tokenizer) is not a comparison with a literal."""
    assert kind_comparisons(MODULES[name]) == []


def test_the_kind_check_finds_kind_comparisons(tmp_path):
    assert {"hf", "sentencepiece", "tiktoken", "tekken", "pretokenizer"} <= KINDS
    src = tmp_path / "x.py"
    src.write_text(
        "a = tok.kind == 'hf'\n"
        "b = t.kind in ('tiktoken', 'tekken', PRETOKENIZER)\n"
        "c = bpe.source != 'tekken'\n"
        "d = d.get('kind') == 'sentencepiece'\n"
        "e = t.kind != PRETOKENIZER\n"  # a name: allowed
        "f = config.backend == 'sentencepiece'\n"  # fix's library: its traits are declared
        "match tok.kind:\n    case 'hf':\n        pass\n"
    )
    found = sorted(int(b.split(":")[0]) for b in kind_comparisons(src))
    assert found == [1, 2, 3, 4, 6, 7]
