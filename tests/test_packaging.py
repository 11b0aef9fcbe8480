"""The wheel installs one top-level package, `fertility`: trainer/ and eval/ go in as
`fertility.trainer` and `fertility.eval` (a top-level `trainer` clashes with the PyPI
package of that name; `eval` is a builtin's name)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
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
        "fertility/corpus/iso639-pairs.txt",  # the reference en is eng_Latn (corpus.labels)
        "fertility/default_policy.toml",
        "fertility/py.typed",  # PEP 561: type checkers read the package's own annotations
        "fertility/schemas/report.schema.json",  # the JSON Schemas of the versioned outputs
        "fertility/schemas/gate.schema.json",
    ):
        assert name in names, name


# A python that sees the environment's libraries (torch, numpy, ...) but not this package's
# install: -S skips site.py, so no .pth file (the editable install's finder) is read, and the
# one folder that holds the libraries goes on sys.path by hand. PYTHONPATH is emptied.
NOT_INSTALLED = [sys.executable, "-S", "-c"]
LIBS = sysconfig.get_paths()["purelib"]


def test_a_benchmark_runs_from_a_plain_checkout():
    """benchmarks/pretrain_gpu.py imports fertility.trainer from trainer/ (benchmarks/
    checkout.py), as its docstring promises, with nothing installed: the H200 run of #37
    stopped at `No module named 'fertility.trainer'`."""
    script = f"""
import runpy, sys
sys.path.append({LIBS!r})
sys.path.insert(0, {str(REPO)!r})
try:  # the failure of #37: the plain checkout alone does not map trainer/
    import fertility.trainer
    raise SystemExit("fertility.trainer imported without the checkout helper")
except ModuleNotFoundError:
    pass
sys.argv = ["pretrain_gpu.py", "--help"]
try:
    runpy.run_path({str(REPO / "benchmarks" / "pretrain_gpu.py")!r}, run_name="__main__")
except SystemExit as e:
    assert e.code == 0, e.code
for name in ("fertility.trainer.loop", "fertility.eval"):
    __import__(name)
    print(name, sys.modules[name].__file__)
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        NOT_INSTALLED + [script], capture_output=True, text=True, cwd=REPO, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "--preset" in out.stdout  # the benchmark's own --help, after its imports
    files = dict(
        line.split(" ", 1) for line in out.stdout.splitlines() if line.startswith("fertility.")
    )
    assert Path(files["fertility.trainer.loop"]) == REPO / "trainer" / "loop.py"
    assert Path(files["fertility.eval"]) == REPO / "eval" / "__init__.py"


def test_pretrain_and_eval_run_without_the_optional_libraries(tmp_path):
    """A GPU machine with PyTorch preinstalled and no network (#37) has no plotly, zstandard,
    datatrove or tiktoken: `fertility pretrain` and `fertility eval` import none of them.
    sitecustomize.py marks each as absent (None in sys.modules: `import` raises
    ModuleNotFoundError and importlib.util.find_spec answers None, as without the package)."""
    from tests.trainer.tokfixture import CORPUS, train_tokenizer

    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(
        "import sys\n"
        "for name in ('plotly', 'zstandard', 'datatrove', 'tiktoken'):\n"
        "    sys.modules[name] = None\n"
    )
    tok = train_tokenizer(tmp_path / "tok.json")
    cfg = tmp_path / "fast.toml"
    cfg.write_text('preset = "tiny"\nseq_len = 64\nmicro_batch = 4\nwarmup_steps = 1\n')
    env = {**os.environ, "PYTHONPATH": str(block), "OMP_NUM_THREADS": "1"}
    cli = [sys.executable, "-m", "fertility"]
    probe = subprocess.run(
        [sys.executable, "-c", "import plotly"], env=env, capture_output=True, text=True
    )
    assert "ModuleNotFoundError" in probe.stderr  # the blocker is in force
    run = tmp_path / "run"
    trained = subprocess.run(
        cli + ["pretrain", *CORPUS, "-t", tok, "--out", str(run), "--config", str(cfg)]
        + ["--steps", "2", "--device", "cpu", "--force", "--quiet"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    scored = subprocess.run(
        cli + ["eval", str(run), "--bootstrap", "50", "--format", "json"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["heldout"]["tokens"] > 0
