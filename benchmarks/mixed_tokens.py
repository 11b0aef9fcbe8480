"""How much does counting a token of several scripts wholly in one (docs/METRICS.md, "Which
script a token belongs to") move a script row, against splitting it in fractions?

    python benchmarks/mixed_tokens.py                 # every fixture language, two BPEs

For each language's real text (the fixtures' ROOT/text/<lang>.txt) and each tokenizer, every
token of the library's own encoding (tokenizers, with its offsets) is attributed in a plain
per-token loop: a byte piece to its character's script, else the script of its own
characters, several of them (b) in fractions, by characters, or (a) wholly to the one with
most characters (fertility's rule until 2026-12). Prints the share of tokens with letters of
two or more scripts and, per script row with over 100 tokens, how far (a) and fertility's
own count (`fertility report`'s script rows: one of the scripts, drawn with probability its
share) are from (b).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: checkout.py
from checkout import use_checkout  # noqa: E402

ROOT = use_checkout()  # fertility (trainer/, eval/ included) from this checkout

import regex  # noqa: E402
from analyze_throughput import realworld_root  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from fertility import unicode as U  # noqa: E402
from fertility.measure import analyze  # noqa: E402
from fertility.unicode.tables import SCRIPT_TABLE  # noqa: E402

OWN = regex.compile(r"[^\p{Script=Common}\p{Script=Inherited}\p{Script=Unknown}]")
TOKENIZERS = ("bpe-o200k/tokenizer.json", "bpe-gpt2/tokenizer.json")


def scripts_of(text: str) -> list[str]:
    """Each character's script, Common and Inherited ones resolved as fertility resolves them
    (the script before, else after), read from fertility's script table."""
    U.ensure_classified(U.code_points(text))  # fills the script table for these code points
    raw = [U.SCRIPTS[SCRIPT_TABLE[ord(c)]] for c in text]
    real = [s not in ("Zyyy", "Zinh") for s in raw]
    out = []
    for i, s in enumerate(raw):
        before = [raw[j] for j in range(i - 1, -1, -1) if real[j]]
        after = [raw[j] for j in range(i + 1, len(raw)) if real[j]]
        out.append(s if real[i] else before[0] if before else after[0] if after else "Zyyy")
    return out


def main() -> None:
    root = realworld_root()
    for path in sorted((root / "text").glob("*.txt")):
        texts = [t for t in path.read_text("utf-8").splitlines() if t.strip()]
        for name in TOKENIZERS:
            tok = Tokenizer.from_file(str(root / "tokenizers" / name))
            f = analyze([str(path)], [str(root / "tokenizers" / name)], workers=1).frame
            ours = dict(
                zip(f.loc[f.group == "script", "key"], f.loc[f.group == "script", "tokens"])
            )
            whole, frac, mixed, total = Counter(), Counter(), 0, 0
            for text, enc in zip(texts, tok.encode_batch(texts, add_special_tokens=False)):
                script = scripts_of(text)
                for tid, (s, e) in zip(enc.ids, enc.offsets):
                    total += 1
                    e = max(e, s + 1) if s < len(text) else len(text)
                    s = min(s, len(text) - 1)
                    if "\ufffd" in tok.decode([tid]):
                        whole[script[e - 1]] += 1
                        frac[script[e - 1]] += 1
                        continue
                    own = Counter(script[i] for i in range(s, e) if OWN.match(text[i]))
                    if not own:
                        whole[script[s]] += 1
                        frac[script[s]] += 1
                        continue
                    first = [script[i] for i in range(s, e) if OWN.match(text[i])]
                    best = max(own.values())
                    whole[next(x for x in first if own[x] == best)] += 1
                    mixed += len(own) > 1
                    for x, k in own.items():
                        frac[x] += k / sum(own.values())
            rows = sorted(x for x in frac if frac[x] > 100)
            print(
                f"{path.stem:3} {name.split('/')[0]:10} tokens {total:7,} with two scripts "
                f"{mixed / total:6.2%}  / fractions - 1, whole then drawn: "
                + " ".join(
                    f"{x} {whole[x] / frac[x] - 1:+.2%} {ours.get(x, 0) / frac[x] - 1:+.2%}"
                    for x in rows
                )
            )


if __name__ == "__main__":
    main()
