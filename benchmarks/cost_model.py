"""Where a report's CPU goes, tokenizer by tokenizer, against each library's own encode of the
same batches, all on one thread (issue #36: "the per-tokenizer cost must approach the
tokenizer's own encode").

    python benchmarks/cost_model.py                          # four real files, 6 MB, 1 line
    python benchmarks/cost_model.py --join 50 --keep /tmp/real6j50
    python benchmarks/cost_model.py --set all --mb 1.7 --join 5
    python benchmarks/cost_model.py -t /tmp/fertility-bench/real-o200k-32000/tokenizer.json \
        --keep /tmp/c25j5    # any files (a corpus of analyze_throughput.py's, --keep'd)

The corpus and the files are benchmarks/many_tokenizers.py's (--set, --mb, --join, --keep). The
corpus is read into batches once, as the report reads it (fertility.measure.passes: BATCH_CHARS,
the detail documents planned as the pass plans them), and then each part is timed in CPU
seconds of the process (`time.process_time`: nothing else runs in it, and SentencePiece encodes
on a thread of its own), the best of --repeat runs:
  - library: the library's own encode, as benchmarks/many_tokenizers.py's raw side calls
    it, on one thread: tiktoken's `encode_ordinary` per text (its `encode_ordinary_batch`
    spreads exactly those calls over threads), SentencePiece's `encode` of the batch with one
    thread, HF tokenizers' `encode_batch` without special tokens (TOKENIZERS_PARALLELISM off);
  - ours, encode: `encode_checked`, what an encoding thread of the report runs (ids, spans and
    what the detail documents need);
  - ours, measuring: the report's `measure_batch` over those encodings (the main thread's
    work), split into the text's analysis that every tokenizer shares (`analyze_texts` and the
    batch's keys, once a batch), each tokenizer's per-token counting (`_measure_tokenizer` less
    its detail checks) and its detail checks (round trip, normaliser, own pre-tokenizer: a
    fixed budget a language, fertility.options.DETAIL_CHARS).
Printed: a row per tokenizer with its tokens and each part in seconds (the counting also in ns
a token), then the measuring's parts and both of ours against the libraries' encode. The whole
process also loads the files and builds the report's end (once), and on two cores runs the
encoding beside the measuring: benchmarks/many_tokenizers.py times that.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))
from analyze_throughput import real_corpus, realworld_root  # noqa: E402
from many_tokenizers import DEFAULT_MB, SETS  # noqa: E402

from fertility.corpus import Corpus, CorpusOptions  # noqa: E402
from fertility.measure import batch as B  # noqa: E402
from fertility.measure.counters import TokenizerAccumulator  # noqa: E402
from fertility.measure.passes import BATCH_CHARS, KEEP_DOCS, PassState  # noqa: E402
from fertility.options import BATCH_DOCS, DETAIL_DOCS  # noqa: E402
from fertility.threads import encoding_threads  # noqa: E402
from fertility.tokenizers import load_tokenizer_arg  # noqa: E402
from tests.realworld.results import TOKENIZERS  # noqa: E402


def library_call(tok):
    """The library's own encode of a batch of texts, as the raw side calls it, on one thread."""
    if tok.kind == "tiktoken":
        encode = tok._enc.encode_ordinary
        return lambda texts: [encode(t) for t in texts]
    if tok.kind == "sentencepiece":
        sp = tok._sp
        return lambda texts: sp.encode(texts, num_threads=1)
    if tok.kind == "hf":
        hf = tok._tok  # truncation and padding off, as fertility loads it
        return lambda texts: hf.encode_batch(texts, add_special_tokens=False)
    return None  # Tekken: mistral-common has no batch call; not timed here


def best_of(repeat: int, work) -> float:
    """The least CPU seconds of the process over `repeat` runs of work()."""
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        work()
        best = min(best, time.process_time() - t)
    return best


class Split:
    """measure_batch with its parts' CPU seconds added up per tokenizer label."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._orig = (B._measure_tokenizer, B._detail_checks, B._Keys, B.U.analyze_texts)

    def __enter__(self) -> Split:
        measure, detail, keys, analyze = self._orig

        def timed(name, fn):
            def run(*a, **k):
                t = time.process_time()
                try:
                    return fn(*a, **k)
                finally:
                    label = name(a)
                    self.seconds[label] += time.process_time() - t

            return run

        B._measure_tokenizer = timed(lambda a: a[0].tok.label, measure)
        B._detail_checks = timed(lambda a: "detail " + a[0].tok.label, detail)
        B._Keys = timed(lambda a: "(shared)", keys)
        B.U.analyze_texts = timed(lambda a: "(shared)", analyze)
        return self

    def __exit__(self, *exc) -> None:
        B._measure_tokenizer, B._detail_checks, B._Keys, B.U.analyze_texts = self._orig


def pass_state() -> PassState:
    """A fresh pass's state under the report's defaults (seed 0, --detail)."""
    return PassState(0, DETAIL_DOCS, KEEP_DOCS)


def arguments(description: str) -> argparse.ArgumentParser:
    """The corpus and files options (benchmarks/compiled_counting.py takes the same)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--set", choices=list(SETS), default="four", help="which files (default four)")
    ap.add_argument("--mb", type=float, help="corpus size (default 6 for four, 1.7 for all)")
    ap.add_argument("--join", type=int, default=1, help="lines per document (default 1)")
    ap.add_argument("--keep", help="folder to keep the corpus in (reused if present)")
    ap.add_argument("-t", "--tokenizer", action="append", help="a file instead of --set")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each part; the best counts")
    return ap


def with_corpus(args, run) -> None:
    """run(args, corpus folder): the --keep folder, else a corpus of --mb MB made for it in a
    temporary folder removed afterwards."""
    mb = DEFAULT_MB[args.set] if args.mb is None else args.mb
    with tempfile.TemporaryDirectory(prefix="fert-cost-") as tmp:
        corpus_dir = Path(args.keep or tmp)
        if not any(corpus_dir.glob("*.txt")):
            real_corpus(corpus_dir, mb, args.join)
        run(args, corpus_dir)


def prepare(args, corpus_dir: Path) -> tuple[list, list, list]:
    """The files loaded, the corpus read into the report's batches, and the detail documents
    of each batch as the pass plans them; prints what was read."""
    root = realworld_root() / "tokenizers"
    specs = args.tokenizer or [f"{lab}={root / TOKENIZERS[lab]}" for lab in SETS[args.set]]
    toks = [load_tokenizer_arg(spec) for spec in specs]
    batches = list(Corpus([str(corpus_dir)], CorpusOptions()).doc_batches(BATCH_DOCS, BATCH_CHARS))
    plan = B.DetailPlan(pass_state())
    plans = [plan(b) for b in batches]
    chars = sum(len(t) for b in batches for t in b.texts)
    detail_chars = sum(len(t) for b, p in zip(batches, plans) for t, d in zip(b.texts, p) if d)
    print(
        f"corpus: {corpus_dir.resolve()}, {len(batches)} batches, {chars:,} characters, "
        f"{detail_chars / chars:.0%} of them in detail documents; one thread, best of "
        f"{args.repeat}"
    )
    return toks, batches, plans


def main() -> None:
    with_corpus(arguments(__doc__.splitlines()[0]).parse_args(), run)


def run(args, corpus_dir: Path) -> None:
    """Time every part over the corpus in corpus_dir and print the table."""
    toks, batches, plans = prepare(args, corpus_dir)
    with encoding_threads():  # the libraries' own threads off, as on a report's encoding thread
        lib, enc, encoded = {}, {}, []
        for tok in toks:
            call = library_call(tok)
            if call is not None:
                lib[tok.label] = best_of(args.repeat, lambda: [call(b.texts) for b in batches])
            enc[tok.label] = best_of(
                args.repeat,
                lambda: [B.encode_checked(tok, b.texts, p) for b, p in zip(batches, plans)],
            )
        for b, p in zip(batches, plans):
            encoded.append([B.encode_checked(tok, b.texts, p) for tok in toks])
    runs = []
    for _ in range(args.repeat):
        state = pass_state()
        accs = [TokenizerAccumulator(tok) for tok in toks]
        with Split() as split:
            t = time.process_time()
            for i, (b, got) in enumerate(zip(batches, encoded)):
                B.measure_batch(b, [f for f, _ in got], accs, state, i, [c for _, c in got])
            runs.append((time.process_time() - t, dict(split.seconds)))
    total, parts = min(runs, key=lambda r: r[0])
    tokens = {tok.label: sum(len(g[k][0][0]) for g in encoded) for k, tok in enumerate(toks)}
    w = max(12, *(len(tok.label) for tok in toks))
    print(f"{'tokenizer':{w}s}     tokens   library  our encode  per-token counting  detail checks")
    for tok in toks:
        n = tokens[tok.label]
        detail = parts.get("detail " + tok.label, 0.0)
        counting = parts.get(tok.label, 0.0) - detail
        library = lib.get(tok.label)
        lib_text = f"{library:6.3f} s" if library is not None else "      - "
        print(
            f"{tok.label:{w}s} {n:10,d}  {lib_text}  {enc[tok.label]:6.3f} s  "
            f"{counting:6.3f} s {1e9 * counting / max(n, 1):4.0f} ns/token  "
            f"{detail:6.3f} s"
        )
    shared = parts.get("(shared)", 0.0)
    per_tok = sum(parts.get(t.label, 0.0) for t in toks)
    details = sum(parts.get("detail " + t.label, 0.0) for t in toks)
    libs = sum(lib.values())
    print(
        f"measuring (measure_batch): {total:.3f} s = the text's analysis {shared:.3f} s (once, "
        f"all tokenizers) + per-token counting {per_tok - details:.3f} s + detail checks "
        f"{details:.3f} s + other {total - shared - per_tok:.3f} s"
    )
    if libs:
        timed_ours = sum(enc[k] for k in lib)
        print(
            f"against the libraries' own encode ({libs:.3f} s for those timed): our encode "
            f"{timed_ours / libs:.2f}x, the measuring {total / libs:.2f}x on top"
        )


if __name__ == "__main__":
    main()
