"""Train the two tokenizers the demo compares, on the bundled example corpus.

naive-gpt2: byte-level BPE with the GPT-2 pre-tokenizer regex, as in the published run; it cuts
            every Bengali word at its vowel signs before BPE sees it.
mark-aware: the same trainer and vocabulary size with fertility's mark-aware split pattern.
The training text is Bangla-weighted (Bengali repeated 3x), like the published corpus.

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
    ap.add_argument("--vocab-size", type=int, default=4000)
    args = ap.parse_args()
    naive = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    aware = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(FAMILIES["mark_aware"]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    names = ("naive-gpt2", "mark-aware")
    for name, pre in zip(names, (naive, aware)):
        (args.out / name).mkdir(parents=True, exist_ok=True)
        train(pre, args.vocab_size).save(str(args.out / name / "tokenizer.json"))
    print(
        f"trained {' and '.join(names)} ({args.vocab_size:,} tokens each) into "
        f"{args.out}/*/tokenizer.json"
    )


if __name__ == "__main__":
    main()
