"""Every output of `fertility report` and `fertility gate` from this checkout against another,
file by file, on the real-world fixtures: a change that should change no number (a redesign,
a speed-up) is checked with it.

    python benchmarks/same_outputs.py --base /tmp/old     # a `git worktree` of the tree before

ROOT is $FERTILITY_REALWORLD or ~/.cache/fertility/realworld (tests/realworld/build.py). Each
command runs twice, as `python -P -m fertility.cli` with this checkout's root and then the
base's on PYTHONPATH, from a temporary folder, and its stdout and exit code are compared.
Only the JSON's `settings.switch` and `settings.workers` may differ: the measured start-up
timings by which the pass chose its processes, and what it chose (the results are the same
whichever it chose: tests/measure/test_parallel.py). Prints one
line per command and exits 1 when any differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def commands(root: Path, line: str) -> dict[str, list[str]]:
    """name -> the command's arguments after `fertility` (line: a file of one line)."""
    tok, text, par = root / "tokenizers", str(root / "text"), str(root / "parallel")
    o200k, bpe = str(tok / "o200k_base.tiktoken"), str(tok / "bpe-gpt2")
    mistral, cl100k = str(tok / "mistral" / "tokenizer.model.v1"), str(tok / "cl100k_base.tiktoken")
    three = ["-t", o200k, "-t", mistral, "-t", bpe]
    example = str(HERE / "examples" / "corpus")
    return {
        "one line, table": ["report", line, "-t", o200k, "-q"],
        "one line, json": ["report", line, "-t", o200k, "-q", "--format", "json"],
        "table, 3 tokenizers, -v": ["report", text, *three, "-q", "-v"],
        "json, 3 tokenizers": ["report", text, *three, "-q", "--format", "json"],
        "csv": ["report", text, "-t", bpe, "-q", "--format", "csv"],
        "families, table": ["report", text, "-q"],
        "families, json": ["report", text, "-q", "--format", "json"],
        "example, 2 tokenizers": ["report", example, "-t", bpe, "-t", cl100k, "-q", "-v"],
        "parallel, json": ["report", par, "-t", bpe, "-t", o200k, "--parallel", "-q", "--format", "json"],
        "parallel, table": ["report", par, "-t", bpe, "-t", o200k, "--parallel", "-q", "-v"],
        "precision": ["report", text, "-t", bpe, "--precision", "0.02", "--seed", "1", "-q", "--format", "json"],
        "gate": ["gate", text, "-t", bpe, "-q"],
        "gate, llama3": ["gate", text, "-t", f"{tok / 'llama3' / 'tokenizer.model'}#llama3", "-q"],
        "gate, baseline": ["gate", text, "-t", bpe, "--baseline", o200k, "-q"],
        "gate, baseline, json": ["gate", example, "-t", cl100k, "--baseline", bpe, "-q", "--format", "json"],
    }  # fmt: skip


def run(tree: Path, argv: list[str], cwd: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-P", "-m", "fertility.cli", *argv]  # -P: not the cwd's fertility
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=1800)
    return out.returncode, out.stdout


def comparable(text: str) -> str:
    """The output less the JSON's settings.switch and .workers; other text as it is."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict) and isinstance(data.get("settings"), dict):
        data["settings"].pop("switch", None)
        data["settings"].pop("workers", None)  # what the switch chose
    return json.dumps(data, ensure_ascii=False, indent=1)


def main() -> None:
    root = Path(os.environ.get("FERTILITY_REALWORLD", Path.home() / ".cache/fertility/realworld"))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True, help="the other checkout's root")
    args = ap.parse_args()
    if not (root / "READY").is_file():
        sys.exit(f"error: {root}: no real-world fixtures (python tests/realworld/build.py)")
    differ = 0
    with tempfile.TemporaryDirectory() as cwd:
        line = Path(cwd) / "one.txt"
        line.write_text("The quick brown fox jumps over the lazy dog.\n", encoding="utf-8")
        todo = commands(root, str(line))
        for name, argv in todo.items():
            (code, out), (base_code, base_out) = run(HERE, argv, cwd), run(args.base, argv, cwd)
            same = code == base_code and comparable(out) == comparable(base_out)
            differ += not same
            print(f"{'same' if same else 'DIFFERS'}  {name} (exit {code}, base {base_code})")
    print(f"{differ} of {len(todo)} commands differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
