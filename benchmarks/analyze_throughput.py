"""Throughput and memory of `fertility.analyze` against the raw tokenizer doing the same work.

    python benchmarks/analyze_throughput.py                 # 50 MB, prints docs/s and ratio
    python benchmarks/analyze_throughput.py --rss 50,500    # also peak RSS per corpus size

A multilingual corpus is generated from examples/corpus (lines shuffled and recombined, seeded)
into a temporary folder. Both sides read the same files in the same batches:
  (a) raw:  `tokenizers.Tokenizer.encode_batch` on every batch (ids and offsets produced);
  (b) ours: `fertility.analyze` with every metric on (defaults) for the same tokenizer; on
      a corpus this size the defaults measure with one process per core (fertility._parallel).
Runs alternate a, b, a, b and the best of each is kept. Peak RSS is measured in a fresh
process per corpus size (`resource.getrusage` ru_maxrss of the main process and of the
largest measuring process).
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_corpus(out: Path, megabytes: float, seed: int = 0) -> int:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    sources = {p.stem: p.read_text(encoding="utf-8").splitlines()
               for p in sorted((ROOT / "examples" / "corpus").glob("*.txt"))}
    per_lang = megabytes * 1e6 / len(sources)
    docs = 0
    for lang, lines in sources.items():
        written = 0
        with open(out / f"{lang}.txt", "w", encoding="utf-8") as fh:
            while written < per_lang:
                a, b = rng.choice(lines), rng.choice(lines)
                words = (a + " " + b).split(" ")
                rng.shuffle(words)
                line = " ".join(words) + "\n"
                fh.write(line)
                written += len(line.encode("utf-8"))
                docs += 1
    return docs


def train_tokenizer(path: Path) -> Path:
    subprocess.run([sys.executable, str(ROOT / "examples" / "make_tokenizers.py"), str(path),
                    "--vocab-size", "8000"], check=True, stdout=subprocess.DEVNULL)
    return path / "mark-aware" / "tokenizer.json"


def raw_pass(corpus: Path, tok_path: Path, batch: int = 512) -> tuple[int, float]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tok_path))
    start = time.perf_counter()
    docs = 0
    for path in sorted(corpus.glob("*.txt")):
        with open(path, encoding="utf-8") as fh:
            buf = []
            for line in fh:
                line = line.rstrip("\n")
                if line.strip():
                    buf.append(line)
                if len(buf) == batch:
                    encs = tok.encode_batch(buf, add_special_tokens=False)
                    docs += len(encs)
                    buf = []
            if buf:
                docs += len(tok.encode_batch(buf, add_special_tokens=False))
    return docs, time.perf_counter() - start


def ours_pass(corpus: Path, tok_path: Path) -> tuple[int, float]:
    from fertility.measure import analyze

    start = time.perf_counter()
    rep = analyze([corpus], [f"bpe={tok_path}"])
    return rep.corpus["documents"], time.perf_counter() - start


def peak_rss(corpus: Path, tok_path: Path) -> float:
    code = (
        "import resource, sys; sys.path.insert(0, %r)\n"
        "from fertility.measure import analyze\n"
        "rep = analyze([%r], ['bpe=%s'])\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,\n"
        "      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rep.settings['workers'])\n"
    ) % (str(ROOT), str(corpus), tok_path)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    parent, child, workers = map(int, out.strip().splitlines()[-1].split())
    return parent / 1024, child / 1024, workers  # KiB -> MiB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=50)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rss", default="", help="comma-separated corpus sizes in MB for peak RSS")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tok_path = train_tokenizer(tmp / "tok")
        docs = make_corpus(tmp / "corpus", args.mb)
        print(f"corpus: {args.mb:.0f} MB, {docs:,} documents, 10 languages")
        raw, ours = [], []
        for _ in range(args.rounds):
            raw.append(raw_pass(tmp / "corpus", tok_path))
            ours.append(ours_pass(tmp / "corpus", tok_path))
        (n_raw, t_raw), (n_ours, t_ours) = min(raw, key=lambda x: x[1]), min(ours, key=lambda x: x[1])
        assert n_raw == n_ours, (n_raw, n_ours)
        print(f"(a) raw encode_batch : {n_raw / t_raw:10,.0f} docs/s  ({t_raw:.2f} s)")
        print(f"(b) fertility.analyze: {n_ours / t_ours:10,.0f} docs/s  ({t_ours:.2f} s)")
        print(f"ratio (b)/(a)        : {t_raw / t_ours:.3f}   (goal >= 0.85)")
        for size in [float(s) for s in args.rss.split(",") if s]:
            folder = tmp / f"rss{size:g}"
            make_corpus(folder, size, seed=1)
            parent, child, workers = peak_rss(folder, tok_path)
            print(f"peak RSS, {size:g} MB corpus: {parent:,.0f} MiB main process, "
                  f"{child:,.0f} MiB largest of {workers} measuring process(es) "
                  f"({parent + (workers if workers > 1 else 0) * child:,.0f} MiB in all)")


if __name__ == "__main__":
    main()
