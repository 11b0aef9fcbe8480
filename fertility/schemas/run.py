"""run.json (fertility.run/1): what `fertility pretrain` trained, on what, with what."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from msgspec import Meta
from typing_extensions import NotRequired

from fertility.schemas.corpus import CorpusSummary
from fertility.schemas.report import TokenizerId


class RunTokenizer(TokenizerId):
    """The tokenizer file the run trained with (copied into the run folder)."""

    path: str
    pattern: Any
    sha256: str


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
    char_share: float | None
    token_share: float | None
    chars_per_token: float | None
    available_chars: int | None
    available_tokens: int | None
    planned_tokens: int | None
    passes: float | None


class MixConsumed(TypedDict):
    chars: int | None
    bytes: int | None
    tokens: int | None


class Mix(TypedDict):
    """The language mix: planned shares and what was consumed."""

    rule: str
    temperature: Any
    total_tokens: int | None
    languages: dict[str, MixLanguage]
    consumed: dict[str, MixConsumed]


class RunGate(TypedDict):
    passed: bool


class RunData(TypedDict):
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
    gate: RunGate
    forced: bool
    corpus: CorpusSummary
    corpus_paths: list[str]
    data: RunData
    world_size: int | None
    mix: Mix
    init: Any
    created: str
    timing: NotRequired[Timing]
    overfitting: NotRequired[Overfitting]
