"""`fertility tokenize` (shards + the gate's counts, datatrove tasks) against the raw tokenizer
writing its ids, both timed as whole processes as a user runs them (benchmarks/timing.py).

    python benchmarks/tokenize_throughput.py                 # 100 MB of real text, 3 runs
    python benchmarks/tokenize_throughput.py --mb 50 --runs 5 --tasks 1,2,4
    python benchmarks/tokenize_throughput.py --tasks 1 --no-counts  # the shards alone
    python benchmarks/tokenize_throughput.py --mb 25 --profile  # where ours spends its CPU

Text and tokenizer are analyze_throughput.py's: the fixtures' real text of 13 languages
repeated to the size asked (one document per line) and a 32,000-token byte-level BPE with
the o200k split trained on it. Sides, each a fresh process over the same lines:
  raw:  `python` reading every file line by line, `tokenizers.Tokenizer.encode_batch` on
        batches of 1,000 (its own threads), every id appended to one uint16 file with the
        separator after each document: the least a shard writer does.
  ours: `fertility tokenize DIR -t tok.json --out OUT -q --tasks N` (into a new OUT each run):
        the shards, the held-out split, the document table and the counts its gate reads
        (with --no-counts: all but the counts).
Each `--tasks N` (A) is paired with raw (B), A B A B for --runs pairs (timing.paired: wall, CPU
and peak RSS from os.wait4 of each process); it prints each pair and the median (min-max) of the
per-pair ratios A/B for wall and CPU; quote the median. --profile: instead, one run of ours in
this process with a CPU profile per thread and the stage table (tokenize_profile.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyze_throughput import (  # noqa: E402
    CACHE,
    FERTILITY,
    PY,
    RAW_BATCHES,
    corpus_and_bpe,
)
from timing import paired  # noqa: E402

RAW = (
    RAW_BATCHES
    + r"""
import sys
import numpy as np
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[2])
sep = np.array([tok.get_vocab_size()], np.uint16)
with open(sys.argv[3], "wb") as out:
    for buf in batches(sys.argv[1]):
        for e in tok.encode_batch(buf, add_special_tokens=False):
            out.write(np.asarray(e.ids, np.uint16).tobytes() + sep.tobytes())
"""
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tasks", default="1,2", help="comma-separated task counts to pair with raw")
    ap.add_argument("--no-counts", action="store_true", help="tokenize --no-counts")
    ap.add_argument("--profile", action="store_true", help="the stage table of one run of ours")
    args = ap.parse_args()
    corpus, tok = corpus_and_bpe(args.mb)
    raw_py = CACHE / "raw_tokenize.py"
    raw_py.write_text(RAW, encoding="utf-8")
    out = CACHE / "tokenize-out"
    if args.profile:
        shutil.rmtree(out, ignore_errors=True)
        here = Path(__file__).resolve().parent
        profile = [PY, str(here / "tokenize_profile.py"), str(corpus), str(tok), str(out)]
        subprocess.run(profile, check=True)
        return
    raw = f"{PY} {raw_py} {corpus} {tok} {CACHE / 'raw-ids.bin'}"
    print(f"corpus {corpus} ({args.mb:g} MB), tokenizer {tok}, {os.cpu_count()} cores", flush=True)
    for n in [int(x) for x in args.tasks.split(",")]:
        flag = " --no-counts" if args.no_counts else ""
        ours = (
            f"rm -rf {out} && exec {FERTILITY} tokenize {corpus} -t {tok} --out {out} -q "
            f"--tasks {n}{flag}"
        )
        print(f"\n== tokenize --tasks {n}{flag}  vs  raw encode_batch + write ids", flush=True)
        names = (f"tokenize --tasks {n}{flag}", "raw encode_batch + write ids")
        paired(["/bin/sh", "-c", ours], ["/bin/sh", "-c", raw], args.runs, names)


if __name__ == "__main__":
    main()
