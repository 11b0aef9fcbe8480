"""Summed counts -> the measurement table (Report.table, a dict per row): every metric of the
registry (fertility.measure.metrics) derived from the sums, with its interval where it has
one; the same rows as a pandas DataFrame (Report.frame) and the per-document table's
columns, for those who ask for them."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from fertility import unicode as U
from fertility.measure import card
from fertility.measure.counters import COUNTS, Bootstrap, C, Weighted, factorize, grow_rows
from fertility.measure.metrics import DISTRIBUTIONS, METRICS, NOSPACE_SHARE_MAX, Interval, Unit
from fertility.numbers import finite
from fertility.stats import wilson_columns

if TYPE_CHECKING:  # pandas is imported when a frame is built: measuring processes never need it
    import pandas as pd


def _div(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1), np.nan)


def build_table(accs, langs: dict[str, int], weighted: Weighted | None = None) -> list[dict]:
    """The measurement table of every tokenizer: a row per (tokenizer, group, key) as a dict
    of plain Python values (tokenizer, kind, group, key, the COUNTS, each metric of METRICS
    with its interval, the DISTRIBUTIONS; null: NaN, or None in a token-id count), built from
    the sums without pandas (Report.frame is the same table as a DataFrame, on demand).
    weighted: what a --precision pass whose languages were drawn apart weighted
    (counters.Weighted): its pooled rows (all, script, running) in place of those the sums
    would give, and each language row's factor in its shares of the all row (every row's,
    pooled ones too)."""
    lang_names = sorted(langs, key=langs.__getitem__)
    table: list[dict] = []
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
        counts = np.array(rows, dtype=np.int64).reshape(-1, len(COUNTS))
        cols: dict[str, Any] = {
            "tokenizer": [t.label] * len(rows),
            "kind": [t.kind] * len(rows),
            "group": groups,
            "key": keys,
            **{c: counts[:, j] for j, c in enumerate(COUNTS)},
        }
        # without a vocabulary (a pre-tokenizer) there is no UNK or byte fallback either
        add_metrics(
            cols,
            totals=dict(zip(COUNTS, total)),
            has_vocab=acc.track_vocab,
            delta=(lo, hi),
            distributions=False,  # computed below, from the histograms
            share=_factors(share, len(rows)),
        )
        # the registry's DISTRIBUTIONS, from each row's token-id histogram (null without one)
        values = np.array(dist, dtype=float).reshape(-1, len(DISTRIBUTION_NAMES))
        for j, name in enumerate(DISTRIBUTION_NAMES):
            cols[name] = values[:, j]
        table.extend(records(cols))
    return table


def records(cols: Mapping[str, Any]) -> list[dict]:
    """Columns (equal-length sequences) -> one dict per row of plain Python values: numbers
    as int and float (NaN where null), a token-id count (Unit.TOKEN_IDS) an int or None."""
    names = list(cols)
    lists = []
    for name in names:
        values = np.asarray(cols[name]).tolist()
        if name in COUNT_IDS:
            values = [None if v != v else int(v) for v in values]  # v != v: NaN
        lists.append(values)
    return [dict(zip(names, row)) for row in zip(*lists)]


def to_frame(table: list[dict]) -> pd.DataFrame:
    """The measurement table as one tidy DataFrame (Report.frame): a token-id count is a
    nullable integer column (null where the row has no histogram: the running-text rows)."""
    # deferred: pandas off the start-up path, and off the report's when no one asks for it
    import pandas as pd

    if not table:
        return pd.DataFrame()
    f = pd.DataFrame.from_records(table, columns=list(table[0]))
    for name in COUNT_IDS:
        if name in f:
            f[name] = pd.array(f[name].astype("float64"), dtype="Float64").astype("Int64")
    return f


DISTRIBUTION_NAMES = [m.name for m in DISTRIBUTIONS]
# the distributions that count token ids: integers, None where a row has no histogram
COUNT_IDS = frozenset(m.name for m in DISTRIBUTIONS if m.unit is Unit.TOKEN_IDS)


def _factors(share: dict[int, float], n: int) -> np.ndarray | None:
    """add_metrics's `share` of n rows: the rows of `share` theirs, the others 1."""
    if not share:
        return None
    out = np.ones(n)
    out[list(share)] = list(share.values())
    return out


def add_metrics(
    f,
    *,
    totals: Mapping | None = None,
    has_vocab: bool = True,
    delta: tuple | None = None,
    distributions: bool = True,
    share: np.ndarray | None = None,
) -> None:
    """Add to `f` (columns of summed counts, COUNTS: a dict of arrays or a DataFrame) every
    metric of the registry, in its order: the value, then `<name>_lo`, `<name>_hi` for one
    with an interval.

    totals: the counts of the tokenizer's `all` row, the denominators of the shares (default:
    the row of `f` whose group is "all"; none: the shares are null). has_vocab False: the
    metrics that need a vocabulary are null (a pre-tokenizer family). delta: the (lo, hi)
    sequences of the delta-method interval (Bootstrap.interval per row); None: null. Any
    table of counts gets the same numbers: a folded row of the table, a test's rows.
    distributions: also add the DISTRIBUTIONS columns it lacks, null (they need the rows'
    token-id histograms, which a table of counts does not hold). share: per row, the factor
    of its counts in the shares of the all row (counters.Weighted; None: 1)."""
    col = lambda name: np.asarray(f[name])
    n = len(col("chars"))
    if totals is None:
        every = np.flatnonzero(col("group") == "all") if "group" in f else np.array([], int)
        totals = {c: col(c)[every[0]] for c in COUNTS if c in f} if len(every) else {}
    unsegmented = _div(col("nospace_chars"), col("chars")) > NOSPACE_SHARE_MAX
    for m in METRICS:
        num = col(m.numerator[0])
        for extra in m.numerator[1:]:
            num = num + col(extra)
        if m.of_all and share is not None:
            num = num * share
        den = np.full(n, totals.get(m.denominator, 0)) if m.of_all else col(m.denominator)
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


# A pass's per-document rows (PassState.doc_rows, one dict per batch: measure.batch) hold
# these lists of strings and arrays of one number per document, and "tokens": label -> array.
ROW_STRINGS = ("lang", "source")
ROW_NUMBERS = ("line", "script", "chars", "graphemes", "bytes")


def doc_columns(state) -> dict | None:
    """The per-document table's columns (Report.docs, as a frame on demand): the kept
    documents' (fertility.measure.passes.PassState.doc_rows) in corpus order, each built once
    (not a frame per batch): "lang" and "source" lists, "line", "script" (codes into
    unicode.SCRIPTS), "chars", "graphemes", "bytes" arrays, and "tokens": label -> array.
    None when no document was kept."""
    chunks = sorted(state.doc_rows, key=lambda c: c["order"])
    return joined_rows(chunks) if chunks else None


def joined_rows(rows: list[dict]) -> dict:
    """Rows (at least one) end to end, a column each: ROW_STRINGS as lists, ROW_NUMBERS as
    int64 arrays, "tokens": label -> array."""
    return {
        **{k: list(chain.from_iterable(r[k] for r in rows)) for k in ROW_STRINGS},
        **{k: np.concatenate([np.asarray(r[k], np.int64) for r in rows]) for k in ROW_NUMBERS},
        "tokens": {
            label: np.concatenate([r["tokens"][label] for r in rows]) for label in rows[0]["tokens"]
        },
    }


def docs_frame(cols: dict | None) -> pd.DataFrame:
    """One row per (tokenizer, document) of doc_columns, tokenizer by tokenizer in corpus
    order (DOC_COLUMNS)."""
    # deferred: pandas off the start-up path, and off the report's when no one asks for it
    import pandas as pd

    if cols is None:
        return pd.DataFrame(columns=list(DOC_COLUMNS))
    base = {
        "lang": _strings(cols["lang"]),
        "source": _strings(cols["source"]),
        "line": cols["line"],
        "script": pd.Series(U.SCRIPTS).array.take(cols["script"]),
        "chars": cols["chars"],
        "graphemes": cols["graphemes"],
        "bytes": cols["bytes"],
    }
    parts = [
        pd.DataFrame({"tokenizer": label, **base, "tokens": tokens})
        for label, tokens in cols["tokens"].items()
    ]
    return pd.concat(parts, ignore_index=True)[list(DOC_COLUMNS)]


def _strings(values: list[str]):
    """A string column of a few distinct values in many rows (languages, files): each distinct
    value converted to pandas' string type once, then taken by index (converting all 200,000
    Python strings took ten times longer)."""
    # deferred: pandas off the start-up path
    import pandas as pd

    distinct, codes = factorize(values)
    return pd.Series(distinct).array.take(codes)


def running_shares(table: list[dict]) -> dict[tuple[str, str], tuple[float, float]]:
    """(tokenizer, script) -> (share of the tokenizer's characters that are the script's
    running text, share of them in the script at all), from the "running" and "script" rows.
    A script is judged when its running share reaches the policy's min_share
    (docs/GATE.md, "Running text"); below it, it is reported, not judged."""
    # char_share: the rows' characters over the all row's (every character is one script's),
    # which a --precision pass that weighted its languages makes the corpus's share
    # (a null share, of a row of no characters, reads as 0)
    running = {
        (r["tokenizer"], r["key"]): finite(r["char_share"]) or 0.0
        for r in table
        if r["group"] == "running"
    }
    return {
        (str(r["tokenizer"]), str(r["key"])): (
            running.get((r["tokenizer"], r["key"]), 0.0),
            finite(r["char_share"]) or 0.0,
        )
        for r in table
        if r["group"] == "script"
    }


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
    table: list[dict], running_langs: dict
) -> dict[tuple[str, str], tuple[str, float]]:
    """(tokenizer, script) -> (the language, its share): the language whose own characters
    the script's running text is the largest share of (Report.running_langs), so a script
    is judged by its language's text, whatever else the corpus holds (docs/GATE.md,
    "Running text")."""
    out: dict[tuple[str, str], tuple[str, float]] = {}
    chars = {
        (str(r["tokenizer"]), str(r["key"])): float(r["chars"])
        for r in table
        if r["group"] == "language"
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
