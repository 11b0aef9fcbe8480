"""run.json (fertility.run/1): what `fertility pretrain` trained, on what, with what."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from msgspec import Meta
from typing_extensions import NotRequired

from fertility.schemas.corpus import CorpusSummary
from fertility.schemas.report import TokenizerId


class RunTokenizer(TokenizerId):
    """The tokenizer the run trained with: its file's copy in the run folder (`path`, null
    and no `sha256` for a tokenizer without a file) and its split pattern."""

    path: str | None
    pattern: Any
    sha256: NotRequired[str]


class ModelConfig(TypedDict):
    vocab_size: int | None
    d_model: int | None
    n_layers: int | None
    n_heads: int | None
    n_kv_heads: int | None
    d_ff: int | None
    max_seq_len: int | None
    rope_theta: float | None
    norm_eps: float | None
    tie_embeddings: bool
    init_std: float | None
    pad_vocab_to: int | None


class MixLanguage(TypedDict):
    """A language's share of the characters, and the tokens that gives it."""

    char_share: float
    token_share: float
    chars_per_token: float
    available_chars: int
    available_tokens: int
    planned_tokens: int
    passes: float


class MixConsumed(TypedDict):
    chars: int | None
    bytes: int | None
    tokens: int | None


class Mix(TypedDict):
    """The language mix: planned shares and what was consumed."""

    rule: Annotated[str, Meta(description="shares (--mix), temperature or corpus")]
    temperature: float | None
    total_tokens: int
    languages: dict[str, MixLanguage]
    consumed: Annotated[
        dict[str, MixConsumed] | None, Meta(description="null until the first checkpoint")
    ]


class RunGate(TypedDict):
    """The gate's JSON (fertility.gate/1, gate.schema.json): its verdict at least."""

    passed: bool


class RunData(TypedDict):
    shards: Annotated[str | None, Meta(description="--shards: the folder trained from")]
    separator: int | None
    separator_reserved: bool
    dtype: str
    train_tokens: int | None
    heldout_tokens: int | None
    heldout_documents: int | None


class Timing(TypedDict, total=False):
    """Seconds of this process's run: preflight_s (the checks before step 1, the arbiter's
    included), first_step_s (the first step, torch.compile's compilation included), written
    after the first step."""

    preflight_s: float
    first_step_s: float


class Overfitting(TypedDict):
    """The first held-out pass at which the held-out loss was above its lowest while the
    training loss was below its value then (trainer.loop.overfitting)."""

    step: int
    message: str


# a training setting's value (fertility.trainer.config.TrainConfig)
TrainValue = list[float | None] | float | dict[str, Any] | str | None


class Run(TypedDict):
    """A pretraining run folder's record."""

    schema: Annotated[
        Literal["fertility.run/1"], Meta(description="This document's format and version.")
    ]
    tokenizer: RunTokenizer
    model: ModelConfig
    train: dict[str, TrainValue]
    gate: Annotated[
        RunGate | None, Meta(description="null: nothing to gate on (tokenize --no-counts)")
    ]
    forced: bool
    corpus: Annotated[CorpusSummary | None, Meta(description="the shard index's corpus")]
    corpus_paths: Annotated[
        list[str] | None, Meta(description="null with --shards (the index names the corpus)")
    ]
    data: RunData
    world_size: int | None
    mix: Annotated[Mix | None, Meta(description="null: the data has no language mix plan")]
    init: Any
    created: str
    timing: NotRequired[Timing]
    arbiter: NotRequired[
        Annotated[
            dict[str, Any],
            Meta(description="the arbiter's verdict on the gradients (trainer/arbiter.py)"),
        ]
    ]
    overfitting: NotRequired[Overfitting]
