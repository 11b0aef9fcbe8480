"""Per-tokenizer counters, fed one batch at a time with vectorised numpy.

Every count is kept per language and per script; ratios are derived only at the end from the
summed counts (sum, then divide). Memory is fixed by the number of groups, not by the corpus.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import numpy as np

from fertility import unicode as U
from fertility.measure import roundtrip
from fertility.stats import Z95
from fertility.tokenizers.kinds import capabilities

# Raw counts, in the order of the columns of the measurement frame.
COUNTS = (
    "documents",
    "chars",
    "graphemes",
    "bytes",
    "words",
    "tokens",
    "continued_words",
    "unk_tokens",
    "byte_fallback_tokens",
    "mark_initial_tokens",
    "token_boundaries",
    "grapheme_split_boundaries",
    "roundtrip_checked",
    "roundtrip_failures",
    "pretoken_chars",
    "pretokens",
    "nospace_chars",
    "word_tokens",
    "pretoken_mark_initial",
    "pretoken_zwj_initial",
    "pretoken_zwnj_initial",
    "pretoken_words",
    "pretoken_cut_words",
)
C = {name: i for i, name in enumerate(COUNTS)}
# The counts of the per-document checks (round trip, the pre-tokenizer's ceiling), made on
# the detail subset: the first documents of each language up to a fixed number
# (fertility.measure.batch._detail_mask), not a share of what was read. A --precision pass
# that weights its languages sums these as they are (fertility.measure.precision).
DETAIL = (
    "roundtrip_checked",
    "roundtrip_failures",
    "pretoken_chars",
    "pretokens",
    "pretoken_mark_initial",
    "pretoken_zwj_initial",
    "pretoken_zwnj_initial",
    "pretoken_words",
    "pretoken_cut_words",
)
NS = len(U.SCRIPTS)


def factorize(values: list[str]) -> tuple[list[str], np.ndarray]:
    """A column of a few distinct strings in many rows (languages, files): the distinct
    values in order of first appearance, and each row's index among them (one dict lookup
    a row, in C; the per-document table's columns, its frame and parity's files use it)."""
    distinct = list(dict.fromkeys(values))
    index = {v: i for i, v in enumerate(distinct)}
    return distinct, np.fromiter(map(index.__getitem__, values), np.intp, len(values))


NOSPACE = np.zeros(NS, dtype=bool)  # per script index: written without spaces
NOSPACE[[U.SCRIPT_INDEX[s] for s in U.NO_SPACE_SCRIPTS if s in U.SCRIPT_INDEX]] = True


def grow_rows(a: np.ndarray, n: int) -> np.ndarray:
    """`a` with zero rows appended up to `n` rows (languages appear as the corpus goes)."""
    if a.shape[0] >= n:
        return a
    return np.vstack([a, np.zeros((n - a.shape[0],) + a.shape[1:], dtype=a.dtype)])


class GroupTables:
    """A (languages x WIDTH) int64 table, growing as languages appear, and a fixed
    (scripts x WIDTH) one; another process's tables of the same kind add in with `merge`."""

    WIDTH = 0

    def __init__(self) -> None:
        self.lang = np.zeros((0, self.WIDTH), dtype=np.int64)
        self.script = np.zeros((NS, self.WIDTH), dtype=np.int64)

    def add_table(self, lang: np.ndarray, script: np.ndarray) -> None:
        """Add whole (groups x WIDTH) tables."""
        self.lang = grow_rows(self.lang, len(lang))
        self.lang[: len(lang)] += lang
        self.script += script

    def merge(self, other: GroupTables) -> None:
        self.add_table(other.lang, other.script)


class GroupCounts(GroupTables):
    """The counts of COUNTS per language and per script, and per script on its running text
    alone (`running`, fertility.unicode.running: the rows of the "running" group)."""

    WIDTH = len(COUNTS)

    def __init__(self) -> None:
        super().__init__()
        self.running = np.zeros((NS, self.WIDTH), dtype=np.int64)
        # running-text characters per (language, script): a script is judged on its share of
        # some language's own text, not of the whole corpus (docs/GATE.md, "Running text")
        self.running_lang = np.zeros((0, NS), dtype=np.int64)

    def add_running(self, per_script: np.ndarray, names: tuple[str, ...]) -> None:
        """Add the running-text counts `names`: a (scripts x names) table."""
        self.running[:, [C[name] for name in names]] += per_script

    def add_running_lang(self, per_lang: np.ndarray, present: np.ndarray) -> None:
        """Add running characters: a (languages x scripts present) table."""
        self.running_lang = grow_rows(self.running_lang, len(per_lang))
        rows = self.running_lang[: len(per_lang)]  # a view: += writes through
        rows[:, present] += per_lang

    def merge(self, other: GroupTables) -> None:
        super().merge(other)
        if isinstance(other, GroupCounts):
            self.running += other.running
            n = max(len(self.running_lang), len(other.running_lang))
            self.running_lang = grow_rows(self.running_lang, n)
            self.running_lang += grow_rows(other.running_lang, n)

    def add(self, names: tuple[str, ...], per_lang: np.ndarray, per_script: np.ndarray) -> None:
        """Add the counts `names`: (languages x names) and (scripts x names) tables."""
        cols = [C[name] for name in names]
        self.lang = grow_rows(self.lang, len(per_lang))
        self.lang[: len(per_lang), cols] += per_lang
        self.script[:, cols] += per_script


class DocGroups:
    """The groups the documents of one batch count in: runs of one language (documents come
    in corpus order, so a batch is usually one run) and the scripts present.

    Per-document counts are (k x documents) matrices, row j for the script present[j]:
    script-major, so a script's total is a contiguous row sum (summing the columns of a
    (documents x k) matrix took twenty times longer) and a language's is one reduceat per run.
    """

    def __init__(self, doc_lang: np.ndarray, n_langs: int, present: np.ndarray) -> None:
        self.n_langs = n_langs
        self.present = present
        self.run_start = np.flatnonzero(np.diff(doc_lang, prepend=-1))
        self.run_lang = doc_lang[self.run_start]

    def per_lang(self, per_doc: np.ndarray) -> np.ndarray:
        """(..., documents) -> (languages, ...) sums."""
        out = np.zeros((self.n_langs, *per_doc.shape[:-1]), np.int64)
        if len(self.run_lang) == 1:  # the usual batch (add.at of rows is slow)
            out[self.run_lang[0]] = per_doc.sum(axis=-1)
            return out
        runs = np.add.reduceat(per_doc, self.run_start, axis=-1)
        np.add.at(out, self.run_lang, np.moveaxis(runs, -1, 0))
        return out

    def tables(self, per_doc_script: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(counts x k x documents) -> (languages x counts) and (scripts x counts) sums."""
        script = np.zeros((NS, len(per_doc_script)), np.int64)
        script[self.present] = per_doc_script.sum(axis=2).T
        return self.per_lang(per_doc_script.sum(axis=1)), script


class Bootstrap(GroupTables):
    """The 95% interval of chars/token per group from streamed per-document sums.

    The ratio R = C/T (summed chars over summed tokens of a group's documents) is linearised,
    the delta method: Var(R) ~ sum_i (c_i - R t_i)^2 / T^2 * n / (n - 1). That needs six sums
    per group (documents, C, T, sum c^2, sum c*t, sum t^2), added batch by batch in int64:
    exact, merged across processes by addition, and the same whatever the batch size. It
    replaced a streamed 200-replicate Poisson bootstrap (same coverage, tests/test_interval.py)
    whose weights and products were a third of the measuring time. A document counts in a
    script group with the characters and tokens it has in that script. (int64 holds the squares
    while max document chars x corpus chars < 9e18, e.g. 10^6-character documents in 9 TB.)
    """

    WIDTH = 6  # documents, chars, tokens, chars^2, chars*tokens, tokens^2

    @staticmethod
    def sums(chars: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The six sums over documents with `chars` and `tokens` (per-document int64 arrays;
        along the last axis, so (groups x documents) matrices give one row per group)."""
        return np.stack(
            [
                np.count_nonzero(chars, axis=-1),
                chars.sum(-1),
                tokens.sum(-1),
                (chars * chars).sum(-1),
                (chars * tokens).sum(-1),
                (tokens * tokens).sum(-1),
            ],
            axis=-1,
        )

    def add(self, groups: DocGroups, chars: np.ndarray, tokens: np.ndarray) -> None:
        """chars, tokens: a batch's (k x documents) counts (DocGroups)."""
        self.lang = grow_rows(self.lang, groups.n_langs)
        c, t = chars.sum(axis=0), tokens.sum(axis=0)
        self.lang += groups.per_lang(np.stack([np.ones_like(c), c, t, c * c, c * t, t * t]))
        self.script[groups.present] += self.sums(chars, tokens)

    @staticmethod
    def interval(sums) -> tuple[float, float]:
        """R -/+ 1.96 standard errors; NaN for fewer than two documents or no tokens."""
        n, c, t, cc, ct, tt = (int(x) for x in sums)  # Python ints: exact products below
        if n < 2 or t <= 0:
            return (float("nan"), float("nan"))
        # T^2 * sum (c_i - R t_i)^2, without the cancellation of float sums
        resid = cc * t * t - 2 * c * t * ct + c * c * tt
        se = math.sqrt(resid * n / (n - 1)) / (t * t)
        return (c / t - Z95 * se, c / t + Z95 * se)

    @staticmethod
    def stratified(strata: list[tuple[float, int, np.ndarray, bool]]) -> tuple[float, float]:
        """The interval of R = sum_h w_h C_h / sum_h w_h T_h over strata sampled apart
        (--precision's languages): `strata` holds, per stratum, its weight w, its number of
        observations n (its blocks drawn, those without the group counting as zeros; or its
        documents holding the group, for a stratum read whole), the six sums of `interval`
        and whether it was read whole. The delta method per stratum:
        Var(R) ~ sum_h w_h^2 n_h / (n_h - 1) S_h / (sum_h w_h T_h)^2, with
        S_h = sum_i (d_i - mean d)^2 over the stratum's
        observations and d_i = c_i - R t_i (Cochran, Sampling Techniques, 6.11). One stratum
        of weight 1 gives `interval`'s value but for n (its blocks, not those holding it).
        S_h is worked out from the stratum's centred moments, each exact in integers:
        S_h = A - 2 R B + R^2 D with A = CC - C^2/n, B = CT - C T/n, D = TT - T^2/n. The
        floats then lose digits only as c and t are correlated within the stratum:
        A / S_h ~ 1 / (1 - rho^2), about 50 (two of float64's 16 digits) where blocks'
        ratios vary by a tenth of their sizes'. A stratum with one observation has no
        spread to measure: NaN, unless it was read whole, when it adds none."""
        wc = sum(w * int(s[1]) for w, _, s, _ in strata)
        wt = sum(w * int(s[2]) for w, _, s, _ in strata)
        if wt <= 0:
            return (float("nan"), float("nan"))
        r = wc / wt
        var = 0.0
        for w, n, s, whole in strata:
            c, t, cc, ct, tt = (int(x) for x in s[1:])
            if n < 2:
                if (c or t) and not whole:
                    return (float("nan"), float("nan"))
                continue
            a = (n * cc - c * c) / n
            b = (n * ct - c * t) / n
            d = (n * tt - t * t) / n
            var += w * w * n / (n - 1) * max(a - 2 * r * b + r * r * d, 0.0)
        se = math.sqrt(var) / wt
        return (r - Z95 * se, r + Z95 * se)


class PooledRow(NamedTuple):
    """A pooled row (`all`, script, running) of a --precision pass whose languages were drawn
    apart (fertility.measure.precision): its counts (each language's weighted, the sum times
    `scale` to the characters its sample holds), its stratified interval, its token-id
    histogram (None: none kept), the blocks holding it and whether every stratum holding it
    was read whole. fertility.measure.frame.build_table puts it in place of the row the
    plain sums would give."""

    counts: np.ndarray
    interval: tuple[float, float]
    histogram: np.ndarray | None
    blocks: int
    whole: bool
    scale: float = 1.0


class Weighted(NamedTuple):
    """What a --precision pass whose languages were drawn apart hands the table
    (fertility.measure.frame.build_table): its pooled rows, (tokenizer label, group, key) ->
    PooledRow, and per row (the same keys, languages too) the factor of its counts in a
    share of the `all` row: a language's weight, a pooled row's scale undone, each times the
    `all` row's scale. Every share of the all row (`char_share`, `token_share`,
    `byte_share`) is then the corpus's, not the sample's, though each row keeps the size of
    its sample."""

    rows: dict[tuple[str, str, str], PooledRow]
    shares: dict[tuple[str, str, str], float]


NORMALIZATION_EXAMPLES = 5  # texts the normaliser changed, kept per tokenizer

# How another process's part of each piece of an accumulator's state is added to this
# process's: (accumulator, mine, theirs) -> the merged value.


def _merge_tables(acc, mine: GroupTables, theirs: GroupTables) -> GroupTables:
    mine.merge(theirs)
    return mine


def _merge_mask(acc, mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    return mine | theirs


def _merge_histograms(acc, mine: dict, theirs: dict) -> dict:
    for key, counts in theirs.items():
        mine[key] = mine[key] + counts if key in mine else counts
    return mine


def _merge_counters(acc, mine: dict, theirs: dict) -> dict:
    for key, counter in theirs.items():
        mine.setdefault(key, Counter()).update(counter)
    return mine


def _first(items: list, n: int) -> list:
    """The first n items in corpus order (each tagged with its "order")."""
    return sorted(items, key=lambda x: x["order"])[:n]


def _merge_samples(acc, mine: dict, theirs: dict) -> dict:
    for key, items in theirs.items():
        mine[key] = _first(mine.get(key, []) + items, acc.samples_per_script)
    return mine


def _merge_normalization(acc, mine: dict, theirs: dict) -> dict:
    return {
        "checked_docs": mine["checked_docs"] + theirs["checked_docs"],
        "changed_docs": mine["changed_docs"] + theirs["changed_docs"],
        "examples": _first(mine["examples"] + theirs["examples"], NORMALIZATION_EXAMPLES),
    }


def _merge_roundtrip(acc, mine: dict, theirs: dict) -> dict:
    for lang, changes in theirs.items():
        roundtrip.merge(mine.setdefault(lang, roundtrip.new_changes()), changes)
    return mine


class TokenizerAccumulator:
    """Everything measured for one tokenizer, across all batches.

    Its state is every attribute but those of CONFIG (the tokenizer and what is read from
    it): `export` hands it to another process (fertility.measure.parallel) and `merge` adds
    such an export in, each attribute by its rule in MERGE. An attribute added to __init__
    without a rule there is refused by `merge`, not dropped."""

    CONFIG = ("tok", "track_vocab", "unk_id", "samples_per_script")
    # attribute -> (this accumulator, its value, the other's value) -> the merged value
    MERGE: ClassVar[dict[str, Callable[[TokenizerAccumulator, Any, Any], Any]]] = {
        "counts": _merge_tables,
        "boot": _merge_tables,
        "boot_running": _merge_tables,
        "vocab_all": _merge_mask,
        "vocab_lang": _merge_histograms,
        "vocab_script": _merge_histograms,
        "byte_fallback_chars": _merge_counters,
        "unk_chars": _merge_counters,
        "samples": _merge_samples,
        "normalization": _merge_normalization,
        "roundtrip": _merge_roundtrip,
    }

    def __init__(self, tok, samples_per_script: int = 3) -> None:
        self.tok = tok
        self.counts = GroupCounts()
        self.boot = Bootstrap()
        self.boot_running = Bootstrap()  # of the running-text rows
        size = max(int(getattr(tok, "vocab_size", 0) or 0), 0)
        self.track_vocab = capabilities(tok).vocabulary and size > 0
        # Token-id histograms (int64, one count per vocabulary id) per language id and per
        # script index: the distribution metrics of a row (fertility.measure.card) and its
        # distinct ids. A row costs 8 bytes per id: 1.6 MB for a 200k vocabulary, so tens of
        # rows per tokenizer stay in tens of MB (docs/METRICS.md, "Token distributions").
        self.vocab_lang: dict[int, np.ndarray] = {}
        self.vocab_script: dict[int, np.ndarray] = {}
        self.vocab_all = np.zeros(size if self.track_vocab else 0, dtype=bool)
        self.unk_id = getattr(tok, "unk_id", None)
        self.byte_fallback_chars: dict[int, Counter] = {}
        self.unk_chars: dict[int, Counter] = {}
        self.samples: dict[int, list] = {}
        self.samples_per_script = samples_per_script
        self.normalization = {"checked_docs": 0, "changed_docs": 0, "examples": []}
        # What the round trip changed, per language id: fertility.measure.roundtrip.new_changes()
        self.roundtrip: dict[int, dict] = {}

    def export(self) -> dict:
        """The state (everything but CONFIG), for another process's `merge`."""
        return {k: v for k, v in vars(self).items() if k not in self.CONFIG}

    def merge(self, state: dict) -> None:
        """Add another process's `export` of the same tokenizer's accumulator."""
        for name, theirs in state.items():
            add = self.MERGE.get(name)
            if add is None:
                raise TypeError(f"TokenizerAccumulator.{name} has no merge rule in MERGE")
            setattr(self, name, add(self, getattr(self, name), theirs))

    def count_ids(self, table: dict, keys, ids: np.ndarray) -> None:
        """Add `ids` to the histogram of each key's group (vocab_lang or vocab_script); `keys`
        is one key for all of them (the usual batch: one language, one script) or one per id.
        np.add.at adds in place without an O(vocabulary) pass per batch (a bincount with
        minlength would be one)."""
        if np.ndim(keys) == 0:
            np.add.at(self._histogram(table, int(keys)), ids, 1)
            return
        present = np.flatnonzero(np.bincount(keys))
        if len(present) <= 4:  # a few languages or scripts, no sort needed
            for key in present.tolist():
                np.add.at(self._histogram(table, key), ids[keys == key], 1)
            return
        order = np.argsort(keys, kind="stable")
        keys, ids = keys[order], ids[order]
        bounds = np.flatnonzero(np.diff(keys)) + 1
        for part_keys, part_ids in zip(np.split(keys, bounds), np.split(ids, bounds)):
            if part_keys.size:
                np.add.at(self._histogram(table, int(part_keys[0])), part_ids, 1)

    def _histogram(self, table: dict, key: int) -> np.ndarray:
        counts = table.get(key)
        if counts is None:
            counts = table[key] = np.zeros(len(self.vocab_all), np.int64)
        return counts

    def add_chars(self, table: dict, key_script: np.ndarray, cps: np.ndarray) -> None:
        """Count code points per script (byte_fallback_chars or unk_chars); new ones are
        added in script, then code point order (most_common breaks ties in that order)."""
        if cps.size == 0:
            return
        pairs = key_script.astype(np.int64) * 0x110000 + cps
        uniq, counts = np.unique(pairs, return_counts=True)
        script, cp = np.divmod(uniq, 0x110000)
        bounds = np.flatnonzero(np.diff(script)) + 1
        for part, chars, n in zip(
            np.split(script, bounds), np.split(cp, bounds), np.split(counts, bounds)
        ):
            counter = table.setdefault(int(part[0]), Counter())
            for char, k in zip(map(chr, chars.tolist()), n.tolist()):
                counter[char] += k
