"""Where a run's metrics go besides metrics.jsonl: TensorBoard and Weights & Biases.

metrics.jsonl is the source: every line the trainer writes there (Trainer._write) is handed
to `Sinks.write`, which turns it into scalars, so the tools show the same numbers the file
holds. A step line gives `train/<key>` for loss, lr, grad_norm, tokens_per_s and mfu (a null,
e.g. the loss of a skipped step or MFU on the CPU, is left out rather than drawn as 0); a
held-out line (`"event": "heldout"`) gives `heldout/<path>` for every number in it, nested
tables joined by "/" (`heldout/loss`, and a language's `heldout/languages/bn/bits_per_byte`
when the line holds one), so whatever the evaluation records is shown without a second list
to keep in step. Other events (resume, rollback, terminated) stay in metrics.jsonl only.

Which sinks (`log_to`, `--log-to`) is declared in SINKS; each needs its package, an optional
extra (`pip install 'fertility[tensorboard]'`), checked when the config is made (`require`),
so a missing one is a one-line error before anything is tokenized, not a crash at step 1.

The packages are imported only when a sink is opened: `--help` and runs without sinks never
load them.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fertility.errors import TrainingError
from fertility.outputs import write_inside
from fertility.trainer.rundir import TENSORBOARD_DIR, WANDB_ID

# sink -> (the module it imports, the extra that installs it)
SINKS: dict[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "wandb": ("wandb", "wandb"),
}
# The step line's keys that are drawn (the rest, e.g. per-language counts, stay in the file).
STEP_KEYS = ("loss", "lr", "grad_norm", "tokens_per_s", "mfu")


def missing(name: str) -> str | None:
    """Why sink `name` cannot be opened here (its package is not installed), or None."""
    module, extra = SINKS[name]
    if importlib.util.find_spec(module) is None:
        return f"{name} needs the {module} package: pip install 'fertility[{extra}]'"
    return None


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The tag -> value pairs a metrics.jsonl line is drawn as (see the module docstring)."""
    if "event" not in record:
        return {f"train/{k}": float(record[k]) for k in STEP_KEYS if _number(record.get(k))}
    if record["event"] == "heldout":
        body = {k: v for k, v in record.items() if k not in ("event", "step")}
        return dict(_flatten("heldout", body))
    return {}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _flatten(prefix: str, value: Any) -> Iterator[tuple[str, float]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _flatten(f"{prefix}/{k}", v)
    elif _number(value):
        yield prefix, float(value)


class Sinks:
    """The open sinks of one run (on the main rank); `write` takes each metrics.jsonl line."""

    def __init__(self, writers: list[Any]) -> None:
        self.writers = writers

    def write(self, record: Mapping[str, Any]) -> None:
        if not self.writers or "step" not in record:
            return
        values = scalars(record)
        if values:
            for w in self.writers:
                w.log(values, int(record["step"]))

    def close(self) -> None:
        for w in self.writers:
            w.close()
        self.writers = []


def open_sinks(
    names: list[str], run_dir: Path, step: int, config: Mapping[str, Any] | None = None
) -> Sinks:
    """Open `names` for a run at `step` (0 for a fresh run, the checkpoint's on --resume)."""
    openers = {"tensorboard": _TensorBoard, "wandb": _WandB}
    return Sinks([openers[n](run_dir, step, dict(config or {})) for n in names])


class _TensorBoard:
    def __init__(self, run_dir: Path, step: int, config: dict[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step: TensorBoard's readers drop the events at steps after the checkpoint
        # that an earlier process wrote, as the trainer drops their metrics.jsonl lines
        # (a fresh run in the folder purges everything).
        self.writer = SummaryWriter(log_dir=str(run_dir / TENSORBOARD_DIR), purge_step=step + 1)

    def log(self, values: dict[str, float], step: int) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, global_step=step)
        self.writer.flush()  # a run killed later still shows every line metrics.jsonl has

    def close(self) -> None:
        self.writer.close()


class _WandB:
    def __init__(self, run_dir: Path, step: int, config: dict[str, Any]) -> None:
        import wandb

        # The user's own W&B settings (login, WANDB_MODE, WANDB_PROJECT, WANDB_ENTITY) apply;
        # the run id is kept in the run folder so --resume continues the same W&B run.
        id_file = run_dir / WANDB_ID
        run_id = id_file.read_text("utf-8").strip() if step and id_file.exists() else None
        if not run_id:
            run_id = secrets.token_hex(8)  # W&B's ids: letters and digits
            # through fertility.outputs: a link planted at wandb-id is refused, not followed
            write_inside(run_dir, WANDB_ID, run_id + "\n", TrainingError)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "fertility"),
            name=run_dir.name,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            config=config,
        )

    def log(self, values: dict[str, float], step: int) -> None:
        self.run.log(values, step=step)

    def close(self) -> None:
        self.run.finish()
