"""Whole processes timed as a user runs them, and two commands paired A B A B.

    python benchmarks/timing.py --runs 6 'A shell command' 'B shell command'

`timed` runs one command to its end and reads its wall seconds, CPU seconds (user + system)
and peak RSS from os.wait4 of the process (the rusage covers it and every process it waited
for; ru_maxrss is the largest of them). `paired` runs A then B, `runs` times, prints each pair
and then, for wall and CPU, the median (min-max) of the per-pair ratios A/B, with each side's
median wall and CPU and its largest peak RSS. Alternating puts both sides under the same drift
of a shared machine, and a ratio taken pair by pair cancels most of it: quote the median.
CPU counts only processes that were waited for: datatrove's task processes (`--tasks N`, N > 1)
are left out here, so their side's CPU is its main process's alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PY = sys.executable

# Peak RSS through a small launcher: a child forked from this process would start with this
# process's high-water mark (Linux keeps it across exec), so the launcher forks it instead.
LAUNCH = r"""
import json, os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    json.dump({"wall": time.perf_counter() - t0, "cpu": ru.ru_utime + ru.ru_stime,
               "rss": ru.ru_maxrss / 1024, "rc": os.waitstatus_to_exitcode(status)}, fh)
"""


def user_env(env: dict | None = None) -> dict:
    """This process's environment as a user's shell has it, plus `env`: without
    PYTHONDONTWRITEBYTECODE, under which every run compiles each module whose cached bytecode
    is missing or stale (a fresh `git worktree` given as --base: every module, 0.15 s of a
    one-line report, which made the tree before look that much slower)."""
    out = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**out, **(env or {})}


def compiled(*trees: str | Path) -> None:
    """Write the bytecode of every module of each checkout (its fertility/ folder) before any
    run is timed, so no timed run pays for compiling (a user's runs after the first do not).
    It writes what importing them would: their __pycache__ files. A checkout where that
    cannot be written (read-only) is left as it is, with a warning: its runs then compile."""
    for tree in trees:
        done = subprocess.run(
            [PY, "-m", "compileall", "-q", str(Path(tree) / "fertility")], capture_output=True
        )
        if done.returncode != 0:
            print(f"warning: {tree}: its bytecode could not all be written", file=sys.stderr)


def steal_seconds() -> float | None:
    """CPU seconds the hypervisor gave other machines, over all of this one's cores since boot
    (/proc/stat's steal column; None where there is none). A run's share of it says how much
    of its wall time the host took away: on this shared machine the same command's time
    moved by a third within minutes, with steal the largest part."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def timed(cmd: list[str], env: dict | None = None) -> dict:
    """Run `cmd` to its end: wall seconds, CPU seconds (all its processes), peak RSS in MiB
    (the largest of the process and those it waited for), the host's steal seconds meanwhile
    (over all cores; None where unknown) and its stdout."""
    before = steal_seconds()
    with tempfile.NamedTemporaryFile(suffix=".json") as res:
        proc = subprocess.run(
            [PY, "-c", LAUNCH, res.name, *cmd],
            capture_output=True,
            env=user_env(env),
            check=False,
        )
        r = json.loads(Path(res.name).read_text())
    if r["rc"] != 0 or proc.returncode != 0:
        sys.exit(
            f"error: {' '.join(cmd[:3])}...: exit {r['rc']}: "
            f"{proc.stderr.decode(errors='replace').strip().splitlines()[-1:]}"
        )
    after = steal_seconds()
    steal = None if before is None or after is None else after - before
    return {**r, "steal": steal, "out": proc.stdout.decode()}


def steal_text(r: dict) -> str:
    """ ", 1.2 s stolen" for a run the host took CPU from; "" when it took none or is unknown."""
    return f", {r['steal']:.1f} s stolen" if r.get("steal") else ""


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def paired(a: list[str], b: list[str], runs: int, names: tuple[str, str] = ("A", "B")) -> dict:
    """Time `a` and `b` alternately (A B A B ...), `runs` pairs; print each pair and the summary.
    Returns the per-pair ratios A/B: {"wall": [...], "cpu": [...]}."""
    if runs < 1:  # a usage error (exit 2), not a failed command
        print(f"error: --runs {runs}: at least one pair", file=sys.stderr)
        sys.exit(2)
    sides: dict[str, list[dict]] = {"A": [], "B": []}
    for i in range(runs):
        ra, rb = timed(a), timed(b)
        sides["A"].append(ra)
        sides["B"].append(rb)
        print(
            f"pair {i + 1}/{runs}: "
            + " | ".join(
                f"{s} {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU, {r['rss']:.0f} MiB"
                + steal_text(r)
                for s, r in (("A", ra), ("B", rb))
            )
            + f" | A/B wall {ra['wall'] / rb['wall']:.3f}, CPU {ra['cpu'] / rb['cpu']:.3f}",
            flush=True,
        )
    for side, name in zip(("A", "B"), names):
        rs = sides[side]
        print(
            f"{side} = {name}: wall median {statistics.median(r['wall'] for r in rs):.2f} s, "
            f"CPU median {statistics.median(r['cpu'] for r in rs):.2f} s, "
            f"peak RSS {max(r['rss'] for r in rs):.0f} MiB (largest)"
        )
    ratios = {k: [ra[k] / rb[k] for ra, rb in zip(sides["A"], sides["B"])] for k in ("wall", "cpu")}
    print(
        f"A/B over {runs} pairs, median (min-max): wall {_spread(ratios['wall'])}, "
        f"CPU {_spread(ratios['cpu'])}",
        flush=True,
    )
    return ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="command A, run by /bin/sh -c")
    ap.add_argument("b", help="command B, run by /bin/sh -c")
    ap.add_argument("--runs", type=int, default=3, help="pairs (default 3)")
    args = ap.parse_args()
    paired(["/bin/sh", "-c", args.a], ["/bin/sh", "-c", args.b], args.runs, (args.a, args.b))


if __name__ == "__main__":
    main()
