"""Train the two tokenizers the demo compares, on the bundled example corpus.

naive-gpt2: byte-level BPE with the GPT-2 pre-tokenizer regex, as in the published run; it cuts
            every Bengali word at its vowel signs before BPE sees it.
mark-aware: the same trainer and vocabulary size with fertility's mark-aware split pattern.
The training text is Bangla-weighted (Bengali repeated 3x), like the published corpus.

By default both learn every merge the example corpus holds (about 16,000 tokens; the demo
measures them on that same corpus), so the vocabulary is no limit and what remains is each
pre-tokenizer's ceiling: the naive one still fails Bengali, Hindi and Tamil, which it cuts at
every vowel sign, and the mark-aware one passes the gate. A smaller --vocab-size shows a
vocabulary too small for ten languages instead (both then fail scripts it has no room for).

    python examples/make_tokenizers.py OUT_DIR [--vocab-size N]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from fertility.tokenizers.patterns import FAMILIES

CORPUS = Path(__file__).parent / "corpus"


def training_lines() -> list[str]:
    lines = []
    for path in sorted(CORPUS.glob("*.txt")):
        text = path.read_text(encoding="utf-8").splitlines()
        lines += text * (3 if path.stem == "bn" else 1)
    return lines


def train(pre_tokenizer, vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(training_lines(), trainer)
    return tok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    # (more than the corpus's merges: the trainer stops when none is left)
    ap.add_argument("--vocab-size", type=int, default=30000)
    args = ap.parse_args()
    naive = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    aware = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(FAMILIES["mark_aware"]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    names = ("naive-gpt2", "mark-aware")
    sizes = []
    for name, pre in zip(names, (naive, aware)):
        (args.out / name).mkdir(parents=True, exist_ok=True)
        tok = train(pre, args.vocab_size)
        tok.save(str(args.out / name / "tokenizer.json"))
        sizes.append(f"{name} {tok.get_vocab_size():,}")
    print(f"trained {' and '.join(sizes)} tokens into {args.out}/*/tokenizer.json")


if __name__ == "__main__":
    main()
