"""`fertility report --format json` (fertility.report/1, fertility.measure.Report.to_dict),
and the measured numbers of one row that fix and extend compare before and after."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from msgspec import Meta
from typing_extensions import NotRequired

from fertility.schemas.corpus import MeasuredCorpus
from fertility.schemas.verdicts import Finding, Verdict

# One row of the tidy frame (docs/METRICS.md names its columns)
Row = dict[str, float | str | None]


class TokenizerId(TypedDict):
    """A tokenizer as named (`spec`), its kind, the fingerprint of its content, its size."""

    spec: str
    kind: str
    fingerprint: str
    vocab_size: int | None


class Gini(TypedDict):
    value: float | None
    basis: str
    languages: list[str]


class Overlap(TypedDict):
    languages: list[str]
    matrix: list[list[float | None]]


class TokenizerHead(TypedDict):
    """What an entry says of the tokenizer (fertility.measure.TokenizerInfo.to_dict)."""

    label: str
    spec: str
    kind: str
    vocab_size: int | None
    fingerprint: str


class Card(TypedDict):
    """The measured part of a tokenizer's entry (fertility.measure.card.cards)."""

    vocabulary_scripts: dict[str, float | None]
    gini: Gini
    overlap: Overlap


class Judged(TypedDict):
    verdict: NotRequired[Verdict]


# The entries are their parts in this order (the JSON's), so the code builds one from them
class TokenizerReport(TokenizerHead, Card, Judged):
    """A measured tokenizer: its rows, with its gate verdict under `report --gate`."""

    rows: list[Row]


class PretokenizerReport(TokenizerHead):
    """A pre-tokenizer family measured as a ceiling."""

    rows: list[Row]


class MeasureSettings(TypedDict):
    detail_docs: int | None
    seed: int | None
    keep_docs: int | None
    workers: int | None
    switch: Any


class Report(TypedDict):
    """Every tokenizer measured on one corpus, with the findings of the rules."""

    schema: Annotated[
        Literal["fertility.report/1"], Meta(description="This document's format and version.")
    ]
    corpus: MeasuredCorpus
    settings: MeasureSettings
    tokenizers: list[TokenizerReport]
    pretokenizers: list[PretokenizerReport]
    findings: NotRequired[list[Finding]]


class RowNumbers(TypedDict):
    """The numbers of one row (group, key) that fix and extend compare."""

    documents: int | None
    chars: int | None
    tokens: int | None
    chars_per_token: float | None
    chars_per_token_lo: float | None
    chars_per_token_hi: float | None
    tokens_per_word: float | None
    continued_word_rate: float | None
    byte_fallback_rate: float | None
    unk_rate: float | None
    roundtrip_checked: int | None
    roundtrip_failures: int | None
    mark_initial_rate: float | None
    grapheme_split_rate: float | None
    chars_per_pretoken: float | None
