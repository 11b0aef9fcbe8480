"""The wheel installs one top-level package, `fertility`: trainer/ and eval/ go in as
`fertility.trainer` and `fertility.eval` (a top-level `trainer` clashes with the PyPI
package of that name; `eval` is a builtin's name)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_holds_fertility_alone(tmp_path):
    # Built from a copy: setuptools leaves build/ and *.egg-info in the tree it builds.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("fertility", "trainer", "eval"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    # --no-build-isolation: the build uses the installed setuptools (offline, no download)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(tmp_path), str(src)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("fertility-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
        assert z.read(info).decode().split() == ["fertility"]
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"fertility"}
    # the trainer and eval modules are there, under the namespace, with the package data
    for name in (
        "fertility/trainer/run.py",
        "fertility/eval/run.py",
        "fertility/corpus/iso639.txt",
        "fertility/default_policy.toml",
        "fertility/py.typed",  # PEP 561: type checkers read the package's own annotations
        "fertility/schemas/report.schema.json",  # the JSON Schemas of the versioned outputs
        "fertility/schemas/gate.schema.json",
    ):
        assert name in names, name
