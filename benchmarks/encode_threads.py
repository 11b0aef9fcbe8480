"""HF tokenizers' encode alone, three ways, each a fresh process timed whole, in turn:

  rayon    one batch at a time, `encode_batch_fast` on the library's own thread pool
           (what a pass did before fertility.threads.encoding_threads);
  serial   one batch at a time on one thread (TOKENIZERS_PARALLELISM=false);
  threads  a batch per core side by side, each on one thread (what a pass does now).

    python benchmarks/encode_threads.py                 # 25 MB of real text, 2 rounds
    python benchmarks/encode_threads.py --mb 50 --rounds 3

Text and tokenizer are analyze_throughput.py's (the fixtures' real text of 13 languages,
one document per line; a 32,000-token byte-level BPE with the o200k split), cut into the
pass's batches (fertility.measure.passes.BATCH_CHARS characters). Each line printed is one
run: wall and CPU seconds of the process (timing.timed), less its reading of the corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyze_throughput import PY, corpus_and_bpe  # noqa: E402
from timing import steal_text, timed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# One arrangement, in a process of its own: argv = corpus, tokenizer, way, cores.
ENCODE = r"""
import json, os, sys, threading, time
from pathlib import Path
corpus, tok_path, way, cores = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if way != "rayon":
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer
from fertility.measure.passes import BATCH_CHARS
tok = Tokenizer.from_file(tok_path)
batches, buf, size = [], [], 0
for path in sorted(Path(corpus).glob("*.txt")):
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            buf.append(line[:-1])
            size += len(line)
            if size >= BATCH_CHARS:
                batches.append(buf)
                buf, size = [], 0
if buf:
    batches.append(buf)
t0, c0 = time.perf_counter(), time.process_time()
counts = [0] * cores
def work(k, step):
    for b in batches[k::step]:
        counts[k] += sum(map(len, tok.encode_batch_fast(b, add_special_tokens=False)))
if way == "threads":
    threads = [threading.Thread(target=work, args=(k, cores)) for k in range(cores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
else:
    work(0, 1)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "batches": len(batches), "tokens": sum(counts)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=25)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    corpus, tok = corpus_and_bpe(args.mb)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"corpus {corpus} ({args.mb:g} MB), tokenizer {tok}, {cores} cores", flush=True)
    env = {"PYTHONPATH": str(ROOT)}
    tokens = set()
    for i in range(args.rounds):
        for way in ("rayon", "serial", "threads"):
            r = timed([PY, "-c", ENCODE, str(corpus), str(tok), way, str(cores)], env=env)
            got = json.loads(r["out"])
            tokens.add(got["tokens"])
            print(
                f"round {i + 1} {way:8s} the encode {got['wall']:6.2f} s wall, "
                f"{got['cpu']:6.2f} s CPU ({got['batches']} batches){steal_text(r)}",
                flush=True,
            )
    if len(tokens) != 1:  # every arrangement encodes the same text to the same tokens
        sys.exit(f"error: the arrangements disagree on the token count: {sorted(tokens)}")


if __name__ == "__main__":
    main()
