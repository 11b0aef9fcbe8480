"""Training configuration: one dataclass, loadable from TOML, overridable from the CLI.

A TOML file sets any field of `TrainConfig` at the top level; model size overrides go in a
`[model]` table (they are passed to `fertility.trainer.model.config_from_preset`). Unknown keys are an
error, never silently ignored: a misspelt `warmup_step = 0` must not train with the default.

Every value is checked when the config is made (`load_config`, `from_dict`, `validate`), from
a file, a preset, the command line or a resumed run's run.json alike, before anything is read
or written: its type (an integer where a count is meant), a finite value (nan and inf are
refused everywhere: nan compares false with every bound, so `grad_clip = nan` would switch
clipping off), its range, and the relations between fields (min_lr <= lr, tokens_per_step a
multiple of one micro-batch on every device, a `[model]` table the model can be built from).
A refusal is one line naming the file (or the command-line option) and the key:
`<file>: <key> must be ..., got <value>`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fertility.config import read_toml
from fertility.errors import TrainingError
from fertility.options import HELDOUT_FRACTION, SEPARATOR, SHARD_TOKENS
from fertility.trainer.mix import check_mix
from fertility.trainer.model import PRESETS, SIZE_FIELDS, ModelConfig
from fertility.trainer.options import config_fields, option_names
from fertility.trainer.sinks import SINKS, missing

# torch.manual_seed takes at most a uint64; numpy's generators take any non-negative integer.
SEED_MAX = 2**64 - 1

# Each preset's optimiser and batch defaults: what these keys become when the config file,
# the command line and `settings` leave them unset (docs/TRAIN.md, "Preset defaults", gives
# the sources and the tiny preset's measured curve). A `tokens_per_step` here is a target:
# the run takes the multiple of one micro-batch on every device nearest to it (at least
# one), so a preset's default is valid under any torchrun world size; None is one
# micro-batch per device and no accumulation (tiny: 16 x 128 = 2,048 tokens per device).
PRESET_TRAINING: dict[str, dict[str, Any]] = {
    # a CPU demonstration that must visibly learn in a few hundred steps: a high lr, a short
    # warmup (measured: 9.01 -> 5.60 nats in 200 steps on real text, docs/TRAIN.md; lr 3e-4,
    # warmup 100 and 1,024 tokens per step ended 300 steps at 7.27)
    "tiny": {
        "lr": 3e-3,
        "min_lr": 3e-4,
        "warmup_steps": 10,
        "micro_batch": 16,
        "tokens_per_step": None,
    },
    # GPT-3 Small (125M; nanoGPT's and llm.c's GPT-2 124M): lr 6e-4, 0.5M tokens per step
    # (nanoGPT 491,520; llm.c 524,288), cosine to 10% of lr, warmup over GPT-3's 375M
    # tokens (~700 steps, llm.c's -u 700)
    "small": {
        "lr": 6e-4,
        "min_lr": 6e-5,
        "warmup_steps": 700,
        "micro_batch": 8,
        "tokens_per_step": 1 << 19,
    },
    "base": {
        "lr": 6e-4,
        "min_lr": 6e-5,
        "warmup_steps": 700,
        "micro_batch": 8,
        "tokens_per_step": 1 << 19,
    },
    # GPT-3 Medium (350M): lr 3e-4 at 0.5M tokens per step (32 micro-batches of 8 x 2048
    # on one device), not one micro-batch of 16k tokens
    "0.4b": {
        "lr": 3e-4,
        "min_lr": 3e-5,
        "warmup_steps": 700,
        "micro_batch": 8,
        "tokens_per_step": 1 << 19,
    },
}
_TINY = PRESET_TRAINING["tiny"]


@dataclass
class TrainConfig:
    # model
    preset: str = "tiny"
    model: dict[str, Any] = field(default_factory=dict)  # ModelConfig overrides
    # batch: micro_batch sequences of seq_len tokens per device per forward pass; gradients
    # are accumulated until tokens_per_step tokens (all devices together) have been seen.
    seq_len: int | None = None  # None: the model's max_seq_len (the preset's, or [model]'s)
    # (the dataclass's defaults are the tiny preset's; load_config and from_dict give each
    # preset its own, PRESET_TRAINING)
    micro_batch: int = _TINY["micro_batch"]
    tokens_per_step: int | None = None  # None: one micro-batch per device, no accumulation
    # length: `steps` wins over `tokens`; neither means one pass over the training shards
    steps: int | None = None
    tokens: int | None = None
    # optimiser and schedule (linear warmup, then cosine decay to min_lr)
    lr: float = _TINY["lr"]
    min_lr: float = _TINY["min_lr"]
    warmup_steps: int = _TINY["warmup_steps"]
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    grad_clip: float = 1.0  # 0 disables clipping (the norm is still measured)
    seed: int = 0
    # continued pretraining: a Llama-architecture Hugging Face folder (trainer/init.py)
    init_from: str | None = None
    # its new rows (trainer/init.py): "mean" | "mean_norm" | "random"; docs/EXTEND.md has the
    # measurement that chose mean (on a tiny CPU model: mean_norm did no better there)
    new_rows_init: str = "mean"
    # peak lr of the embedding matrix and the output head, on the same schedule as lr (None:
    # lr). Continued pretraining keeps the backbone's lr low and this one high (docs/EXTEND.md)
    embedding_lr: float | None = None
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
    heldout_fraction: float = HELDOUT_FRACTION
    separator: int | str = SEPARATOR  # "auto" (the tokenizer's EOS if any) | "none" | token id
    shard_tokens: int = SHARD_TOKENS  # a shard is closed once it holds this many tokens
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
    # metrics.jsonl's lines also drawn in these tools (trainer/sinks.py): tensorboard, wandb
    log_to: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if isinstance(self.betas, list):  # TOML gives a list
            self.betas = tuple(self.betas)
        if self.seq_len is None:  # every preset runs with its own defaults
            self.seq_len = self.model_max_seq_len() or 256

    def model_max_seq_len(self) -> int | None:
        """The model's max_seq_len: [model]'s override, else the preset's (None: unknown)."""
        model = self.model if isinstance(self.model, dict) else {}
        preset = PRESETS.get(self.preset, {}) if isinstance(self.preset, str) else {}
        top = model.get("max_seq_len", preset.get("max_seq_len"))
        return top if isinstance(top, int) and not isinstance(top, bool) else None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        return d

    @classmethod
    def from_dict(
        cls,
        d: Mapping[str, Any],
        source: str = "<dict>",
        options: Mapping[str, str] | None = None,
    ) -> TrainConfig:
        return _build(dict(d), source, options)

    def validate(
        self,
        source: str = "<config>",
        options: Mapping[str, str] | None = None,
        world_size: int | None = None,
    ) -> TrainConfig:
        """Check every field and the relations between them; TrainingError naming `source`
        and the key (or, for a key in `options`, the command-line option that set it).

        `world_size` (default: torchrun's WORLD_SIZE, else 1) is the number of devices
        tokens_per_step is shared by."""
        where = _where(source, options)
        for f in dataclasses.fields(self):
            setattr(self, f.name, _check_field(f.name, getattr(self, f.name), where))
        _check_relations(self, where, _world_size() if world_size is None else world_size)
        return self

    # -- derived quantities ------------------------------------------------------------
    def use_compile(self, device_type: str) -> bool:
        return self.compile is True or (self.compile == "auto" and device_type == "cuda")

    @property
    def resolved_seq_len(self) -> int:
        """seq_len as __post_init__ resolved it (an int once the config is built)."""
        assert self.seq_len is not None, "__post_init__ resolves seq_len"
        return self.seq_len

    def micro_tokens(self, world_size: int = 1) -> int:
        """Tokens of one micro-batch on every device together."""
        return self.micro_batch * self.resolved_seq_len * world_size

    def accum_steps(self, world_size: int = 1) -> int:
        """Micro-batches per device per optimizer step. A validated config's tokens_per_step
        is a multiple of micro_tokens(world_size); otherwise this rounds up."""
        if self.tokens_per_step is None:
            return 1
        return max(1, math.ceil(self.tokens_per_step / self.micro_tokens(world_size)))

    def step_tokens(self, world_size: int = 1) -> int:
        """Tokens actually consumed per optimizer step, all devices together."""
        return self.accum_steps(world_size) * self.micro_tokens(world_size)

    def total_steps(self, train_tokens: int, world_size: int = 1) -> int:
        if self.steps is not None:
            return self.steps
        budget = self.tokens if self.tokens is not None else train_tokens
        return max(1, budget // self.step_tokens(world_size))


_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}
_MODEL_FIELDS = {f.name: f for f in dataclasses.fields(ModelConfig)}

# Integer fields: (least value, greatest value or None). `None` as a value: see _OPTIONAL.
_INTS: dict[str, tuple[int, int | None]] = {
    "seq_len": (1, None),
    "micro_batch": (1, None),
    "tokens_per_step": (1, None),
    "steps": (1, None),
    "tokens": (1, None),
    "warmup_steps": (0, None),
    "seed": (0, SEED_MAX),
    "checkpoint_every": (1, None),
    "keep_last": (1, None),
    "max_bad_steps": (1, None),
    "max_rollbacks": (0, None),
    "shard_tokens": (1, None),
    "tokenize_batch": (1, None),
    "tokenize_workers": (0, None),
    "log_every": (1, None),
    "eval_every": (0, None),
    "eval_windows": (1, None),
}
# Number fields: (low, low is open, high, high is open, a note for the message).
_FLOATS: dict[str, tuple[float, bool, float, bool, str]] = {
    "lr": (0.0, True, math.inf, True, ""),
    "embedding_lr": (0.0, True, math.inf, True, ""),
    "min_lr": (0.0, False, math.inf, True, ""),
    "weight_decay": (0.0, False, math.inf, True, ""),
    "eps": (0.0, True, math.inf, True, ""),
    "grad_clip": (0.0, False, math.inf, True, " (0: no clipping)"),
    "heldout_fraction": (0.0, False, 1.0, True, ""),
    "mix_temperature": (0.0, False, math.inf, True, ""),
}
_OPTIONAL = {
    "seq_len",
    "tokens_per_step",
    "steps",
    "tokens",
    "mix_temperature",
    "init_from",
    "embedding_lr",
}
# [model] keys: integers >= 1, numbers > 0, booleans (ModelConfig's fields).
_MODEL_INTS = SIZE_FIELDS
_MODEL_FLOATS = ("rope_theta", "norm_eps", "init_std")
_MODEL_BOOLS = ("tie_embeddings",)

# Command-line options that set a key (`fertility pretrain`): declared in trainer/options.py.
OPTIONS = {f.name: option_names()[f.name] for f in config_fields()}


def _world_size() -> int:
    """The devices of this run: torchrun's WORLD_SIZE (read before the group is joined)."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        try:
            return max(1, int(os.environ["WORLD_SIZE"]))
        except ValueError:
            return 1
    return 1


class _Where:
    """Names a key in a message: `<source>: <key>`, or the option that set it."""

    def __init__(self, source: str, options: Mapping[str, str] | None) -> None:
        self.source, self.options = source, dict(options or {})

    def __call__(self, key: str) -> str:
        top = key.split(".", 1)[0]
        label = self.options.get(top, self.source)
        if label.startswith("--") and key == top:  # the option is the key's name
            return label
        return f"{label}: {key}"

    def bad(self, key: str, what: str, value: Any) -> TrainingError:
        return TrainingError(f"{self(key)} must be {what}, got {_shown(value)}")


def _where(source: str, options: Mapping[str, str] | None) -> _Where:
    return _Where(source, options)


def _shown(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # nan, inf, -inf as TOML spells them
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def _interval(lo: float, lo_open: bool, hi: float, hi_open: bool) -> str:
    if hi == math.inf:
        return f"{'>' if lo_open else '>='} {lo:g}"
    return f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


def _check_int(key: str, value: Any, lo: int, hi: int | None, where: _Where) -> int:
    if not _is_int(value) or value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        if hi == SEED_MAX:
            rng = f">= {lo} and below 2**64"
        raise where.bad(key, f"an integer {rng}", value)
    return value


def _check_float(key: str, value: Any, spec: tuple, where: _Where) -> float:
    lo, lo_open, hi, hi_open, note = spec
    ok = _is_number(value) and _finite(value)
    if ok:
        x = float(value)
        ok = (x > lo if lo_open else x >= lo) and (x < hi if hi_open else x <= hi)
    if not ok:
        raise where.bad(key, f"a finite number {_interval(lo, lo_open, hi, hi_open)}{note}", value)
    return float(value)


def _check_field(key: str, value: Any, where: _Where) -> Any:
    """One field on its own: type, finiteness, range. Returns the value (floats as float)."""
    if value is None and key in _OPTIONAL:
        return None
    if key in _INTS:
        return _check_int(key, value, *_INTS[key], where)
    if key in _FLOATS:
        return _check_float(key, value, _FLOATS[key], where)
    if key == "preset":
        if not isinstance(value, str) or value not in PRESETS:
            raise where.bad(key, f"one of {', '.join(PRESETS)}", value)
    elif key == "model":
        return _check_model(value, where)
    elif key == "betas":
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise where.bad(key, "two numbers in [0, 1), e.g. [0.9, 0.95]", value)
        return tuple(
            _check_float(f"betas[{i}]", b, (0.0, False, 1.0, True, ""), where)
            for i, b in enumerate(value)
        )
    elif key == "init_from":
        if not isinstance(value, str) or not value:
            raise where.bad(key, "a model folder (a non-empty string)", value)
    elif key == "new_rows_init":
        if value not in ("mean", "mean_norm", "random") or not isinstance(value, str):
            raise where.bad(key, "mean, mean_norm or random", value)
    elif key == "device":
        ok = isinstance(value, str) and (
            value in ("auto", "cpu", "cuda")
            or (value.startswith("cuda:") and value[5:].isascii() and value[5:].isdigit())
        )
        if not ok:
            raise where.bad(key, "auto, cpu, cuda or cuda:N", value)
    elif key == "dtype":
        if value not in ("auto", "fp32", "bf16") or not isinstance(value, str):
            raise where.bad(key, "auto, fp32 or bf16", value)
    elif key in ("fsdp", "compile"):
        if not (isinstance(value, bool) or value == "auto"):
            raise where.bad(key, 'true, false or "auto"', value)
    elif key == "separator":
        if _is_int(value):
            return _check_int(key, value, 0, None, where)
        if value not in ("auto", "none") or not isinstance(value, str):
            raise where.bad(key, '"auto", "none" or a token id (an integer >= 0)', value)
    elif key == "log_to":
        return _check_log_to(value, where)
    elif key == "mix":
        if not isinstance(value, dict):
            raise where.bad(key, "a table of LANG = SHARE", value)
        for lang, share in value.items():
            if not _is_number(share) or not _finite(share) or not 0 < share <= 1:
                raise where.bad(f"mix.{lang}", "a share in (0, 1]", share)
        return {str(k): float(v) for k, v in value.items()}
    return value


def _check_log_to(value: Any, where: _Where) -> list[str]:
    """Sink names, each once, whose package is installed: a missing one is refused here,
    before anything is tokenized, naming the extra that installs it."""
    names = ", ".join(SINKS)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise where.bad("log_to", f"a list of {names}", value)
    for name in value:
        if name not in SINKS or value.count(name) > 1:
            raise where.bad("log_to", f"{names}, each at most once", list(value))
        why = missing(name)
        if why:
            raise TrainingError(f"{where('log_to')}: {why}")
    return list(value)


def _check_model(value: Any, where: _Where) -> dict[str, Any]:
    """The [model] table on its own: known keys, positive integers and finite numbers."""
    if not isinstance(value, dict):
        raise where.bad("model", "a table of model size overrides", value)
    out: dict[str, Any] = {}
    for k, v in value.items():
        key = f"model.{k}"
        if k in _MODEL_INTS:
            out[k] = _check_int(key, v, 1, None, where)
        elif k in _MODEL_FLOATS:
            out[k] = _check_float(key, v, (0.0, True, math.inf, True, ""), where)
        elif k in _MODEL_BOOLS:
            if not isinstance(v, bool):
                raise where.bad(key, "true or false", v)
            out[k] = v
        else:
            known = ", ".join(sorted(_MODEL_FIELDS))
            raise TrainingError(f"{where('model')}: unknown key {k!r} (known: {known})")
    return out


def _check_relations(cfg: TrainConfig, where: _Where, world_size: int) -> None:
    """What holds between fields; each refusal names the key whose value is out of line."""
    # The model this config builds (the preset with [model] over it); its own checks
    # (d_model divisible by n_heads, ...) named by the file. vocab_size comes from the
    # tokenizer later: any positive stand-in checks the rest.
    try:
        ModelConfig.from_dict({"vocab_size": 1, **PRESETS[cfg.preset], **cfg.model})
    except TrainingError as e:
        raise TrainingError(f"{where('model')}: {str(e).removeprefix('model config: ')}") from None
    top = cfg.model_max_seq_len()
    # (with init_from the model's own config.json sets it: checked once that is read)
    if top is not None and cfg.init_from is None and cfg.resolved_seq_len > top:
        raise TrainingError(
            f"{where('seq_len')} = {cfg.seq_len} exceeds the model's max_seq_len {top} "
            f"(preset {cfg.preset}); lower seq_len or set [model] max_seq_len"
        )
    if cfg.min_lr > cfg.lr:
        raise where.bad("min_lr", f"at most lr ({cfg.lr:g})", cfg.min_lr)
    # AdamW multiplies every decayed weight by 1 - lr * weight_decay each step: at 1 or above
    # one step zeroes or flips them all.
    if cfg.lr * cfg.weight_decay >= 1:
        raise where.bad(
            "weight_decay",
            f"below 1 / lr = {1 / cfg.lr:g} (AdamW scales the weights by 1 - lr * weight_decay "
            "each step)",
            cfg.weight_decay,
        )
    micro = cfg.micro_tokens(world_size)
    per = f"micro_batch {cfg.micro_batch} x seq_len {cfg.seq_len}" + (
        f" x {world_size} devices" if world_size > 1 else ""
    )
    if cfg.tokens_per_step is not None and cfg.tokens_per_step % micro:
        raise where.bad(
            "tokens_per_step",
            f"a multiple of {micro} ({per}; a step accumulates whole micro-batches)",
            cfg.tokens_per_step,
        )
    if cfg.tokens is not None:  # (checked even when `steps` wins: no value goes unchecked)
        step = cfg.step_tokens(world_size)
        if cfg.tokens < step:
            raise where.bad("tokens", f"at least one step's {step} tokens", cfg.tokens)
    if cfg.mix and cfg.mix_temperature is not None:
        raise TrainingError(f"{where('mix_temperature')}: give mix or mix_temperature, not both")
    if cfg.mix and abs(sum(cfg.mix.values()) - 1) > 1e-6:
        total = sum(cfg.mix.values())
        raise TrainingError(f"{where('mix')} must be shares summing to 1, got a sum of {total:g}")
    cfg.mix = check_mix(cfg.mix, cfg.mix_temperature, where.source)  # mix's own rules


def _build(
    values: dict[str, Any], source: str, options: Mapping[str, str] | None = None
) -> TrainConfig:
    unknown = sorted(set(values) - set(_FIELDS))
    if unknown:
        raise TrainingError(
            f"{source}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_FIELDS))})"
        )
    where = _where(source, options)
    # Each value on its own first: the dataclass's own defaults (seq_len from the preset's
    # max_seq_len) read them.
    checked = {k: _check_field(k, v, where) for k, v in values.items()}
    preset = PRESET_TRAINING[checked.get("preset", TrainConfig.preset)]
    given_step = "tokens_per_step" in checked
    for key, value in preset.items():
        checked.setdefault(key, value)
    cfg = TrainConfig(**checked)
    target = preset["tokens_per_step"]
    if not given_step and target is not None:
        cfg.tokens_per_step = preset_tokens_per_step(target, cfg.micro_tokens(_world_size()))
    return cfg.validate(source, options)


def preset_tokens_per_step(target: int, micro: int) -> int:
    """The multiple of one micro-batch on every device (`micro` tokens) nearest to a
    preset's `target` tokens per step, at least one micro-batch (ties round up)."""
    return max(1, (2 * target + micro) // (2 * micro)) * micro


def _apply(
    values: dict[str, Any], overrides: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """`values` with `overrides` (None values skipped) over them, and the options that set
    keys (for messages). A `model` override is merged into the `[model]` table."""
    options: dict[str, str] = {}
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key == "model" and isinstance(values.get("model"), dict) and isinstance(value, dict):
            values["model"] = {**values["model"], **value}
        else:
            values[key] = value
        options[key] = OPTIONS.get(key, "overrides")  # the Python API's own
    return values, options


def load_config(
    path: str | os.PathLike | None = None, overrides: Mapping[str, Any] | None = None
) -> TrainConfig:
    """TrainConfig from a TOML file (or the defaults), then `overrides` (None values skipped).

    A `model` override is merged into the file's `[model]` table rather than replacing it.
    A key set by an override is named in messages by its command-line option (OPTIONS).
    """
    values: dict[str, Any] = {}
    source = "<defaults>"
    if path is not None:
        source = str(path)
        values = read_toml(path, TrainingError, "config file")
    values, options = _apply(values, overrides)
    return _build(values, source, options)


def resumed_config(
    stored: Any, overrides: Mapping[str, Any] | None = None, source: str = "run.json"
) -> TrainConfig:
    """A resumed run's config: run.json's `train` (checked as it is, named `source`), then
    the command line's `overrides` over it (named by their options)."""
    if not isinstance(stored, dict):
        raise TrainingError(f"{source}: train must be a table of the run's configuration")
    base = TrainConfig.from_dict(stored, source).to_dict()
    values, options = _apply(base, overrides)
    return _build(values, source, options)
