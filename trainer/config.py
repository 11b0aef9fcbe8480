"""Training configuration: one dataclass, loadable from TOML, overridable from the CLI.

A TOML file sets any field of `TrainConfig` at the top level; model size overrides go in a
`[model]` table (they are passed to `trainer.model.config_from_preset`). Unknown keys are an
error, never silently ignored: a misspelt `warmup_step = 0` must not train with the default.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fertility.config import read_toml
from fertility.errors import TrainingError
from trainer.mix import check_mix
from trainer.model import PRESETS


@dataclass
class TrainConfig:
    # model
    preset: str = "tiny"
    model: dict[str, Any] = field(default_factory=dict)  # ModelConfig overrides
    # batch: micro_batch sequences of seq_len tokens per device per forward pass; gradients
    # are accumulated until tokens_per_step tokens (all devices together) have been seen.
    seq_len: int | None = None  # None: the model's max_seq_len (the preset's, or [model]'s)
    micro_batch: int = 8
    tokens_per_step: int | None = None  # None: one micro-batch per device, no accumulation
    # length: `steps` wins over `tokens`; neither means one pass over the training shards
    steps: int | None = None
    tokens: int | None = None
    # optimiser and schedule (linear warmup, then cosine decay to min_lr)
    lr: float = 3e-4
    min_lr: float = 3e-5
    warmup_steps: int = 100
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    grad_clip: float = 1.0  # 0 disables clipping (the norm is still measured)
    seed: int = 0
    # continued pretraining: a Llama-architecture Hugging Face folder (trainer/init.py)
    init_from: str | None = None
    # hardware: dtype "auto" is bf16 autocast on CUDA and float32 on the CPU
    device: str = "auto"  # auto | cpu | cuda
    dtype: str = "auto"  # auto | fp32 | bf16
    compile: bool | str = "auto"  # True | False | "auto" (on for CUDA, off on the CPU)
    fsdp: bool | str = "auto"  # True | False | "auto" (shard when one device cannot hold it)
    # checkpoints and recovery
    checkpoint_every: int = 500
    keep_last: int = 3
    max_bad_steps: int = 3  # non-finite steps in a row before rolling back
    max_rollbacks: int = 5  # rollbacks in one run before giving up
    # data
    heldout_fraction: float = 0.01
    separator: int | str = "auto"  # "auto" (the tokenizer's EOS if any) | "none" | token id
    shard_tokens: int = 1 << 28  # a shard is closed once it holds this many tokens
    tokenize_batch: int = 512  # documents per encode_batch call
    tokenize_workers: int = 0  # 0: the tokenizer's own threads (hf) or one per CPU core
    # mixture (trainer/mix.py): each language's share of the training stream in characters;
    # or mix_temperature T, shares proportional to characters**T; neither: the corpus's own
    mix: dict[str, float] = field(default_factory=dict)
    mix_temperature: float | None = None
    # logging
    log_every: int = 10  # progress line, and loss/grad norm read from the device (a sync)
    eval_every: int = 100  # held-out loss every N steps in metrics.jsonl (0: never)
    eval_windows: int = 64  # held-out windows of seq_len tokens scored each time

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)  # type: ignore[assignment]  # TOML gives a list
        if self.seq_len is None:  # every preset runs with its own defaults
            self.seq_len = self.model_max_seq_len() or 256

    def model_max_seq_len(self) -> int | None:
        """The model's max_seq_len: [model]'s override, else the preset's (None: unknown)."""

        return self.model.get("max_seq_len", PRESETS.get(self.preset, {}).get("max_seq_len"))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "<dict>") -> TrainConfig:
        return _build(dict(d), source)

    def validate(self, source: str = "<config>") -> TrainConfig:
        def bad(key: str, why: str) -> TrainingError:
            return TrainingError(f"{source}: {key} = {getattr(self, key)!r}: {why}")

        for key in (
            "seq_len",
            "micro_batch",
            "keep_last",
            "log_every",
            "shard_tokens",
            "tokenize_batch",
            "max_bad_steps",
            "checkpoint_every",
            "eval_windows",
        ):
            if getattr(self, key) < 1:
                raise bad(key, "must be at least 1")
        if self.eval_every < 0:
            raise bad("eval_every", "must be >= 0 (0: no held-out loss)")
        top = self.model_max_seq_len()
        if isinstance(top, int) and self.seq_len > top:  # refused before anything is written
            raise bad(
                "seq_len",
                f"exceeds the model's max_seq_len {top} (preset "
                f"{self.preset}); lower seq_len or set [model] max_seq_len",
            )
        for key in ("steps", "tokens", "tokens_per_step"):
            v = getattr(self, key)
            if v is not None and v < 1:
                raise bad(key, "must be at least 1")
        if not (0.0 <= self.heldout_fraction < 1.0):
            raise bad("heldout_fraction", "must be in [0, 1)")
        if not (self.lr > 0 and 0 <= self.min_lr <= self.lr):
            raise bad("min_lr", f"must satisfy 0 <= min_lr <= lr (lr = {self.lr})")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise bad("device", "expected auto, cpu or cuda")
        if self.dtype not in ("auto", "fp32", "bf16"):
            raise bad("dtype", "expected auto, fp32 or bf16")
        for key in ("fsdp", "compile"):
            if getattr(self, key) not in (True, False, "auto"):
                raise bad(key, 'expected true, false or "auto"')
        if not (isinstance(self.separator, int) or self.separator in ("auto", "none")):
            raise bad("separator", 'expected "auto", "none" or a token id')
        if not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.mix.values()
        ):
            raise bad("mix", "expected LANG = SHARE numbers")
        self.mix = check_mix(self.mix, self.mix_temperature, source)
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise bad("betas", "expected two numbers in [0, 1)")
        if self.warmup_steps < 0 or self.grad_clip < 0 or self.weight_decay < 0:
            raise TrainingError(f"{source}: warmup_steps, grad_clip and weight_decay must be >= 0")
        return self

    # -- derived quantities ------------------------------------------------------------
    def use_compile(self, device_type: str) -> bool:
        return self.compile is True or (self.compile == "auto" and device_type == "cuda")

    def accum_steps(self, world_size: int = 1) -> int:
        """Micro-batches per device per optimizer step (rounded up to reach tokens_per_step)."""
        per_micro = self.micro_batch * self.seq_len * world_size
        if self.tokens_per_step is None:
            return 1
        return max(1, math.ceil(self.tokens_per_step / per_micro))

    def step_tokens(self, world_size: int = 1) -> int:
        """Tokens actually consumed per optimizer step, all devices together."""
        return self.accum_steps(world_size) * self.micro_batch * self.seq_len * world_size

    def total_steps(self, train_tokens: int, world_size: int = 1) -> int:
        if self.steps is not None:
            return self.steps
        budget = self.tokens if self.tokens is not None else train_tokens
        return max(1, budget // self.step_tokens(world_size))


_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}


def _check_type(key: str, value: Any, source: str) -> Any:
    """Light type check: TOML has few types, so a wrong one is almost always a typo."""
    default = _FIELDS[key].default  # `model`, the one default_factory field, is caught first
    ok: bool
    if key in ("model", "mix"):
        ok = isinstance(value, dict)
    elif key == "betas":
        ok = isinstance(value, (list, tuple)) and all(isinstance(b, (int, float)) for b in value)
    elif key in ("fsdp", "compile"):
        ok = isinstance(value, bool) or value == "auto"
    elif key == "init_from":  # None (a preset) or a path: run.json stores the None
        ok = value is None or isinstance(value, str)
    elif key == "mix_temperature":
        ok = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
    elif key == "separator":
        ok = (isinstance(value, int) and not isinstance(value, bool)) or value in ("auto", "none")
    elif key in ("tokens_per_step", "steps", "tokens", "seq_len"):
        ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
    elif isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, str)
    if not ok:
        raise TrainingError(f"{source}: {key} = {value!r} has the wrong type")
    return value


def _build(values: dict[str, Any], source: str) -> TrainConfig:
    unknown = sorted(set(values) - set(_FIELDS))
    if unknown:
        raise TrainingError(
            f"{source}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_FIELDS))})"
        )
    checked = {k: _check_type(k, v, source) for k, v in values.items()}
    return TrainConfig(**checked).validate(source)


def load_config(
    path: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> TrainConfig:
    """TrainConfig from a TOML file (or the defaults), then `overrides` (None values skipped).

    A `model` override is merged into the file's `[model]` table rather than replacing it.
    """
    values: dict[str, Any] = {}
    source = "<defaults>"
    if path is not None:
        source = str(path)
        values = read_toml(path, TrainingError, "config file")
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key == "model" and isinstance(values.get("model"), dict):
            values["model"] = {**values["model"], **value}
        else:
            values[key] = value
    return _build(values, source)
