"""Per-tokenizer counters, fed one batch at a time with vectorised numpy.

Every count is kept per language and per script; ratios are derived only at the end from the
summed counts (sum, then divide). Memory is fixed by the number of groups, not by the corpus.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from fertility import unicode as U
from fertility._stats import percentile_interval

# Raw counts, in the order of the columns of the measurement frame.
COUNTS = (
    "documents", "chars", "graphemes", "bytes", "words", "tokens", "continued_words",
    "unk_tokens", "byte_fallback_tokens", "mark_initial_tokens", "token_boundaries",
    "grapheme_split_boundaries", "roundtrip_checked", "roundtrip_failures", "pretoken_chars",
    "pretokens", "nospace_chars", "word_tokens", "pretoken_mark_initial", "pretoken_zwj_initial",
    "pretoken_zwnj_initial", "pretoken_words", "pretoken_cut_words",
)
C = {name: i for i, name in enumerate(COUNTS)}
NS = len(U.SCRIPTS)
NOSPACE = np.zeros(NS, dtype=bool)  # per script index: written without spaces
NOSPACE[[U.SCRIPT_INDEX[s] for s in U.NO_SPACE_SCRIPTS if s in U.SCRIPT_INDEX]] = True


def grow_rows(a: np.ndarray, n: int) -> np.ndarray:
    """`a` with zero rows appended up to `n` rows (languages appear as the corpus goes)."""
    if a.shape[0] >= n:
        return a
    return np.vstack([a, np.zeros((n - a.shape[0],) + a.shape[1:], dtype=a.dtype)])


class GroupCounts:
    """A (groups x counts) table for languages (growing) and one for scripts (fixed)."""

    def __init__(self) -> None:
        self.lang = np.zeros((0, len(COUNTS)), dtype=np.int64)
        self.script = np.zeros((NS, len(COUNTS)), dtype=np.int64)

    def add(self, name: str, per_lang: np.ndarray, per_script: np.ndarray) -> None:
        self.lang = grow_rows(self.lang, len(per_lang))
        self.lang[: len(per_lang), C[name]] += per_lang
        self.script[:, C[name]] += per_script

    def add_table(self, lang: np.ndarray, script: np.ndarray) -> None:
        """Add whole (groups x counts) tables."""
        self.lang = grow_rows(self.lang, len(lang))
        self.lang[: len(lang)] += lang
        self.script += script


class Bootstrap:
    """Poisson bootstrap over documents, streamed: each document gets B Poisson(1) weights,
    and weighted sums of chars and tokens are kept per group, so the 95% interval of
    chars_per_token needs no per-document storage. The same weights serve every tokenizer."""

    def __init__(self, replicates: int) -> None:
        self.B = replicates
        shape = lambda n: np.zeros((n, replicates))  # noqa: E731
        self.lang_chars, self.lang_tokens = shape(0), shape(0)
        self.script_chars, self.script_tokens = shape(NS), shape(NS)

    def add(self, W: np.ndarray, doc_lang: np.ndarray, n_langs: int,
            per_doc_script_chars: np.ndarray, per_doc_script_tokens: np.ndarray,
            present: np.ndarray) -> None:
        """per_doc_*: (documents x k) counts; column j is the global script present[j]."""
        self.lang_chars = grow_rows(self.lang_chars, n_langs)
        self.lang_tokens = grow_rows(self.lang_tokens, n_langs)
        # Only the languages and scripts present in the batch: small dense products.
        langs, inverse = np.unique(doc_lang, return_inverse=True)
        onehot = np.zeros((len(langs), len(doc_lang)))
        onehot[inverse, np.arange(len(doc_lang))] = 1.0
        self.lang_chars[langs] += (onehot * per_doc_script_chars.sum(axis=1)) @ W
        self.lang_tokens[langs] += (onehot * per_doc_script_tokens.sum(axis=1)) @ W
        self.script_chars[present] += per_doc_script_chars.T @ W
        self.script_tokens[present] += per_doc_script_tokens.T @ W

    @staticmethod
    def interval(chars: np.ndarray, tokens: np.ndarray) -> tuple[float, float]:
        with np.errstate(divide="ignore", invalid="ignore"):
            ci = percentile_interval(chars / tokens)
        return ci if ci is not None else (float("nan"), float("nan"))


class TokenizerAccumulator:
    """Everything measured for one tokenizer, across all batches."""

    def __init__(self, tok, bootstrap: int, samples_per_script: int = 3) -> None:
        self.tok = tok
        self.counts = GroupCounts()
        self.boot = Bootstrap(bootstrap)
        size = max(int(getattr(tok, "vocab_size", 0) or 0), 0)
        self.track_vocab = tok.kind != "pretokenizer" and size > 0
        self.vocab_lang: dict[int, np.ndarray] = {}
        self.vocab_script: dict[int, np.ndarray] = {}
        self.vocab_all = np.zeros(size if self.track_vocab else 0, dtype=bool)
        self.partial = tok.partial_mask() if self.track_vocab else None
        self.unk_id = getattr(tok, "unk_id", None)
        self.byte_fallback_chars: dict[int, Counter] = {}
        self.unk_chars: dict[int, Counter] = {}
        self.samples: dict[int, list] = {}
        self.samples_per_script = samples_per_script
        self.normalization = {"checked_docs": 0, "changed_docs": 0, "examples": []}
        # What the round trip changed, per language id: fertility._roundtrip.new_changes()
        self.roundtrip: dict[int, dict] = {}

    def mark_vocab(self, table: dict, keys: np.ndarray, ids: np.ndarray) -> None:
        """Mark `ids` as used in the group of each key (vocab_lang or vocab_script)."""
        order = np.argsort(keys, kind="stable")
        keys, ids = keys[order], ids[order]
        bounds = np.flatnonzero(np.diff(keys)) + 1
        for part_keys, part_ids in zip(np.split(keys, bounds), np.split(ids, bounds)):
            if part_keys.size:
                mask = table.setdefault(int(part_keys[0]), np.zeros(len(self.vocab_all), bool))
                mask[part_ids] = True

    def add_chars(self, table: dict, key_script: np.ndarray, cps: np.ndarray) -> None:
        """Count code points per script (byte_fallback_chars or unk_chars)."""
        if cps.size == 0:
            return
        pairs = key_script.astype(np.int64) * 0x110000 + cps
        uniq, counts = np.unique(pairs, return_counts=True)
        for pair, n in zip(uniq.tolist(), counts.tolist()):
            table.setdefault(pair // 0x110000, Counter())[chr(pair % 0x110000)] += n

