"""fix-report.json (fertility.fix/1): what `fertility fix` trained and measured."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from msgspec import Meta
from typing_extensions import NotRequired

from fertility.schemas.corpus import CorpusSummary
from fertility.schemas.gate import Gate
from fertility.schemas.report import Report, RowNumbers

# the functional form: `from`, a settings key, is a Python keyword
FixSettings = TypedDict(
    "FixSettings",
    {
        "vocab_size": int | None,
        "model": str,
        "backend": str,
        "normalization": str,
        "temperature": float,
        "heldout_fraction": float | None,
        "heldout_max_docs": int | None,
        "heldout_block": int,
        "seed": int | None,
        "max_train_chars": Any,
        "special_tokens": list[str],
        "pattern": str,
        "pattern_regex": str,
        "byte_fallback": bool,
        "from": Any,
        "corpus": list[str],
    },
)
FixSettings.__doc__ = "The settings the tokenizer was trained with."


class FixTokenizer(TypedDict):
    kind: str
    vocab_size: int | None
    requested_vocab_size: int | None
    fingerprint: str


class FixPaths(TypedDict):
    tokenizer: str
    fix_report: str
    report_html: str
    heldout: str
    model: NotRequired[
        Annotated[str, Meta(description="the SentencePiece model (--backend sentencepiece)")]
    ]


class SplitLanguage(TypedDict):
    train_documents: int | None
    train_chars: int | None
    heldout_documents: int | None
    heldout_chars: int | None
    heldout_run_lines: int
    dropped_near_duplicates: int
    dropped_chars: int


class Split(TypedDict):
    """The held-out split: documents kept out of training and measured."""

    heldout_fraction: float | None
    heldout_max_docs: int | None
    heldout_block: Annotated[int, Meta(description="held out in runs of this many lines")]
    seed: int | None
    train_documents: int | None
    heldout_documents: int | None
    dropped_near_duplicates: Annotated[
        int, Meta(description="training documents near-duplicates of held-out ones")
    ]
    languages: dict[str, SplitLanguage]


class SamplingLanguage(TypedDict):
    corpus_share: float
    share: float
    target_chars: float
    sampled_chars: int
    sampled_share: float
    repeat: float | None


class Sampling(TypedDict):
    """The temperature-balanced sample the tokenizer was trained on."""

    temperature: float
    budget_chars: int | None
    sampled_chars: int
    languages: dict[str, SamplingLanguage]


class SpecialToken(TypedDict):
    token: str
    old_id: Any
    new_id: int | None
    kept: bool


class FixRow(TypedDict):
    """One row before (the --from tokenizer, or null) and after."""

    group: str
    key: str
    before: Any
    after: RowNumbers
    chars_per_token_ratio: Any


class Roundtrip(TypedDict):
    checked: int
    failures: int
    normalizer_changed: int
    changes: list[Any]


class Tradeoffs(TypedDict):
    """The languages whose held-out chars/token fell by more than worse_share against
    --from, with their share of the training text and what the temperature does to it."""

    worse_share: float
    languages: list[dict[str, Any]]


class FixTimings(TypedDict):
    scan_s: float | None
    train_s: float | None
    trainer_s: float | None
    measure_s: float | None
    total_s: float | None


class Fix(TypedDict):
    """A tokenizer trained to keep marks whole, measured on held-out text and gated."""

    schema: Annotated[
        Literal["fertility.fix/1"], Meta(description="This document's format and version.")
    ]
    settings: FixSettings
    tokenizer: FixTokenizer
    paths: FixPaths
    corpus: CorpusSummary
    split: Split
    sampling: Sampling
    special_tokens: list[SpecialToken]
    changes: dict[str, Any]
    rows: list[FixRow]
    normalizer_preview: Any
    roundtrip: dict[str, Roundtrip]
    tradeoffs: Tradeoffs
    gate: Gate
    timings: FixTimings
    measurement: Annotated[Report, Meta(description="the held-out measurement")]
