"""Summed counts -> the tidy measurement frame, with ratios derived from the sums."""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from fertility import unicode as U
from fertility.measure.counters import COUNTS, Bootstrap, C, grow_rows
from fertility.stats import wilson

if TYPE_CHECKING:  # pandas is imported when a frame is built: measuring processes never need it
    import pandas as pd

# Share of a row's characters in scripts written without spaces above which a word count
# would be invented, so tokens_per_word and continued_word_rate are null (docs/METRICS.md).
NOSPACE_SHARE_MAX = 0.5


def _div(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1), np.nan)


def build_frame(accs, langs: dict[str, int]) -> pd.DataFrame:
    # deferred: pandas off the start-up path
    import pandas as pd

    lang_names = sorted(langs, key=langs.get)
    frames = []
    for acc in accs:
        t = acc.tok
        rows, keys, groups, lo, hi, used = [], [], [], [], [], []
        n = len(lang_names)
        lang_tab = acc.counts.lang[:n]
        total = lang_tab.sum(axis=0)
        boot_lang = grow_rows(acc.boot.lang, n)  # a language with no batch measured here

        def add(group, key, counts, sums, vocab):
            groups.append(group)
            keys.append(key)
            rows.append(counts)
            a, z = Bootstrap.interval(sums)
            lo.append(a)
            hi.append(z)
            used.append(int(vocab.sum()) if vocab is not None else np.nan)

        add("all", "all", total, boot_lang[:n].sum(0), acc.vocab_all if acc.track_vocab else None)
        for i, name in enumerate(lang_names):
            add(
                "language",
                name,
                lang_tab[i],
                boot_lang[i],
                acc.vocab_lang.get(i, np.zeros(0, bool)) if acc.track_vocab else None,
            )
        for s in np.flatnonzero(acc.counts.script[:, C["chars"]]):
            add(
                "script",
                U.SCRIPTS[s],
                acc.counts.script[s],
                acc.boot.script[s],
                acc.vocab_script.get(int(s), np.zeros(0, bool)) if acc.track_vocab else None,
            )
        f = pd.DataFrame(
            np.array(rows, dtype=np.int64).reshape(-1, len(COUNTS)), columns=list(COUNTS)
        )
        f.insert(0, "key", keys)
        f.insert(0, "group", groups)
        f.insert(0, "kind", t.kind)
        f.insert(0, "tokenizer", t.label)
        _ratios(f, total)
        if not acc.track_vocab:  # a pre-tokenizer has no vocabulary, UNK or byte fallback
            f[["unk_rate", "byte_fallback_rate"]] = np.nan
        f["chars_per_token_lo"] = lo
        f["chars_per_token_hi"] = hi
        f["vocab_used"] = pd.array(used, dtype="Int64") if acc.track_vocab else pd.NA
        frames.append(f)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _ratios(f: pd.DataFrame, total: np.ndarray) -> None:
    tokens_total = total[C["tokens"]]
    bytes_total = total[C["bytes"]]
    f["chars_per_token"] = _div(f.chars, f.tokens)
    f["graphemes_per_token"] = _div(f.graphemes, f.tokens)
    f["bytes_per_token"] = _div(f.bytes, f.tokens)
    unsegmented = _div(f.nospace_chars, f.chars) > NOSPACE_SHARE_MAX
    f["tokens_per_word"] = np.where(unsegmented, np.nan, _div(f.word_tokens, f.words))
    f["continued_word_rate"] = np.where(unsegmented, np.nan, _div(f.continued_words, f.words))
    f["unk_rate"] = _div(f.unk_tokens, f.tokens)
    f["byte_fallback_rate"] = _div(f.byte_fallback_tokens, f.tokens)
    f["token_share"] = _div(f.tokens, np.full(len(f), tokens_total))
    f["byte_share"] = _div(f.bytes, np.full(len(f), bytes_total))
    f["roundtrip_failure_rate"] = _div(f.roundtrip_failures, f.roundtrip_checked)
    f["mark_initial_rate"] = _div(f.mark_initial_tokens, f.tokens)
    f["grapheme_split_rate"] = _div(f.grapheme_split_boundaries, f.token_boundaries)
    f["chars_per_pretoken"] = _div(f.pretoken_chars, f.pretokens)
    f["char_share"] = _div(f.chars, np.full(len(f), total[C["chars"]]))
    # Pre-tokens that begin with a combining mark or a ZWJ: the pre-tokenizer itself cut inside
    # a cluster (mark_initial_rate counts tokens, which the vocabulary also decides). A ZWNJ
    # asks for the parts to stay apart, so a cut before it is kept separate.
    _rate(
        f,
        "pretoken_mark_initial_rate",
        f.pretoken_mark_initial + f.pretoken_zwj_initial,
        f.pretokens,
    )
    _rate(f, "pretoken_zwnj_initial_rate", f.pretoken_zwnj_initial, f.pretokens)
    _rate(f, "pretoken_cut_word_rate", f.pretoken_cut_words, f.pretoken_words)


def _rate(f: pd.DataFrame, name: str, k, n) -> None:
    """A share with its 95% Wilson interval (`name`, `name_lo`, `name_hi`); null when n is 0."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    f[name] = _div(k, n)
    iv = [wilson(a, b) if b > 0 else (np.nan, np.nan) for a, b in zip(k, n)]
    f[name + "_lo"] = [a for a, _ in iv]
    f[name + "_hi"] = [b for _, b in iv]


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
