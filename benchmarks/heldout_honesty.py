"""How optimistic is `fertility fix`'s held-out figure? (docs/FIX.md, "How honest is the
held-out figure")

    python benchmarks/heldout_honesty.py [--lang bn] [--vocab-size 8000] [--seeds 3]
        [--splits lines,lines+dedup,runs20,runs100,runs100+dedup]

The file ROOT/text/LANG.txt of the real-world fixtures (`make fixtures`) is cut into ten
contiguous tenths. For each tenth and seed: fix's split (fertility.corpus.sampling, the
variant named) is applied to the other nine tenths, a BPE is trained as fix trains it on the
training part, and it is measured on its held-out documents and on the tenth it never saw;
o200k, trained on neither, is measured on both. Summed over the tenths, the unseen text is the
whole file, so the two sides have the same make-up (the o200k quotient says how nearly). The
optimism of a split is

    (new on held-out / o200k on held-out) / (new on unseen / o200k on unseen) - 1

from characters and tokens summed over every tenth and seed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: checkout.py
from checkout import use_checkout  # noqa: E402

ROOT = use_checkout()  # fertility (trainer/, eval/ included) from this checkout

from fertility.corpus import sampling  # noqa: E402
from fertility.corpus.neardup import HeldoutShingles  # noqa: E402
from fertility.fix.config import FixConfig  # noqa: E402
from fertility.fix.train import _train_hf  # noqa: E402
from fertility.tokenizers import load_tokenizer  # noqa: E402
from fertility.tokenizers.patterns import resolve_pattern  # noqa: E402
from tests.realworld.layout import root  # noqa: E402

SPLITS = {  # name: (lines per held-out run, drop near-duplicates from training)
    "lines": (1, False),
    "lines+dedup": (1, True),
    "runs20": (20, False),
    "runs100": (100, False),
    "runs100+dedup": (100, True),  # fix's default
}


def split(lines: np.ndarray, texts: list[str], block: int, dedup: bool, seed: int):
    zeros = np.zeros(len(lines), np.int64)
    held = sampling.heldout_mask(zeros, lines, zeros, 0.1, seed, 1000, block)
    dropped = np.zeros(len(lines), bool)
    if dedup:
        index = HeldoutShingles()
        for t in (t for t, h in zip(texts, held) if h):
            index.add(t)
        rest = np.flatnonzero(~held)
        dropped[rest[index.freeze().shared([texts[i] for i in rest])]] = True
    return held, dropped


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lang", default="bn")
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--splits", default=",".join(SPLITS))
    args = ap.parse_args()
    text = (root() / "text" / f"{args.lang}.txt").read_text("utf-8").splitlines()
    docs = [(i, t) for i, t in enumerate(text, 1) if t.strip()]
    o200k = load_tokenizer(str(root() / "tokenizers" / "o200k_base.tiktoken"))
    _, regex = resolve_pattern("mark_aware")
    config = FixConfig(vocab_size=args.vocab_size)
    bounds = np.linspace(0, len(text), 11).astype(int)

    def tokens(tok, texts: list[str]) -> int:
        return sum(len(e.ids) for e in tok.encode_batch(texts))

    print(f"{args.lang}, vocabulary {args.vocab_size:,}, {args.seeds} seeds x 10 tenths")
    print(f"{'split':<15}{'held-out':>9}{'unseen':>8}{'o200k':>7}{'optimism':>10}{'dropped':>9}")
    for name in args.splits.split(","):
        block, dedup = SPLITS[name]
        sums = np.zeros(6)
        dropped = rest_docs = 0
        for seed in range(args.seeds):
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                unseen = [t for i, t in docs if lo < i <= hi]
                rest = [(i, t) for i, t in docs if not lo < i <= hi]
                texts = [t for _, t in rest]
                held, drop = split(np.array([i for i, _ in rest]), texts, block, dedup, seed)
                train = [t for t, h, d in zip(texts, held, drop) if not h and not d]
                heldout = [t for t, h in zip(texts, held) if h]
                tok, _ = _train_hf(config, regex, [("<|endoftext|>", None)], None, [train], False)
                sums += [
                    sum(map(len, heldout)),
                    tokens(tok, heldout),
                    tokens(o200k, heldout),
                    sum(map(len, unseen)),
                    tokens(tok, unseen),
                    tokens(o200k, unseen),
                ]
                dropped += int(drop.sum())
                rest_docs += len(rest) - int(held.sum())
        hc, ht, ho, uc, ut, uo = sums
        shift = (uc / uo) / (hc / ho)  # how much easier o200k finds the unseen text
        optimism = (hc / ht) / ((uc / ut) / shift) - 1
        print(
            f"{name:<15}{hc / ht:>9.2f}{uc / ut:>8.2f}{shift:>7.3f}{optimism:>+10.1%}"
            f"{dropped / rest_docs:>9.1%}"
        )


if __name__ == "__main__":
    main()
