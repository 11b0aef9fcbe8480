"""`fertility report` with four real tokenizer files against their four libraries run in turn on
the same documents, each side a whole process, alternated (issue #36's second row).

    python benchmarks/four_tokenizers.py                 # 6 MB of real text, 3 rounds
    python benchmarks/four_tokenizers.py --mb 6 --rounds 5 --keep /tmp/real6
    python benchmarks/four_tokenizers.py --profile       # one more run of ours under cProfile

Files, from the real-world fixtures (tests/realworld/build.py): o200k_base.tiktoken and
cl100k_base.tiktoken (tiktoken, `encode_ordinary_batch`), Mistral's SentencePiece
tokenizer.model.v1 (sentencepiece, `encode` of a list) and MiniLM's tokenizer.json (HF
tokenizers, `encode_batch` without special tokens). Both sides read the same lines (the
corpus of benchmarks/analyze_throughput.py: every fixture language repeated to size, one
document per line) in batches of 1,000. Each round prints both sides' wall, CPU and peak RSS;
the summary gives the median of the rounds' ratios (raw wall / our wall) and their range.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyze_throughput import FERTILITY, PY, real_corpus, realworld_root, timed  # noqa: E402

RAW = r"""
import sys
from pathlib import Path
import sentencepiece, tiktoken, tokenizers
from tiktoken.load import load_tiktoken_bpe
sys.path.insert(0, sys.argv[2])
from fertility.tokenizers.patterns import FAMILIES
o200k, cl100k, sp_model, hf_json = sys.argv[3:7]
encs = [
    tiktoken.Encoding("o200k", pat_str=FAMILIES["o200k"], mergeable_ranks=load_tiktoken_bpe(o200k),
                      special_tokens={}).encode_ordinary_batch,
    tiktoken.Encoding("cl100k", pat_str=FAMILIES["cl100k"],
                      mergeable_ranks=load_tiktoken_bpe(cl100k), special_tokens={}
                      ).encode_ordinary_batch,
    sentencepiece.SentencePieceProcessor(model_file=sp_model).encode,
    lambda b, t=tokenizers.Tokenizer.from_file(hf_json): t.encode_batch(b, add_special_tokens=False),
]
for encode in encs:  # the four libraries in turn, each over the whole corpus
    for path in sorted(Path(sys.argv[1]).glob("*.txt")):
        with open(path, encoding="utf-8") as fh:
            buf = []
            for line in fh:
                buf.append(line[:-1])
                if len(buf) == 1000:
                    encode(buf)
                    buf = []
            if buf:
                encode(buf)
"""


def files(root: Path) -> list[Path]:
    t = root / "tokenizers"
    return [
        t / "o200k_base.tiktoken",
        t / "cl100k_base.tiktoken",
        t / "mistral" / "tokenizer.model.v1",
        t / "minilm" / "tokenizer.json",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", help="folder to keep the corpus in (reused if present)")
    ap.add_argument("--profile", action="store_true", help="then one run of ours under cProfile")
    args = ap.parse_args()
    toks = files(realworld_root())
    tmp = Path(tempfile.mkdtemp(prefix="fert-four-"))
    try:
        corpus = Path(args.keep) if args.keep else tmp / "corpus"
        if not corpus.exists():
            real_corpus(corpus, args.mb)
        size = sum(p.stat().st_size for p in corpus.glob("*.txt")) / 1e6
        raw = [PY, "-c", RAW, str(corpus), str(Path(__file__).resolve().parents[1])]
        ours = [FERTILITY, "report", str(corpus), "--format", "json", "-o", str(tmp / "r.json")]
        ours += ["-q", *(x for i, t in enumerate(toks) for x in ("-t", f"t{i}={t}"))]
        print(f"corpus: {size:.1f} MB real text; tokenizers: {', '.join(map(str, toks))}")
        ratios, rss = [], []
        for i in range(args.rounds):
            a, b = timed(raw + [str(t) for t in toks]), timed(ours)
            ratios.append(a["wall"] / b["wall"])
            rss.append(b["rss"])
            print(
                f"round {i + 1}: raw {a['wall']:.2f} s wall, {a['cpu']:.2f} s CPU, "
                f"{a['rss']:.0f} MiB; ours {b['wall']:.2f} s wall, {b['cpu']:.2f} s CPU, "
                f"{b['rss']:.0f} MiB; ratio {ratios[-1]:.3f}",
                flush=True,
            )
        print(
            f"ratio raw/ours (wall), median of {len(ratios)}: {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.3f}-{max(ratios):.3f}); peak RSS ours {max(rss):.0f} MiB "
            f"(goal >= 0.9)"
        )
        if args.profile:
            prof = tmp / "p.prof"
            timed([PY, "-m", "cProfile", "-o", str(prof), *ours, "--workers", "1"])
            import pstats

            pstats.Stats(str(prof)).sort_stats("cumulative").print_stats("fertility", 25)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
