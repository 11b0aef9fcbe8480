"""`fertility eval --format json` (fertility.eval/1) and an export folder's
fertility_export.json (fertility.export/1)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from msgspec import Meta
from typing_extensions import NotRequired

from fertility.schemas.report import TokenizerId
from fertility.schemas.run import Mix, ModelConfig, RunTokenizer

# a 95% interval: [lo, hi]
Interval = list[float | None]
# ... of a bootstrap over documents: none (null) for a row of fewer than 2 documents, or with
# --bootstrap under 10 replicates (eval/nll.py summarize)
Bootstrapped = Annotated[
    Interval | None,
    Meta(description="[lo, hi]; null: fewer than 2 documents, or under 10 replicates"),
]


class EvalRun(TypedDict):
    """The run evaluated, at which step."""

    dir: str
    step: int | None
    tokens_seen: int | None
    tokenizer: TokenizerId
    model: ModelConfig
    forced: bool
    mix: Annotated[Mix | None, Meta(description="run.json's training mix (null: none)")]


class Reference(TypedDict):
    vocab_size: int
    ln_vocab: float


class Scoring(TypedDict):
    context: int | None
    separator: int | None
    first_token: str


class Heldout(TypedDict):
    source: str
    documents: int | None
    scored_documents: int | None
    unscored_documents: int | None
    windowed_documents: int | None
    windows: int | None
    tokens: int | None
    twin_seed: int | None
    bootstrap: int | None


class LmRow(TypedDict):
    """The model and its random twin on one group's held-out text."""

    group: str
    key: str
    documents: int | None
    tokens: int | None
    bytes: int | None
    chars: int | None
    nll_per_token: float | None
    nll_per_token_ci95: Bootstrapped
    bits_per_byte: float | None
    bits_per_byte_ci95: Bootstrapped
    bits_per_char: float | None
    bits_per_char_ci95: Bootstrapped
    twin_nll_per_token: float | None
    twin_nll_per_token_ci95: Bootstrapped
    twin_bits_per_byte: float | None
    twin_bits_per_byte_ci95: Bootstrapped
    twin_bits_per_char: float | None
    twin_bits_per_char_ci95: Bootstrapped
    perplexity: float | None
    perplexity_ci95: Bootstrapped
    twin_minus_model: float | None
    twin_minus_model_ci95: Bootstrapped
    twin_minus_model_bits_per_byte: Annotated[
        float | None,
        Meta(description="the gap to the twin in bits per byte: (twin - model NLL) / ln 2 / bytes"),
    ]
    twin_minus_model_bits_per_byte_ci95: Bootstrapped


class BaseRow(TypedDict):
    """One language (or "all"): the base model's bits per byte and the run's on the same
    text, and run / base."""

    key: str
    documents: int
    base_bits_per_byte: float
    base_bits_per_byte_ci95: Bootstrapped
    bits_per_byte: float
    bits_per_byte_ci95: Bootstrapped
    ratio: float | None
    base_tokens: int
    tokens: int


class Base(TypedDict):
    model_dir: str
    context: int
    rows: list[BaseRow]


class TaskScores(TypedDict):
    """A task's scores (fertility.eval.choice.score_task)."""

    task: str
    n: int | None
    chance: float | None
    acc: float | None
    acc_norm_chars: float | None
    acc_norm_bytes: float | None
    ci95: Interval
    ci95_norm_chars: Interval
    ci95_norm_bytes: Interval
    verdict: str
    langs: list[str]


class TaskResult(TaskScores):
    """A task's scores, its file and how many of its items were cut to the context."""

    file: str
    truncated: int | None


class Eval(TypedDict):
    """A run's model evaluated on held-out text and tasks."""

    schema: Annotated[
        Literal["fertility.eval/1"], Meta(description="This document's format and version.")
    ]
    run: EvalRun
    reference: Reference
    scoring: Scoring
    heldout: Annotated[Heldout | None, Meta(description="null with --no-lm")]
    lm: list[LmRow]
    flags: list[dict[str, Any]]
    base: NotRequired[
        Annotated[
            Base | None,
            Meta(
                description="a continued run against its base model (eval/base.py, "
                "docs/EVAL.md); null when none"
            ),
        ]
    ]
    tasks: list[TaskResult]


class Export(TypedDict):
    """fertility_export.json: where an export folder's model and tokenizer came from."""

    schema: Annotated[
        Literal["fertility.export/1"], Meta(description="This document's format and version.")
    ]
    run_dir: str
    step: int | None
    tokenizer: Annotated[RunTokenizer | None, Meta(description="run.json's (null: it had none)")]
    separator: int | None
    separator_token: Annotated[str | None, Meta(description="the separator's text (null: none)")]
    context: int | None
    tokenizer_note: str
