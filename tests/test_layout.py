"""The layout keeps one direction: no import cycle between the modules of fertility, trainer
and eval, nor between its packages (fertility.fix, fertility.report, ...; a top-level module
such as fertility.gate is one of its own); no module imports one of a later stage of docs/ARCHITECTURE.md's picture; no module
imports another module's underscore name; nothing under trainer/ or eval/ imports the command
line (fertility.cli).

Every import of a project module is an edge of the graph: at module level or inside a
function, under TYPE_CHECKING, and deferred. A `# deferred: <why>` comment says why an import
waits until it runs (an optional or heavy dependency, the command line's start-up, which
loads the library only when a command runs, or a name a test replaces) and excuses nothing
here: an import deferred to dodge a cycle is still the cycle. The graph is read from the
source with `ast`, not by importing it, so an import that only runs in a function is seen.

The picture (the first diagram of docs/ARCHITECTURE.md) is read as stages, top to bottom:
each row that names packages or modules (`corpus/`, `gate.py`, `fix/text.py`; paths as the
package installs, `trainer/` is fertility.trainer; text in parentheses is a comment) is one
stage. A module's stage is the row naming its longest path (`fix/text.py` before
`fix/`); modules of one row may import each other, a row never imports a row below it.
"""

from __future__ import annotations

import ast
import re
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


def imports(name: str) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names taken from it) for every project import, deferred ones
    too."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [
                (node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "fertility"
            ]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] == "fertility"
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


def packages(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph of the top-level packages and modules (fertility.measure.card is `measure`,
    fertility itself `__init__`): an edge where a module of one imports a module of another."""

    def top(name: str) -> str:
        return name.split(".")[1] if "." in name else "__init__"

    out: dict[str, set[str]] = {top(n): set() for n in edges}
    for a, bs in edges.items():
        out[top(a)] |= {top(b) for b in bs} - {top(a)}
    return out


def floors(edges: dict[str, set[str]]) -> dict[str, int]:
    """node -> its floor: 1 for one that imports nothing, else one above the highest floor it
    imports; the nodes of a cycle share one."""
    home = {n: n for n in edges}
    for comp in cycles(edges):
        home.update((n, comp[0]) for n in comp)
    floor = dict.fromkeys(edges, 1)
    for _ in edges:  # the longest chain has at most len(edges) nodes
        for a, bs in edges.items():
            for b in bs:
                if home[a] != home[b]:
                    floor[home[a]] = max(floor[home[a]], floor[home[b]] + 1)
    return {n: floor[home[n]] for n in edges}


def test_floors_stand_above_what_they_import():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"b", "d"}, "d": set(), "e": {"d"}}
    assert floors(edges) == {"a": 3, "b": 2, "c": 2, "d": 1, "e": 2}  # b and c: one cycle
    modules = {
        "fertility": {"fertility.gate"},
        "fertility.gate": {"fertility.measure.card"},
        "fertility.measure.card": set(),
    }
    assert packages(modules) == {"__init__": {"gate"}, "gate": {"measure"}, "measure": set()}


def test_the_graph_sees_every_package():
    edges = graph()
    assert {"fertility.measure", "fertility.tokenizers", "fertility.trainer.run"} <= set(edges)
    assert "fertility.eval.run" in edges
    # the measuring stage reads the corpus and the tokenizers, never the other way round
    assert "fertility.corpus" in edges["fertility.measure.run"]
    assert "fertility.measure.passes" in edges["fertility.measure.parallel"]


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_between_packages():
    """Packages import one way too: a module of one never imports a module of another that
    imports back, however far apart the two modules are inside their packages."""
    assert cycles(packages(graph())) == []


def test_the_package_check_finds_a_loop_the_module_graph_does_not_have():
    """As fix <-> report until #32: fix/run.py wrote its HTML through report/html.py while
    report/fix.py printed fix's results, importing fix/normalize.py; no module cycle."""
    edges = {
        "fertility.fix.run": {"fertility.report.html"},
        "fertility.fix.normalize": set(),
        "fertility.report.html": set(),
        "fertility.report.fix": {"fertility.fix.normalize"},
        "fertility.gate": set(),
        "fertility": {"fertility.gate", "fertility.fix.run"},
    }
    assert cycles(edges) == []
    assert cycles(packages(edges)) == [["fix", "report"]]
    del edges["fertility.report.fix"]
    assert cycles(packages(edges)) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_import_of_another_modules_underscore_name(name):
    bad = []
    for line, module, names in imports(name):
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
        for line, module, _ in imports(name)
        if module == "fertility.cli" or module.startswith("fertility.cli.")
    ]
    assert bad == []


def test_the_command_line_check_sees_a_deferred_import(tmp_path, monkeypatch):
    src = tmp_path / "x.py"
    src.write_text("def f():\n    # deferred: heavy\n    from fertility.cli import main\n")
    monkeypatch.setitem(MODULES, "fertility.trainer.x", src)
    assert [m for _, m, _ in imports("fertility.trainer.x")] == ["fertility.cli"]


def test_a_deferred_import_that_closes_a_cycle_is_a_cycle(tmp_path, monkeypatch):
    """As measure.card's deferred imports of gate and findings were until #32: a function-level
    import under a `# deferred:` comment is an edge like any other."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from fertility.x_b import g\n")
    b.write_text(
        "def g():\n    # deferred: fertility.x_a imports this module\n"
        "    from fertility.x_a import f\n"
    )
    monkeypatch.setitem(MODULES, "fertility.x_a", a)
    monkeypatch.setitem(MODULES, "fertility.x_b", b)
    edges = graph()
    assert edges["fertility.x_b"] == {"fertility.x_a"}
    assert cycles(edges) == [["fertility.x_a", "fertility.x_b"]]


# ---------------------------------------------------------------- the picture's stages

ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"
# a package (`corpus/`) or module (`gate.py`, `fix/text.py`) as the picture names it
PATH = re.compile(r"(?<![\w./])((?:[a-z_]+/)*[a-z_]+(?:/|\.py))(?![\w/.])")


def fenced(heading: str | None = None) -> list[str]:
    """The lines of the first ``` block of docs/ARCHITECTURE.md after `heading` (a line of
    its own), or of the first block of all."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    if heading is not None:
        text = text.split(f"\n{heading}\n", 1)[1]
    return text.split("```", 2)[1].splitlines()


def stages(lines: list[str]) -> list[list[str]]:
    """The picture's stages, top to bottom: the paths each row names outside parentheses."""
    rows = [PATH.findall(re.sub(r"\([^)]*\)", "", line)) for line in lines]
    return [row for row in rows if row]


def holds(path: str, name: str) -> bool:
    """Whether the picture's `path` holds module `name`: a package its modules, a `.py` itself
    (`__init__.py` is the package fertility alone)."""
    parts = path.removesuffix("/").removesuffix(".py").split("/")
    module = ".".join(["fertility", *(p for p in parts if p != "__init__")])
    return name == module or (path.endswith("/") and name.startswith(module + "."))


def stage_of(rows: list[list[str]], names) -> dict[str, int]:
    """module -> the index of the row naming the longest path that holds it (absent: none)."""
    out = {}
    for name in names:
        named = [(len(p), i) for i, row in enumerate(rows) for p in row if holds(p, name)]
        if named:
            out[name] = max(named)[1]
    return out


def later_imports(edges: dict[str, set[str]], stage: dict[str, int]) -> list[str]:
    """`a -> b` for every import of a module of a later stage than the importer's."""
    return [
        f"{a} (stage {stage[a]}) -> {b} (stage {stage[b]})"
        for a in sorted(edges)
        for b in sorted(edges[a])
        if stage[b] > stage[a]
    ]


PICTURE = stages(fenced())


def test_the_picture_names_every_module_and_nothing_else():
    stage = stage_of(PICTURE, MODULES)
    assert sorted(set(MODULES) - set(stage)) == []  # every module is on a row
    named = [p for row in PICTURE for p in row]
    assert [p for p in named if not any(holds(p, m) for m in MODULES)] == []  # no stale path
    assert len(named) == len(set(named))  # and each once


def test_no_module_imports_a_later_stage_of_the_picture():
    """Deferred imports included: the picture is the order the code keeps."""
    assert later_imports(graph(), stage_of(PICTURE, MODULES)) == []


def test_the_stage_check_reads_a_picture_and_finds_an_import_of_a_later_stage():
    rows = stages(
        [
            " corpus/  (Documents, read by measure/)",
            "   │",
            " measure/ engine/   the counts",
            "   ▼",
            " report/ engine/tokenize.py  text (HTML)",
            " report/fix.py __init__.py",
        ]
    )
    assert rows == [
        ["corpus/"],
        ["measure/", "engine/"],
        ["report/", "engine/tokenize.py"],
        ["report/fix.py", "__init__.py"],
    ]
    stage = {
        "fertility": 3,  # __init__.py: the package's own module, not the modules below it
        "fertility.corpus.walk": 0,
        "fertility.measure": 1,
        "fertility.engine": 1,
        "fertility.engine.tokenize": 2,  # the longer path wins
        "fertility.report.fix": 3,
        "fertility.report.html": 2,
    }
    names = list(stage)
    assert stage_of(rows, names) == stage
    edges = {n: set() for n in names}
    edges["fertility.engine"] = {"fertility.measure"}  # the same stage: allowed
    edges["fertility.report.html"] = {"fertility.corpus.walk"}  # an earlier one: allowed
    assert later_imports(edges, stage) == []
    edges["fertility.corpus.walk"] = {"fertility.engine.tokenize"}  # a later one
    assert later_imports(edges, stage) == [
        "fertility.corpus.walk (stage 0) -> fertility.engine.tokenize (stage 2)"
    ]


def test_the_module_map_names_every_package_and_top_level_module():
    """Each folder and top-level module of fertility (trainer/ and eval/ too) begins a line of
    ARCHITECTURE.md's module map."""
    starts = {line.split()[0] for line in fenced("## Module map") if line.strip()}
    tops = set()
    for name, path in MODULES.items():
        parts = name.split(".")
        if len(parts) > 2 or (len(parts) == 2 and path.name == "__init__.py"):
            tops.add(parts[1] + "/")  # a package
        elif len(parts) == 2:
            tops.add(parts[1] + ".py")
    assert sorted(tops - starts) == []


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


if __name__ == "__main__":
    # `python tests/test_layout.py`: the package structure as floors, top down, and what each
    # imports (docs/ARCHITECTURE.md, "Structure before and after #32", drew it so)
    EDGES = graph()
    PACKAGES = packages(EDGES)
    FLOORS = floors(PACKAGES)
    for node in sorted(PACKAGES, key=lambda n: (-FLOORS[n], n)):
        print(f"floor {FLOORS[node]:2}  {node:<11} -> {' '.join(sorted(PACKAGES[node]))}")
    print("package cycles:", cycles(PACKAGES) or "none")
    print("module cycles:", cycles(EDGES) or "none")
