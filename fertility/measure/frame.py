"""Summed counts -> the tidy measurement frame: every metric of the registry
(fertility.measure.metrics) derived from the sums, with its interval where it has one."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from fertility import unicode as U
from fertility.measure import card
from fertility.measure.counters import COUNTS, Bootstrap, C, Weighted, grow_rows
from fertility.measure.metrics import DISTRIBUTIONS, METRICS, NOSPACE_SHARE_MAX, Interval, Unit
from fertility.stats import wilson_columns

if TYPE_CHECKING:  # pandas is imported when a frame is built: measuring processes never need it
    import pandas as pd


def _div(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1), np.nan)


def build_frame(accs, langs: dict[str, int], weighted: Weighted | None = None) -> pd.DataFrame:
    """The frame of every tokenizer's rows. weighted: what a --precision pass whose
    languages were drawn apart weighted (counters.Weighted): its pooled rows (all, script,
    running) in place of those the sums would give, and each language row's factor in its
    shares of the all row (every row's, pooled ones too)."""
    # deferred: pandas off the start-up path
    import pandas as pd

    lang_names = sorted(langs, key=langs.__getitem__)
    frames = []
    for acc in accs:
        t = acc.tok
        rows: list[np.ndarray] = []
        keys, groups, lo, hi, dist = [], [], [], [], []
        share: dict[int, float] = {}  # row -> its factor in a share of the all row (weighted)
        n = len(lang_names)
        size = len(acc.vocab_all)
        none = np.zeros(size, np.int64)
        lang_tab = acc.counts.lang[:n]
        total = lang_tab.sum(axis=0)
        boot_lang = grow_rows(acc.boot.lang, n)  # a language with no batch measured here

        def add(group, key, counts, sums, vocab):
            pooled = weighted.rows.get((t.label, group, key)) if weighted else None
            if pooled is None:
                a, z = Bootstrap.interval(sums)
            else:
                counts, (a, z), vocab = pooled.counts, pooled.interval, pooled.histogram
            if weighted:
                share[len(rows)] = weighted.shares.get((t.label, group, key), 1.0)
            groups.append(group)
            keys.append(key)
            rows.append(counts)
            lo.append(a)
            hi.append(z)
            dist.append(card.distribution_values(vocab, size, DISTRIBUTION_NAMES))

        every = sum(acc.vocab_lang.values(), none) if acc.track_vocab else None
        add("all", "all", total, boot_lang[:n].sum(0), every)
        total = rows[0]  # the all row's counts: the shares' denominators
        for i, name in enumerate(lang_names):
            add(
                "language",
                name,
                lang_tab[i],
                boot_lang[i],
                acc.vocab_lang.get(i, none) if acc.track_vocab else None,
            )
        for s in np.flatnonzero(acc.counts.script[:, C["chars"]]):
            add(
                "script",
                U.SCRIPTS[s],
                acc.counts.script[s],
                acc.boot.script[s],
                acc.vocab_script.get(int(s), none) if acc.track_vocab else None,
            )
        # each script's running text (fertility.unicode.running), the rows the gate judges
        for s in np.flatnonzero(acc.counts.running[:, C["chars"]]):
            add("running", U.SCRIPTS[s], acc.counts.running[s], acc.boot_running.script[s], None)
        f = pd.DataFrame(
            np.array(rows, dtype=np.int64).reshape(-1, len(COUNTS)), columns=list(COUNTS)
        )
        f.insert(0, "key", keys)
        f.insert(0, "group", groups)
        f.insert(0, "kind", t.kind)
        f.insert(0, "tokenizer", t.label)
        # without a vocabulary (a pre-tokenizer) there is no UNK or byte fallback either
        add_metrics(
            f,
            totals=dict(zip(COUNTS, total)),
            has_vocab=acc.track_vocab,
            delta=(lo, hi),
            distributions=False,  # computed below, from the histograms
            share=_factors(share, len(rows)),
        )
        # the registry's DISTRIBUTIONS, from each row's token-id histogram (null without one)
        values = np.array(dist, dtype=float).reshape(-1, len(DISTRIBUTION_NAMES))
        for j, m in enumerate(DISTRIBUTIONS):
            f[m.name] = values[:, j]
            if m.unit is Unit.TOKEN_IDS and acc.track_vocab:  # a count: an integer column
                # (null where the row has no histogram: the running-text rows)
                f[m.name] = pd.array(values[:, j], dtype="Float64").astype("Int64")
        frames.append(f)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


DISTRIBUTION_NAMES = [m.name for m in DISTRIBUTIONS]


def _factors(share: dict[int, float], n: int) -> np.ndarray | None:
    """add_metrics's `share` of n rows: the rows of `share` theirs, the others 1."""
    if not share:
        return None
    out = np.ones(n)
    out[list(share)] = list(share.values())
    return out


def add_metrics(
    f: pd.DataFrame,
    *,
    totals: Mapping | None = None,
    has_vocab: bool = True,
    delta: tuple | None = None,
    distributions: bool = True,
    share: np.ndarray | None = None,
) -> None:
    """Add to `f` (rows of summed counts: the columns of COUNTS) every metric of the registry,
    in its order: the value, then `<name>_lo`, `<name>_hi` for one with an interval.

    totals: the counts of the tokenizer's `all` row, the denominators of the shares (default:
    the row of `f` whose group is "all"; none: the shares are null). has_vocab False: the
    metrics that need a vocabulary are null (a pre-tokenizer family). delta: the (lo, hi)
    sequences of the delta-method interval (Bootstrap.interval per row); None: null. Any
    frame of counts gets the same numbers: a folded row of the table, a test's rows.
    distributions: also add the DISTRIBUTIONS columns it lacks, null (they need the rows'
    token-id histograms, which a frame of counts does not hold). share: per row, the factor
    of its counts in the shares of the all row (counters.Weighted; None: 1)."""
    if totals is None:
        every = f[f["group"] == "all"] if "group" in f else f.iloc[:0]
        totals = every.iloc[0] if len(every) else {}
    n = len(f)
    unsegmented = _div(f["nospace_chars"], f["chars"]) > NOSPACE_SHARE_MAX
    for m in METRICS:
        num = f[m.numerator[0]].to_numpy()
        for extra in m.numerator[1:]:
            num = num + f[extra].to_numpy()
        if m.of_all and share is not None:
            num = num * share
        den = np.full(n, totals.get(m.denominator, 0)) if m.of_all else f[m.denominator]
        num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
        null = np.zeros(n, dtype=bool)
        if m.spaced_only:
            null |= unsegmented
        if m.needs_vocab and not has_vocab:
            null[:] = True
        f[m.name] = np.where(null, np.nan, _div(num, den))
        if m.interval is Interval.WILSON:
            lo, hi = _wilson(num, den, ~null)
        elif m.interval is Interval.DELTA:
            lo, hi = (np.asarray(x, dtype=float) for x in delta) if delta else _nans(n, 2)
            lo, hi = np.where(null, np.nan, lo), np.where(null, np.nan, hi)
        else:
            continue
        f[m.lo] = lo
        f[m.hi] = hi
    if distributions:
        for name in DISTRIBUTION_NAMES:
            if name not in f:
                f[name] = np.full(n, np.nan)


def _wilson(k: np.ndarray, n: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """95% Wilson interval of k/n per row (fertility.stats, the one definition), null where
    n is 0 or the value is null."""
    ok = valid & (n > 0)
    lo, hi = _nans(len(ok), 2)
    lo[ok], hi[ok] = wilson_columns(k[ok], n[ok])
    return lo, hi


def _nans(n: int, k: int) -> list[np.ndarray]:
    return [np.full(n, np.nan) for _ in range(k)]


# The per-document table's columns (Report.docs), in order.
DOC_COLUMNS = (
    "tokenizer",
    "lang",
    "source",
    "line",
    "script",
    "chars",
    "graphemes",
    "bytes",
    "tokens",
)


def docs_frame(state) -> pd.DataFrame:
    """One row per (tokenizer, document) for the documents kept (parity, bootstrap checks),
    tokenizer by tokenizer in corpus order: each column built once, not a frame per batch."""
    # deferred: pandas off the start-up path
    import pandas as pd

    cols = list(DOC_COLUMNS)
    chunks = sorted(state.doc_rows, key=lambda c: c["order"])
    if not chunks:
        return pd.DataFrame(columns=cols)
    joined = lambda key: list(chain.from_iterable(c[key] for c in chunks))
    stacked = lambda key: np.concatenate([c[key] for c in chunks])
    lines = np.fromiter(chain.from_iterable(c["line"] for c in chunks), dtype=np.int64)
    base = {
        "lang": _strings(joined("lang")),
        "source": _strings(joined("source")),
        "line": lines,
        "script": pd.Series(U.SCRIPTS).array.take(stacked("script")),
        "chars": stacked("chars"),
        "graphemes": stacked("graphemes"),
        "bytes": stacked("bytes"),
    }
    parts = [
        pd.DataFrame(
            {
                "tokenizer": label,
                **base,
                "tokens": np.concatenate([c["tokens"][label] for c in chunks]),
            }
        )
        for label in chunks[0]["tokens"]
    ]
    return pd.concat(parts, ignore_index=True)[cols]


def _strings(values: list[str]):
    """A string column of a few distinct values in many rows (languages, files): each distinct
    value converted to pandas' string type once, then taken by index (converting all 200,000
    Python strings took ten times longer)."""
    # deferred: pandas off the start-up path
    import pandas as pd

    index = {v: i for i, v in enumerate(dict.fromkeys(values))}
    codes = np.fromiter(map(index.__getitem__, values), dtype=np.intp, count=len(values))
    return pd.Series(list(index)).array.take(codes)


def running_shares(frame: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float]]:
    """(tokenizer, script) -> (share of the tokenizer's characters that are the script's
    running text, share of them in the script at all), from the "running" and "script" rows.
    A script is judged when its running share reaches the policy's min_share
    (docs/GATE.md, "Running text"); below it, it is reported, not judged."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    if frame.empty:
        return out
    # char_share: the rows' characters over the all row's (every character is one script's),
    # which a --precision pass that weighted its languages makes the corpus's share
    for label, g in frame.groupby("tokenizer", sort=False):
        scripts = g[g["group"] == "script"]
        run = g[g["group"] == "running"]
        running = dict(zip(run["key"], run["char_share"].fillna(0.0)))
        for key, share in zip(scripts["key"], scripts["char_share"].fillna(0.0)):
            out[(str(label), str(key))] = (float(running.get(key, 0.0)), float(share))
    return out


def running_by_language(accs, lang_names: dict[int, str]) -> dict:
    """Report.running_langs: (label, script) -> {language: running characters}."""
    out: dict = {}
    for a in accs:
        table = a.counts.running_lang
        for s in np.flatnonzero(table.sum(axis=0)):
            out[(a.tok.label, U.SCRIPTS[s])] = {
                lang_names[i]: int(table[i, s]) for i in np.flatnonzero(table[:, s])
            }
    return out


def language_shares(
    frame: pd.DataFrame, running_langs: dict
) -> dict[tuple[str, str], tuple[str, float]]:
    """(tokenizer, script) -> (the language, its share): the language whose own characters
    the script's running text is the largest share of (Report.running_langs), so a script
    is judged by its language's text, whatever else the corpus holds (docs/GATE.md,
    "Running text")."""
    out: dict[tuple[str, str], tuple[str, float]] = {}
    langs = frame[frame["group"] == "language"]
    chars = {
        (str(t), str(k)): float(c)
        for t, k, c in zip(langs["tokenizer"], langs["key"], langs["chars"])
    }
    for (label, script), per_lang in running_langs.items():
        best = ("", 0.0)
        for lang, n in per_lang.items():
            total = chars.get((label, lang), 0.0)
            share = n / total if total > 0 else 0.0
            if share > best[1]:
                best = (lang, share)
        out[(label, script)] = best
    return out
