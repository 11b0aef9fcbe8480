"""HF tokenizers' encode alone, three ways, each a fresh process timed whole, in turn:

  rayon    one batch at a time, `encode_batch_fast` on the library's own thread pool
           (what a pass did before fertility.threads.encoding_threads);
  serial   one batch at a time on one thread (TOKENIZERS_PARALLELISM=false);
  threads  a batch per encoding thread side by side, each on one thread: what a pass does
           now (fertility.threads.encoding_threads: a thread per core, at most 4).

    python benchmarks/encode_threads.py                 # 25 MB of real text, 2 rounds
    python benchmarks/encode_threads.py --mb 50 --rounds 3

Text and tokenizer are analyze_throughput.py's (the fixtures' real text of 13 languages,
one document per line; a 32,000-token byte-level BPE with the o200k split), read into the
pass's batches by fertility's own reader. Each line printed is one run: the wall and CPU
seconds of the encode alone, timed inside the process (its start and the reading left
out), and the host's steal seconds over the whole process (timing.timed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyze_throughput import PY, corpus_and_bpe  # noqa: E402
from timing import steal_text, timed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# One arrangement, in a process of its own: argv = corpus, tokenizer, way. The batches are
# the pass's (Corpus.doc_batches at BATCH_DOCS documents or BATCH_CHARS characters);
# "threads" is the pass's own arrangement (fertility.threads.encoding_threads).
ENCODE = r"""
import contextlib, json, os, sys, threading, time
corpus, tok_path, way = sys.argv[1:4]
if way == "serial":
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer
from fertility.corpus import Corpus, CorpusOptions
from fertility.measure.passes import BATCH_CHARS
from fertility.options import BATCH_DOCS
from fertility.threads import encoding_threads
tok = Tokenizer.from_file(tok_path)
batches = [b.texts for b in Corpus([corpus], CorpusOptions()).doc_batches(BATCH_DOCS, BATCH_CHARS)]
with encoding_threads() if way == "threads" else contextlib.nullcontext(1) as n:
    t0, c0 = time.perf_counter(), time.process_time()
    counts = [0] * n
    def work(k):
        for b in batches[k::n]:
            counts[k] += sum(map(len, tok.encode_batch_fast(b, add_special_tokens=False)))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"wall": wall, "cpu": cpu, "threads": n, "batches": len(batches),
                  "tokens": sum(counts)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=25)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    corpus, tok = corpus_and_bpe(args.mb)
    print(f"corpus {corpus} ({args.mb:g} MB), tokenizer {tok}", flush=True)
    env = {"PYTHONPATH": str(ROOT)}
    tokens = set()
    for i in range(args.rounds):
        for way in ("rayon", "serial", "threads"):
            r = timed([PY, "-c", ENCODE, str(corpus), str(tok), way], env=env)
            got = json.loads(r["out"])
            tokens.add(got["tokens"])
            print(
                f"round {i + 1} {way:8s} the encode {got['wall']:6.2f} s wall, "
                f"{got['cpu']:6.2f} s CPU ({got['batches']} batches, {got['threads']} "
                f"thread(s) calling the library){steal_text(r)}",
                flush=True,
            )
    if len(tokens) != 1:  # every arrangement encodes the same text to the same tokens
        sys.exit(f"error: the arrangements disagree on the token count: {sorted(tokens)}")


if __name__ == "__main__":
    main()
