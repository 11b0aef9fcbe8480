"""Parallel files and the token premium (for diagnose's parity rule and the gate).

Two files are parallel when they hold different languages, have the same number of lines
(the highest line number holding a document) and share at least `min_overlap` of their
document lines (blank lines are not documents, so a few may differ). Lines align on their
number. When a file could pair with several reference files, the one with the same file
name (`en/part-1.txt` with `bn/part-1.txt`) wins; if that does not decide, it is skipped.

The premium of language L is sum(tokens of L) / sum(tokens of the reference) over aligned
lines (sum then divide), with a 95% percentile bootstrap interval over lines.
"""

from __future__ import annotations

import os
import zlib

import numpy as np
import pandas as pd

EMPTY = pd.DataFrame(
    {
        "tokenizer": pd.Series(dtype=str),
        "lang": pd.Series(dtype=str),
        "reference": pd.Series(dtype=str),
        "lines": pd.Series(dtype=int),
        "premium": pd.Series(dtype=float),
        "lo": pd.Series(dtype=float),
        "hi": pd.Series(dtype=float),
    }
)


def pair_rng(seed: int, tokenizer: str, lang: str) -> np.random.Generator:
    """The bootstrap's draws for one (tokenizer, language): a stream of its own, so a
    tokenizer's interval is the same whether it is gated alone or beside others (one shared
    generator made the report's bounds depend on which tokenizers came before it)."""
    key = [zlib.crc32(tokenizer.encode("utf-8")), zlib.crc32(lang.encode("utf-8"))]
    return np.random.default_rng([seed, *key])


def bootstrap_ratio(
    num: np.ndarray, den: np.ndarray, reps: int, rng: np.random.Generator
) -> tuple[float, float]:
    """95% percentile interval of sum(num)/sum(den), resampling paired items."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    n = len(num)
    if n == 0 or reps <= 0:
        return (float("nan"), float("nan"))
    step = max(1, min(reps, 4_000_000 // n))  # bounded memory for long corpora
    stats = []
    for done in range(0, reps, step):
        idx = rng.integers(0, n, size=(min(step, reps - done), n))
        d = den[idx].sum(axis=1)
        stats.append(np.divide(num[idx].sum(axis=1), d, out=np.full(len(d), np.inf), where=d > 0))
    lo, hi = np.percentile(np.concatenate(stats), [2.5, 97.5])
    return (float(lo), float(hi))


def _pairs(
    files: pd.DataFrame, reference: str, min_lines: int, min_overlap: float
) -> list[tuple[str, str, str]]:
    """(source, lang, reference source) for every file parallel to a reference file."""
    refs = files[files["lang"] == reference]
    out = []
    for f in files[files["lang"] != reference].itertuples():
        cands = []
        for g in refs.itertuples():
            shared = len(f.lines & g.lines)
            if (
                f.nlines == g.nlines
                and shared >= min_lines
                and shared >= min_overlap * max(len(f.lines), len(g.lines))
            ):
                cands.append(g.source)
        if len(cands) > 1:
            same = [c for c in cands if os.path.basename(c) == os.path.basename(f.source)]
            cands = same if len(same) == 1 else []
        if len(cands) == 1:
            out.append((f.source, f.lang, cands[0]))
    return out


def premiums(
    docs: pd.DataFrame,
    reference: str,
    *,
    min_lines: int,
    min_overlap: float,
    reps: int,
    seed: int,
) -> pd.DataFrame:
    # a vectorised comparison: set() of an Arrow string column builds a Python str per row
    if docs.empty or not (docs["lang"] == reference).any():
        return EMPTY.copy()
    first = docs[docs["tokenizer"] == docs["tokenizer"].iloc[0]]
    files = (
        first.groupby("source")
        .agg(lang=("lang", "first"), nlines=("line", "max"), lines=("line", frozenset))
        .reset_index()
    )
    pairs = _pairs(files, reference, min_lines, min_overlap)
    if not pairs:
        return EMPTY.copy()
    rows = []
    for label, d in docs.groupby("tokenizer", sort=False):
        tok = d.set_index(["source", "line"])["tokens"]
        by_lang: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for src, lang, ref in pairs:
            a, b = tok.loc[src], tok.loc[ref]
            common = a.index.intersection(b.index)
            by_lang.setdefault(lang, []).append(
                (a.loc[common].to_numpy(), b.loc[common].to_numpy())
            )
        for lang, parts in by_lang.items():
            num = np.concatenate([p[0] for p in parts])
            den = np.concatenate([p[1] for p in parts])
            lo, hi = bootstrap_ratio(num, den, reps, pair_rng(seed, str(label), lang))
            rows.append(
                {
                    "tokenizer": str(label),
                    "lang": lang,
                    "reference": reference,
                    "lines": len(num),
                    "premium": float(num.sum() / den.sum()),
                    "lo": lo,
                    "hi": hi,
                }
            )
    return pd.DataFrame(rows, columns=EMPTY.columns)
