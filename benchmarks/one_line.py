"""`fertility report` of one line with a real rank file against tiktoken loading that file and
encoding the line, each timed as a whole process, alternated (issue #36's last row).

    python benchmarks/one_line.py                       # o200k_base.tiktoken, 5 rounds
    python benchmarks/one_line.py --ranks PATH --rounds 9
    python benchmarks/one_line.py --base /tmp/old       # also another checkout, in turn

The rank file is the real-world fixtures' o200k_base.tiktoken (tests/realworld/build.py; ROOT is
$FERTILITY_REALWORLD or ~/.cache/fertility/realworld). Three commands run in turn, a round at a
time: (a) `python -c` with tiktoken's own `load_tiktoken_bpe` and `Encoding` (o200k's pattern)
encoding the line; (b) `fertility report LINE -t RANKS -q` (the table); (c) the same with
`--format json -o r.json`; with `--base TREE`, (b) and (c) again from that checkout (`python -P
-m fertility.cli` with TREE on PYTHONPATH), each right after this tree's. Each prints its median, min and max wall seconds and peak RSS (os.wait4
of the process), and (b) and (c) the median of their per-round differences from (a).
Both checkouts' modules are compiled first, and every command runs without
PYTHONDONTWRITEBYTECODE, as a user's shell would (benchmarks/timing.py: compiled, user_env).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import compiled, user_env  # benchmarks/timing.py

PY = sys.executable
RAW = r"""
import sys
import tiktoken
from tiktoken.load import load_tiktoken_bpe
ranks = load_tiktoken_bpe(sys.argv[1])
enc = tiktoken.Encoding("o200k", pat_str=sys.argv[3], mergeable_ranks=ranks, special_tokens={})
print(len(enc.encode_ordinary(open(sys.argv[2], encoding="utf-8").read())))
"""
LINE = "The quick brown fox jumps over the lazy dog, and then it rests.\n"


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one whole process (env: added to this one's)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=user_env(env)
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: the gate's "no" on one line
        sys.exit(f"error: {' '.join(cmd[:4])} ... failed: {err.strip()[-300:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    root = Path(os.environ.get("FERTILITY_REALWORLD", Path.home() / ".cache/fertility/realworld"))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=Path, default=root / "tokenizers" / "o200k_base.tiktoken")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--base", help="also time this checkout's report, in turn with this tree's")
    args = ap.parse_args()
    if not args.ranks.is_file():
        sys.exit(f"error: {args.ranks}: no rank file (python tests/realworld/build.py)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fertility.tokenizers.patterns import FAMILIES

    compiled(Path(__file__).resolve().parents[1], *([args.base] if args.base else []))

    with tempfile.TemporaryDirectory() as tmp:
        line = Path(tmp) / "en.txt"
        line.write_text(LINE, encoding="utf-8")
        report = [PY, "-m", "fertility.cli", "report", str(line), "-t", str(args.ranks), "-q"]
        cmds = {
            "tiktoken": [PY, "-c", RAW, str(args.ranks), str(line), FAMILIES["o200k"]],
            "report": report,
            "report --format json": [*report, "--format", "json", "-o", f"{tmp}/r.json"],
        }
        envs: dict[str, dict[str, str]] = {}
        if args.base:  # -P: not the cwd's fertility but the base's
            for name in ("report", "report --format json"):
                cmds[f"{name} (base)"] = [PY, "-P", *cmds[name][1:]]
                envs[f"{name} (base)"] = {"PYTHONPATH": args.base}
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
        for _ in range(args.rounds):
            for name, cmd in cmds.items():
                got[name].append(run(cmd, envs.get(name)))
    base = [w for w, _ in got["tiktoken"]]
    for name, runs in got.items():
        walls = [w for w, _ in runs]
        rss = statistics.median(m for _, m in runs)
        line_out = (
            f"{name:29s} wall median {statistics.median(walls):.2f} s "
            f"(min {min(walls):.2f}, max {max(walls):.2f}), peak RSS {rss:.0f} MiB"
        )
        if name != "tiktoken":
            extra = statistics.median(w - b for w, b in zip(walls, base))
            line_out += f"; over tiktoken: {extra:+.2f} s (median of the rounds' differences)"
        print(line_out)


if __name__ == "__main__":
    main()
