"""The metric registry: every ratio of the measurement table, declared once.

A metric is a ratio of summed counts (sum, then divide): its numerator and denominator are
count columns of the measurement table (COUNTS, fertility/measure/counters.py). From this
registry alone

- the table (fertility.measure.frame.add_metrics) computes each value and, for a metric with an
  interval, its 95% bounds in the columns `<name>_lo` and `<name>_hi`;
- the JSON and the CSV carry those columns, in this order (each value before its bounds);
- the terminal table (fertility.report.text) shows the metrics with a `table` display, in
  rank order, and the HTML side-by-side table (fertility.report.html) those with an `html` one;
- docs/METRICS.md defines each metric under a heading of its name (`anchor`), and nothing else
  under its "Ratios" heading (tests/test_metrics_doc.py checks both ways).

Adding a metric: declare it in METRICS below; a count it needs goes into COUNTS and is counted
in fertility/measure/batch.py; define it in docs/METRICS.md; test it in tests/measure/.

DISTRIBUTIONS are the other kind: a function of the row's token-id histogram (not a ratio of
counts), computed by fertility.measure.card; their columns follow the ratios in the table,
and docs/METRICS.md defines them under "Token distributions" (tests/measure/test_card.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

# Share of a row's characters in scripts written without spaces above which a word count
# would be invented, so the metrics per word (`spaced_only`) are null (docs/METRICS.md).
NOSPACE_SHARE_MAX = 0.5


class Interval(Enum):
    """How a metric's 95% interval is computed."""

    NONE = "none"
    # Wilson score interval of the proportion numerator / denominator (fertility.stats.wilson):
    # for shares whose numerator counts some of the denominator's items (tokens, pre-tokens,
    # words, boundaries, documents)
    WILSON = "wilson"
    # delta method over the row's documents, from six streamed sums per group
    # (fertility.measure.counters.Bootstrap): streamed for chars / tokens only
    DELTA = "delta"


class Unit(Enum):
    """What a metric's value counts (docs/METRICS.md states it beside each formula)."""

    CHARS_PER_TOKEN = "code points per token"
    GRAPHEMES_PER_TOKEN = "graphemes per token"
    BYTES_PER_TOKEN = "UTF-8 bytes per token"
    TOKENS_PER_WORD = "tokens per word"
    CHARS_PER_PRETOKEN = "code points per pre-token"
    SHARE_OF_TOKENS = "share of tokens"
    SHARE_OF_PRETOKENS = "share of pre-tokens"
    SHARE_OF_WORDS = "share of words"
    SHARE_OF_BOUNDARIES = "share of boundaries"
    SHARE_OF_DOCUMENTS = "share of documents"
    SHARE_OF_ALL = "share of the total"
    SHARE_OF_VOCABULARY = "share of the vocabulary"
    EFFICIENCY = "bits per bit of log2(vocabulary size)"
    TOKEN_IDS = "distinct token ids"
    TOKEN_ID = "token id"

    @property
    def is_share(self) -> bool:
        """A proportion in [0, 1] (a Wilson interval applies), not a rate per unit."""
        return self.value.startswith("share")


@dataclass(frozen=True)
class Show:
    """How a renderer shows a metric.

    header: the column's header (terminal) or the value's label (HTML); fmt: a format spec
    for str.format; rank: its position, most useful first (a terminal too narrow for every
    column drops the highest ranks first). interval: the header of its interval, shown as a
    column of its own right after it (HTML: after the value, in brackets); None: not shown.
    shared: the same for every tokenizer (it depends on the text only), shown once at the
    left. essential: never dropped to fit the width (the essential metrics rank first)."""

    header: str
    fmt: str
    rank: int
    interval: str | None = None
    shared: bool = False
    essential: bool = False


@dataclass(frozen=True)
class Metric:
    """One ratio of summed counts: sum(numerator) / denominator, null when the denominator
    is 0. of_all: the denominator is taken from the tokenizer's `all` row (a share of the
    whole). spaced_only: null when over NOSPACE_SHARE_MAX of the row's characters are in
    scripts written without spaces (its words are not counted there). needs_vocab: null for a
    pre-tokenizer family (no vocabulary, no UNK, no byte pieces). interval: NONE, or how
    `<name>_lo` and `<name>_hi` are computed (null where the value is)."""

    name: str
    numerator: tuple[str, ...]
    denominator: str
    unit: Unit
    interval: Interval = Interval.NONE
    of_all: bool = False
    spaced_only: bool = False
    needs_vocab: bool = False
    table: Show | None = None  # the terminal table (and -v), fertility.report.text
    html: Show | None = None  # the HTML side-by-side table, fertility.report.html
    # a DISTRIBUTIONS metric: its formula over the row's token-id histogram, as
    # docs/METRICS.md writes it (its numerator and denominator are empty)
    distribution: str = ""

    @property
    def lo(self) -> str | None:
        """The column of the interval's lower bound; None for a metric without one."""
        return None if self.interval is Interval.NONE else f"{self.name}_lo"

    @property
    def hi(self) -> str | None:
        return None if self.interval is Interval.NONE else f"{self.name}_hi"

    @property
    def bounds(self) -> tuple[str, str] | None:
        """The columns (lower bound, upper bound) of its interval; None without one."""
        if self.interval is Interval.NONE:
            return None
        return f"{self.name}_lo", f"{self.name}_hi"

    def show(self, where: Literal["table", "html"]) -> Show:
        """How the renderer `where` shows it; ValueError for a metric that one does not show
        (shown() lists those it does)."""
        s = self.table if where == "table" else self.html
        if s is None:
            raise ValueError(f"metric {self.name} is not shown in the {where}")
        return s

    @property
    def columns(self) -> tuple[str, ...]:
        """Its columns in the table, in order: the value, then the bounds if any."""
        b = self.bounds
        return (self.name,) if b is None else (self.name, *b)

    @property
    def anchor(self) -> str:
        """Where docs/METRICS.md defines it (a heading of the name; GitHub's anchor)."""
        return f"docs/METRICS.md#{self.name}"

    @property
    def formula(self) -> str:
        """The definition's arithmetic as docs/METRICS.md writes it."""
        if self.distribution:
            return self.distribution
        num = " + ".join(self.numerator)
        num = f"({num})" if len(self.numerator) > 1 else num
        den = f"{self.denominator} of the `all` row" if self.of_all else self.denominator
        return f"{num} / {den}"


# The frame's ratio columns, in their order.
METRICS: tuple[Metric, ...] = (
    Metric(
        "chars_per_token",
        ("chars",),
        "tokens",
        Unit.CHARS_PER_TOKEN,
        interval=Interval.DELTA,
        table=Show("chars/tok", "{:.2f}", 1, interval="95% CI", essential=True),
        html=Show("characters per token", "{:.2f}", 1, interval="95% interval"),
    ),
    Metric(
        "graphemes_per_token",
        ("graphemes",),
        "tokens",
        Unit.GRAPHEMES_PER_TOKEN,
        table=Show("graph/tok", "{:.2f}", 8),
    ),
    Metric(
        "bytes_per_token",
        ("bytes",),
        "tokens",
        Unit.BYTES_PER_TOKEN,
        table=Show("bytes/tok", "{:.2f}", 9),
    ),
    Metric(
        "tokens_per_word",
        ("word_tokens",),
        "words",
        Unit.TOKENS_PER_WORD,
        spaced_only=True,
        table=Show("tok/word", "{:.2f}", 6),
    ),
    Metric(
        "continued_word_rate",
        ("continued_words",),
        "words",
        Unit.SHARE_OF_WORDS,
        interval=Interval.WILSON,
        spaced_only=True,
        table=Show("split words", "{:.1%}", 7),
    ),
    Metric(
        "unk_rate",
        ("unk_tokens",),
        "tokens",
        Unit.SHARE_OF_TOKENS,
        interval=Interval.WILSON,
        needs_vocab=True,
        table=Show("unk", "{:.2%}", 10),
    ),
    Metric(
        "byte_fallback_rate",
        ("byte_fallback_tokens",),
        "tokens",
        Unit.SHARE_OF_TOKENS,
        interval=Interval.WILSON,
        needs_vocab=True,
        table=Show("byte-fb", "{:.2%}", 3),
    ),
    Metric(
        "token_share",
        ("tokens",),
        "tokens",
        Unit.SHARE_OF_ALL,
        of_all=True,
        table=Show("tok share", "{:.1%}", 2),
    ),
    Metric("byte_share", ("bytes",), "bytes", Unit.SHARE_OF_ALL, of_all=True),
    Metric(
        "roundtrip_failure_rate",
        ("roundtrip_failures",),
        "roundtrip_checked",
        Unit.SHARE_OF_DOCUMENTS,
        interval=Interval.WILSON,
        table=Show("rt fail", "{:.1%}", 5),
    ),
    Metric(
        "mark_initial_rate",
        ("mark_initial_tokens",),
        "tokens",
        Unit.SHARE_OF_TOKENS,
        interval=Interval.WILSON,
        html=Show("marks", "{:.1%}", 2),
    ),
    Metric(
        "grapheme_split_rate",
        ("grapheme_split_boundaries",),
        "token_boundaries",
        Unit.SHARE_OF_BOUNDARIES,
        interval=Interval.WILSON,
    ),
    Metric(
        "chars_per_pretoken",
        ("pretoken_chars",),
        "pretokens",
        Unit.CHARS_PER_PRETOKEN,
        table=Show("ceiling", "{:.2f}", 4),
        html=Show("ceiling", "{:.2f}", 3),
    ),
    Metric(
        "char_share",
        ("chars",),
        "chars",
        Unit.SHARE_OF_ALL,
        of_all=True,
        table=Show("char share", "{:.1%}", 1, shared=True),
    ),
    # Pre-tokens that begin with a combining mark or a ZWJ: the pre-tokenizer itself cut inside
    # a cluster (mark_initial_rate counts tokens, which the vocabulary also decides). A ZWNJ
    # asks for the parts to stay apart, so a cut before it is kept separate.
    Metric(
        "pretoken_mark_initial_rate",
        ("pretoken_mark_initial", "pretoken_zwj_initial"),
        "pretokens",
        Unit.SHARE_OF_PRETOKENS,
        interval=Interval.WILSON,
    ),
    Metric(
        "pretoken_zwnj_initial_rate",
        ("pretoken_zwnj_initial",),
        "pretokens",
        Unit.SHARE_OF_PRETOKENS,
        interval=Interval.WILSON,
    ),
    Metric(
        "pretoken_cut_word_rate",
        ("pretoken_cut_words",),
        "pretoken_words",
        Unit.SHARE_OF_WORDS,
        interval=Interval.WILSON,
    ),
)

METRIC: dict[str, Metric] = {m.name: m for m in METRICS}


def _distribution(name: str, unit: Unit, formula: str, **show) -> Metric:
    return Metric(name, (), "", unit, needs_vocab=True, distribution=formula, **show)


# Metrics of a row's token-id histogram h (tokens per id; p = h / sum h; V = the tokenizer's
# vocabulary size), computed by the function of the same name in fertility.measure.card.
DISTRIBUTIONS: tuple[Metric, ...] = (
    _distribution(
        "renyi_efficiency",
        Unit.EFFICIENCY,
        "log2(Σ p^2.5) / (1 − 2.5) / log2(V)",
        table=Show("renyi eff", "{:.3f}", 11),
        html=Show("renyi eff", "{:.3f}", 4),
    ),
    _distribution("shannon_efficiency", Unit.EFFICIENCY, "−Σ p·log2(p) / log2(V)"),
    _distribution("unique_tokens", Unit.TOKEN_IDS, "count of ids with h > 0"),
    _distribution(
        "vocab_utilisation",
        Unit.SHARE_OF_VOCABULARY,
        "unique_tokens / V",
        table=Show("vocab used", "{:.1%}", 12),
    ),
    _distribution("avg_token_rank", Unit.TOKEN_ID, "Σ id·h / Σ h"),
)


def shown(where: Literal["table", "html"], *, shared: bool = False) -> list[Metric]:
    """The metrics a renderer shows, in rank order: where = "table" (the terminal; `shared`
    picks the columns shown once at the left, or those shown per tokenizer) or "html"."""
    out = [m for m in METRICS + DISTRIBUTIONS if getattr(m, where) is not None]
    if where == "table":
        out = [m for m in out if m.show("table").shared == shared]
    return sorted(out, key=lambda m: m.show(where).rank)


def interval_columns() -> dict[str, tuple[str, str]]:
    """{metric: (lo column, hi column)} for every metric with an interval."""
    return {m.name: b for m in METRICS if (b := m.bounds) is not None}


# The columns a before/after comparison shows per (group, key) (fix's and extend's reports and
# their JSON): the sizes, the headline ratio with its interval, and the ratios that say why a
# script collapses. Declared here, beside the registry, so both verbs read one list
# (tests/measure/test_metrics.py checks each name is a column of the measurement frame).
BEFORE_AFTER: tuple[str, ...] = (
    "documents",
    "chars",
    "tokens",
    "chars_per_token",
    *(METRIC["chars_per_token"].bounds or ()),
    "tokens_per_word",
    "continued_word_rate",
    "byte_fallback_rate",
    "unk_rate",
    "roundtrip_checked",
    "roundtrip_failures",
    "mark_initial_rate",
    "grapheme_split_rate",
    "chars_per_pretoken",
)
