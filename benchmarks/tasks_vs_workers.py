"""Is fertility/measure/parallel.py (report's own worker processes) still needed beside
datatrove's local executor (`report --tasks N`)? Both timed as whole processes (benchmarks/
timing.py) on one machine, on the same real text and tokenizer as analyze_throughput.py.

    python benchmarks/tasks_vs_workers.py                    # 25 MB, 3 runs, 2 processes
    python benchmarks/tasks_vs_workers.py --mb 100 --processes 4

  A: `fertility report DIR -t tok.json --format json -o r.json -q --tasks N --work-dir W`
     (datatrove: N tasks, each reads the corpus and measures every N-th batch; W new each run)
  B: `fertility report DIR -t tok.json --format json -o r.json -q --workers N`
     (parallel.py: N measuring processes, the same batch striding, merged in memory)
timing.paired runs them A B A B for --runs pairs (wall, CPU and peak RSS from os.wait4 of each
process) and prints each pair and the median (min-max) of the per-pair ratios A/B for wall and
CPU; quote the median.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyze_throughput import CACHE, FERTILITY, corpus_and_bpe  # noqa: E402
from timing import paired  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=25.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--processes", type=int, default=2)
    args = ap.parse_args()
    corpus, tok = corpus_and_bpe(args.mb)
    n, work, out = args.processes, CACHE / "tasks-work", CACHE / "tasks-report.json"
    common = f"{FERTILITY} report {corpus} -t {tok} --format json -o {out} -q"
    a = f"rm -rf {work} && exec {common} --tasks {n} --work-dir {work}"
    b = f"{common} --workers {n}"
    print(f"corpus {corpus} ({args.mb:g} MB), {os.cpu_count()} cores, {n} processes", flush=True)
    sides = (f"report --tasks {n}", f"report --workers {n}")
    paired(["/bin/sh", "-c", a], ["/bin/sh", "-c", b], args.runs, sides)


if __name__ == "__main__":
    main()
