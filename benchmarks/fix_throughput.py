"""How much `fertility fix` adds around the trainer it drives.

    python benchmarks/fix_throughput.py [--mb 100] [--vocab-size 32000] [--corpus PATH ...]

One run, two timings on the same text and vocabulary size:
  (a) `fertility.fix.fix`: read the corpus, split, plan the sampling, stream it into the
      `tokenizers` BPE trainer, write the tokenizer, measure old/new on the held-out part with
      every metric, gate, write fix-report.json and report.html;
  (b) a bare `tokenizers` BpeTrainer with the same normaliser, pre-tokenizer and vocabulary
      size on exactly the text (a) trained on (the same sampled documents, repeats included),
      already in memory.
It prints both, their ratio, and the share of (a) spent outside the trainer, (a - b) / a, in
wall time and in CPU time (user + system of all threads: steadier on a shared machine).
Goal: under 15%.

Without --corpus a multilingual corpus of --mb megabytes is generated from examples/corpus:
sentences of new word forms made by recombining pieces of the examples' words (Zipf-weighted,
so the trainer sees a realistic long tail of word types), ten languages in unequal shares.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import regex

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: checkout.py
from checkout import use_checkout  # noqa: E402

ROOT = use_checkout()  # fertility (trainer/, eval/ included) from this checkout

from fertility.corpus import Corpus  # noqa: E402
from fertility.corpus import sampling as _sampling  # noqa: E402
from fertility.fix import fix  # noqa: E402
from fertility.fix.config import FixConfig  # noqa: E402
from fertility.tokenizers.patterns import FAMILIES  # noqa: E402

SHARES = {
    "en": 0.40,
    "es": 0.15,
    "ru": 0.10,
    "zh": 0.08,
    "ar": 0.07,
    "hi": 0.06,
    "ja": 0.05,
    "bn": 0.04,
    "th": 0.03,
    "ta": 0.02,
}
UNSPACED = {"zh", "ja", "th"}


def word_forms(lang: str, n: int, rng: random.Random) -> list[str]:
    text = (ROOT / "examples" / "corpus" / f"{lang}.txt").read_text("utf-8")
    if lang in UNSPACED:  # no spaces between words: pieces of 1-4 characters of the text
        chars = regex.sub(r"\s|\p{P}", "", text)
        return [
            "".join(chars[(i := rng.randrange(len(chars) - 4)) : i + rng.randint(1, 4)])
            for _ in range(n)
        ]
    words = regex.findall(r"\w+", text)
    forms = []
    for _ in range(n):  # the front of one word and the back of another: new, plausible forms
        a, b = rng.choice(words), rng.choice(words)
        forms.append(a[: rng.randint(1, len(a))] + b[rng.randint(0, len(b) - 1) :])
    return forms


def generate(folder: Path, megabytes: float, seed: int = 0) -> None:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for lang, share in SHARES.items():
        forms = word_forms(lang, 40_000, rng)
        weights = 1.0 / np.arange(1, len(forms) + 1)  # Zipf
        cum = np.cumsum(weights / weights.sum())
        target = int(megabytes * 1e6 * share)
        sep, end = ("", "。") if lang in UNSPACED else (" ", ".")
        lines, size = [], 0
        nprng = np.random.default_rng(seed + len(lang))
        while size < target:
            k = int(nprng.integers(6, 16))
            picks = np.searchsorted(cum, nprng.random(k))
            line = sep.join(forms[int(i)] for i in picks) + end
            lines.append(line)
            size += len(line.encode("utf-8")) + 1
        (folder / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def sampled_text(paths: list[str], config: FixConfig) -> list[str]:
    """Exactly the documents (with repeats) that fix trains on: the same split and plan."""
    corpus = Corpus(paths, on_warning=lambda m: None)
    scan = _sampling.scan_corpus(corpus, want_bytes=False, keep_chars=0)
    _, plan = _sampling.split_and_plan(scan, config)
    out: list[str] = []
    for doc, c in zip(corpus.documents(), plan.copies):
        out.extend([doc.text] * int(c))
    return out


class Clock:
    """Wall time and CPU time (user + system, all threads of this process) of a block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), self._cpu()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, self._cpu() - self.cpu

    @staticmethod
    def _cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime


def bare_train(texts: list[str], vocab_size: int) -> Clock:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())  # no normaliser: fix's default (FixConfig.normalization)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(FAMILIES["mark_aware"]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    batches = [texts[i : i + 10_000] for i in range(0, len(texts), 10_000)]
    with Clock() as clock:
        tok.train_from_iterator(batches, trainer)
    return clock


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", nargs="*", help="use this corpus instead of generating one")
    # 100 MB by default: fix has a fixed cost of about a second (measuring, gate, HTML on a
    # held-out part capped per language), which a real tokenizer corpus (GBs) amortises; at
    # 20 MB it is a visible share by itself (benchmarks/RESULTS.md gives both sizes).
    ap.add_argument("--mb", type=float, default=100.0, help="size of the generated corpus")
    ap.add_argument("--vocab-size", type=int, default=32_000)
    ap.add_argument("--heldout", type=float, default=0.1)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each; the fastest counts")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        paths = args.corpus
        if not paths:
            t = time.perf_counter()
            generate(Path(tmp) / "corpus", args.mb)
            paths = [str(Path(tmp) / "corpus")]
            print(f"generated {args.mb:g} MB in {time.perf_counter() - t:.1f} s", flush=True)
        config = FixConfig(vocab_size=args.vocab_size, heldout_fraction=args.heldout)
        texts = sampled_text(paths, config)
        # Alternate (a) and (b); keep the fastest of each. Wall time suffers from other work on
        # the machine; CPU time (all threads) much less, so both are printed.
        runs_a, runs_b = [], []
        for i in range(args.repeat):
            with Clock() as clock:
                result = fix(paths, Path(tmp) / f"out{i}", config)
            runs_a.append((clock, result))
            runs_b.append(bare_train(texts, args.vocab_size))
        result = min(runs_a, key=lambda x: x[0].wall)[1]

    tm = result.timings
    mb = sum(len(x.encode("utf-8")) for x in texts) / 1e6
    print(
        f"training text: {len(texts):,} documents, {mb:.1f} MB; vocabulary "
        f"{args.vocab_size:,}; held out {result.split['heldout_documents']:,} documents"
    )
    print(
        f"fix stages (fastest run): read+split+plan {tm['scan_s']:.2f} s, stream+train "
        f"{tm['train_s']:.2f} s (of which inside the trainer call {tm['trainer_s']:.2f} s), "
        f"measure+gate+write {tm['measure_s']:.2f} s"
    )
    inside = [(c.wall, r.timings["trainer_s"]) for c, r in runs_a]
    print(
        "same run, no second process to compare with: outside the trainer call "
        + ", ".join(f"{(w - t) / w:.1%}" for w, t in inside)
        + " of each fix run"
    )
    for what in ("wall", "cpu"):
        a = min(getattr(c, what) for c, _ in runs_a)
        b = min(getattr(c, what) for c in runs_b)
        runs = "; ".join(
            f"{getattr(c, what):.2f}/{getattr(d, what):.2f}" for (c, _), d in zip(runs_a, runs_b)
        )
        print(
            f"{what:>4}: (a) fertility fix {a:7.2f} s   (b) bare BpeTrainer {b:7.2f} s   "
            f"ratio {a / b:.3f}   outside the trainer {(a - b) / a:5.1%} of the whole "
            f"(goal < 15%)   [runs a/b: {runs}]"
        )


if __name__ == "__main__":
    main()
