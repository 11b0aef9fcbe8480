"""The two JSON files of `fertility extend`: extend-report.json (fertility.extend/1) and
ids-map.json (fertility.extend-ids/1)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from msgspec import Meta
from typing_extensions import NotRequired

from fertility.schemas.fix import Split
from fertility.schemas.gate import Gate
from fertility.schemas.report import Report, RowNumbers, TokenizerId


class BaseParts(TypedDict):
    """What the learner says of the base: a byte-level BPE its tokens and merges, a
    SentencePiece base its model type (fertility/extend/run.py's _byte_level, _sentencepiece;
    unpacked into ExtendBase, so mypy checks they fit)."""

    bpe_tokens: NotRequired[int]
    merges: NotRequired[int]
    model: NotRequired[Annotated[str, Meta(description="a SentencePiece base's model type")]]


class ExtendBase(TypedDict):
    """The tokenizer extended."""

    spec: str
    kind: str
    vocab_size: int | None
    fingerprint: str
    bpe_tokens: NotRequired[Annotated[int, Meta(description="a byte-level BPE base's")]]
    merges: NotRequired[Annotated[int, Meta(description="a byte-level BPE base's")]]
    model: NotRequired[Annotated[str, Meta(description="a SentencePiece base's model type")]]
    special_tokens: dict[str, Any]


class ExtendTokenizer(TypedDict):
    """The extended tokenizer: ids from first_new_id on are new."""

    kind: str
    vocab_size: int | None
    fingerprint: str
    first_new_id: int
    requested: int
    added: int
    merges_added: NotRequired[Annotated[int, Meta(description="a byte-level BPE's")]]
    learned_from_pieces: int


class TokenizerParts(TypedDict):
    """What the learner says of the extension (unpacked into ExtendTokenizer)."""

    merges_added: NotRequired[int]
    learned_from_pieces: int


class LearnedPaths(TypedDict):
    """The files the learner wrote (unpacked into ExtendPaths)."""

    tokenizer: str
    tekken: NotRequired[str]
    tiktoken: NotRequired[str]
    pattern: NotRequired[str]


class Pattern(TypedDict):
    """The base's split regex and the extension's (null: a SentencePiece base has none)."""

    base: str | None
    extended: str | None
    changed: bool


class ExtendPaths(TypedDict):
    ids_map: str
    extend_report: str
    heldout: str
    tokenizer: str
    tekken: NotRequired[Annotated[str, Meta(description="a Tekken base's format, written too")]]
    tiktoken: NotRequired[
        Annotated[str, Meta(description="a rank-file base's format, written too")]
    ]
    pattern: NotRequired[Annotated[str, Meta(description="the rank file's split pattern")]]


class ExtendRow(TypedDict):
    group: str
    key: str
    base: Annotated[RowNumbers | None, Meta(description="null: the base has no such row")]
    extended: RowNumbers
    chars_per_token_ratio: float | None


class Unchanged(TypedDict):
    """Held-out documents of a language the extension leaves alone, and how many of them
    keep the base's ids."""

    documents: int
    same_ids: int
    without_marks: int
    without_marks_same_ids: int


class ExtendTimings(TypedDict):
    scan_s: float | None
    learn_s: float | None
    measure_s: float | None
    total_s: float | None


class Extend(TypedDict):
    """A base tokenizer extended with new tokens for some languages, measured and gated."""

    schema: Annotated[
        Literal["fertility.extend/1"], Meta(description="This document's format and version.")
    ]
    base: ExtendBase
    tokenizer: ExtendTokenizer
    pattern: Pattern
    langs: list[str]
    langs_from: str
    scripts: list[str]
    paths: ExtendPaths
    split: Split
    rows: list[ExtendRow]
    unchanged: dict[str, Unchanged]
    gate: Annotated[Gate, Meta(description="the gate on the extended tokenizer")]
    timings: ExtendTimings
    measurement: Annotated[Report, Meta(description="the held-out measurement")]


class NewToken(TypedDict):
    id: int
    hex: Annotated[str, Meta(description="its bytes")]
    text: Annotated[str | None, Meta(description="null when it is part of a character")]
    base_ids: Annotated[
        list[int], Meta(description="the base tokens that spell it where it was learned")
    ]


class ExtendIds(TypedDict):
    """ids-map.json: the extended tokenizer's new ids and the base ids each one replaces."""

    schema: Annotated[
        Literal["fertility.extend-ids/1"],
        Meta(description="This document's format and version."),
    ]
    fingerprint: Annotated[str, Meta(description="of the extended tokenizer.json")]
    base: TokenizerId
    unchanged_ids: Annotated[
        list[int],
        Meta(description="[0, first_new_id], half-open: those ids are the base's, unchanged"),
    ]
    special_tokens: dict[str, Any]
    new: list[NewToken]
