"""No function of fertility, trainer or eval is over MAX_LINES lines: a command reads as its
stages (resolve the inputs, measure, judge, write), each a named function a reader finds from
the command, not as one long body.

A function's lines run from its `def` to its last line, its docstring and comments included;
a nested function counts in its own right and within the function around it. Read from the
source with `ast`, not by importing it.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("fertility", "trainer", "eval")  # folders; trainer/ and eval/ install in fertility
MAX_LINES = 100


def long_functions(path: Path, limit: int = MAX_LINES) -> list[str]:
    """`file:line name (N lines)` of every function in `path` over `limit` lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [
        (node.lineno, node)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]
    return [
        f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{node.lineno} "
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for _, node in sorted(found, key=lambda x: x[0])
    ]


def test_no_function_is_over_the_limit():
    sources = [
        p
        for package in PACKAGES
        for p in sorted((REPO / package).rglob("*.py"))
        if "__pycache__" not in p.parts
    ]
    assert len(sources) > 50  # the packages were found
    assert [f for p in sources for f in long_functions(p)] == []


def test_the_check_finds_a_long_function(tmp_path):
    def body(indent: str, lines: int) -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(lines))

    src = tmp_path / "x.py"
    # f: exactly MAX_LINES lines (its def and MAX_LINES - 1 more), allowed; g: one more; a
    # method (h) and a nested function (k, and so outer too) are found alike
    src.write_text(
        "def f():\n"
        + body("    ", MAX_LINES - 1)
        + "def g():\n"
        + body("    ", MAX_LINES)
        + "class C:\n    def h(self):\n"
        + body("        ", MAX_LINES)
        + "def outer():\n    def k():\n"
        + body("        ", MAX_LINES)
    )
    g = 1 + MAX_LINES  # f takes lines 1 to MAX_LINES
    h = g + MAX_LINES + 2  # after g's lines and `class C:`
    outer = h + MAX_LINES + 1
    assert [x.split(":", 1)[1] for x in long_functions(src)] == [
        f"{g} g ({MAX_LINES + 1} lines)",
        f"{h} h ({MAX_LINES + 1} lines)",
        f"{outer} outer ({MAX_LINES + 2} lines)",
        f"{outer + 1} k ({MAX_LINES + 1} lines)",
    ]
