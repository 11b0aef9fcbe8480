"""`pretrain`'s options, declared once: `fertility pretrain` (and `torchrun -m fertility
pretrain`) builds its command line from these fields, and `fertility.trainer.run.pretrain` takes one
PretrainOptions. Imports nothing heavy (no torch): the command line reads it for `--help`.

A field made with `option(..., config=True)` is also a key of TrainConfig (trainer/config.py,
same name): given (not None), it is set over the config file, and a message about its value
names the option (`--steps must be ...`). `settings` sets any other TrainConfig key the same
way from Python (tests, notebooks); a field given explicitly wins over it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fertility.errors import TrainingError
from fertility.options import (
    CorpusCommandOptions,
    CorpusOptions,
    Device,
    PretrainFormat,
    flags,
    option,
)


def _mix(text: str) -> dict[str, float]:
    # deferred: numpy and the sampler load when --mix is given, not for `--help`
    from fertility.trainer.mix import parse_mix

    return parse_mix(text, "--mix")


def _log_to(text: str) -> list[str]:
    # the names are checked with the config (trainer/config.py), which names --log-to
    return [name.strip() for name in text.split(",")]


NewRowsInit = Literal["mean", "mean_norm", "random"]  # trainer/init.py


@dataclass(frozen=True)
class PretrainOptions(CorpusCommandOptions):
    """Everything `pretrain` is told: what to train on, with what, into where, and how (and,
    inherited, --quiet and --allow-output-in-corpus)."""

    paths: tuple[str, ...] = option(
        argument=True, optional=True, help="Corpus files and folders (or --shards)."
    )
    tokenizer: str = option(
        decls=("-t", "--tokenizer"),
        metavar="[LABEL=]SPEC",
        help="Tokenizer to train with (tokenizer.json, .model, rank file, ...).",
    )
    out: str = option(help="Run folder (created).")
    shards: str | None = option(
        None,
        metavar="DIR",
        help="Train on the shards `fertility tokenize` wrote into DIR instead of PATHS: no "
        "tokenizing here, and the gate reads the counts measured in the same pass.",
    )
    preset: str | None = option(
        None,
        config=True,
        help="Model size: tiny, small, base, 0.4b (trainer/model.py); default: --config's, else tiny.",
    )
    config: str | None = option(None, metavar="FILE", help="TrainConfig TOML (docs/TRAIN.md).")
    steps: int | None = option(
        None,
        min=1,
        config=True,
        help="Train for N optimizer steps (default: one pass over the corpus).",
    )
    tokens: int | None = option(
        None, min=1, config=True, help="Train for N tokens (default: one pass over the corpus)."
    )
    device: Device | None = option(
        None,
        config=True,
        help="Where to train; default: --config's, else auto (CUDA when available).",
    )
    resume: bool = option(False, help="Continue from the newest valid checkpoint.")
    force: bool = option(
        False, help="Train even when the tokenizer fails the gate (recorded in run.json)."
    )
    policy: str | None = option(None, metavar="FILE", help="Gate policy TOML.")
    mix: dict[str, float] | None = option(
        None,
        config=True,
        parse=_mix,
        metavar="LANG=SHARE,...",
        help="Each language's share of the training stream in characters, e.g. "
        "bn=0.6,en=0.4 (default: the corpus's own proportions).",
    )
    mix_temperature: float | None = option(
        None,
        config=True,
        metavar="T",
        help="Instead of --mix: shares ∝ characters(lang)^T (mT5, XLM-R: 0.3).",
    )
    init_from: str | None = option(
        None,
        config=True,
        metavar="MODEL_DIR",
        help="Continue pretraining this Llama-architecture Hugging Face folder "
        "(config.json + model.safetensors); -t is its tokenizer or an extension.",
    )
    new_rows_init: NewRowsInit | None = option(
        None,
        config=True,
        help="With --init-from: the new rows' start: mean (of the base rows that spell "
        "them; the default), mean_norm (that mean at the median row norm of its script) "
        "or random (docs/EXTEND.md).",
    )
    embedding_lr: float | None = option(
        None,
        min=0,
        min_open=True,
        config=True,
        metavar="LR",
        help="Peak learning rate of the embeddings and output head, on lr's schedule "
        "(default: lr); continued pretraining runs it above lr (docs/EXTEND.md).",
    )
    log_to: list[str] | None = option(
        None,
        config=True,
        parse=_log_to,
        metavar="SINK,...",
        help="Also draw metrics.jsonl's numbers in tensorboard (RUN_DIR/tensorboard) and/or "
        "wandb (your own W&B settings); each needs its extra, e.g. "
        "pip install 'fertility[tensorboard]' (docs/TRAIN.md).",
    )
    fmt: PretrainFormat = option(
        "text",
        decls=("--format",),
        show_default=True,
        help="The summary at the end: text for a person, json for a machine (run.json "
        "holds it all either way).",
    )
    # The corpus options (fertility.options.CorpusOptions; on the command line as every
    # corpus command's).
    corpus: CorpusOptions = field(default_factory=CorpusOptions)
    # More TrainConfig keys over the config file (the Python API's; see the module docstring).
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # the Python API takes one path, or any iterable of str or PathLike, for paths
        given: str | os.PathLike | Iterable[str | os.PathLike] = self.paths
        paths = [given] if isinstance(given, (str, os.PathLike)) else list(given)
        object.__setattr__(self, "paths", tuple(os.fspath(p) for p in paths))
        for f in dataclasses.fields(self):  # a Path given for a file or folder: its text
            if isinstance(getattr(self, f.name), os.PathLike):
                object.__setattr__(self, f.name, os.fspath(getattr(self, f.name)))
        if not self.paths and not self.shards:
            raise TrainingError("pretrain: no corpus paths (give PATHS or --shards DIR)")
        if self.paths and self.shards:
            raise TrainingError(
                "pretrain: give PATHS or --shards DIR, not both (the shards hold the corpus)"
            )
        for one, other in (("steps", "tokens"), ("mix", "mix_temperature")):
            if getattr(self, one) is not None and getattr(self, other) is not None:
                names = option_names()
                raise TrainingError(f"give {names[one]} or {names[other]}, not both")

    def config_overrides(self) -> dict[str, Any]:
        """The TrainConfig keys these options set (None: not given): `settings`, then the
        fields that are config keys."""
        given = {f.name: getattr(self, f.name) for f in config_fields()}
        return {**self.settings, **{k: v for k, v in given.items() if v is not None}}


def config_fields() -> list[dataclasses.Field]:
    """The fields of PretrainOptions that are TrainConfig keys."""
    return [f for f, _ in flags(PretrainOptions) if f.metadata.get("config")]


def option_names() -> dict[str, str]:
    """Field -> the command-line option that sets it (`init_from` -> `--init-from`); its
    config fields name TrainConfig keys in messages (trainer.config.OPTIONS)."""
    return {f.name: flag.names(f.name)[-1] for f, flag in flags(PretrainOptions)}
