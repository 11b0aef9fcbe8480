"""The run folder's layout, read and written in one place.

    RUN_DIR/run.json            what was trained with what (schema fertility.run/1)
    RUN_DIR/tokenizer/<file>    a copy of the tokenizer file
    RUN_DIR/data/               token shards, heldout.jsonl, index.json (trainer.data); a
                                run of `pretrain --shards DIR` has none: run.json's
                                data.shards names DIR, the folder `fertility tokenize` wrote
    RUN_DIR/checkpoints/        step-NNNNNNNN folders (trainer.checkpoint)
    RUN_DIR/metrics.jsonl       one line per step (trainer.loop)

trainer.run, loop, checkpoint and mix write these; eval.run reads them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from fertility.errors import FertilityError, TrainingError
from fertility.outputs import write_inside

RUN_SCHEMA: Final = "fertility.run/1"
RUN_JSON = "run.json"
METRICS = "metrics.jsonl"
TOKENIZER_DIR = "tokenizer"
DATA_DIR = "data"
HELDOUT = "heldout.jsonl"
CHECKPOINTS = "checkpoints"
# --log-to's (trainer/sinks.py): TensorBoard's event files, W&B's folder and run id
TENSORBOARD_DIR, WANDB_DIR, WANDB_ID = "tensorboard", "wandb", "wandb-id"
# What a run writes into its folder (fertility.outputs lists them in the folder's manifest
# before anything is written; `data.partial/` is the shards being built).
OUTPUTS = (
    RUN_JSON,
    METRICS,
    f"{TOKENIZER_DIR}/",
    f"{DATA_DIR}/",
    f"{DATA_DIR}.partial/",
    f"{CHECKPOINTS}/",
    f"{TENSORBOARD_DIR}/",
    f"{WANDB_DIR}/",
    WANDB_ID,
)


def step_name(step: int) -> str:
    """A checkpoint folder's name: step-NNNNNNNN."""
    return f"step-{step:08d}"


def read_run_json(path: str | os.PathLike) -> dict[str, Any]:
    """run.json as written (OSError and ValueError pass through for the caller to word)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_run_json(
    path: str | os.PathLike, record: Mapping[str, Any], error: type[FertilityError] = TrainingError
) -> None:
    """run.json in one piece: a reader, or a run killed midway, sees the old or the new one."""
    file = Path(path)  # through fertility.outputs: a link at run.json is refused, not followed
    write_inside(file.parent, file.name, json.dumps(record, indent=1, ensure_ascii=False), error)


class RunDir:
    """The paths of one run folder; nothing is created or checked on construction."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    @property
    def run_json(self) -> Path:
        return self.root / RUN_JSON

    @property
    def metrics(self) -> Path:
        return self.root / METRICS

    @property
    def tokenizer_dir(self) -> Path:
        return self.root / TOKENIZER_DIR

    @property
    def data(self) -> Path:
        return self.root / DATA_DIR

    @property
    def heldout(self) -> Path:
        """The held-out documents: in the run's data folder, or in the shards' folder that
        run.json names (`pretrain --shards`)."""
        shards = None
        if self.run_json.is_file():
            try:
                shards = (self.read_run_json().get("data") or {}).get("shards")
            except (OSError, ValueError, AttributeError, FertilityError):
                shards = None
        return (Path(shards) if shards else self.data) / HELDOUT

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / step_name(step)

    def tokenizer_copy(self, name: str) -> tuple[Path, str]:
        """(where the tokenizer copy named `name` goes, the path run.json records for it)."""
        rel = f"{TOKENIZER_DIR}/{name}"
        return self.root / rel, rel

    def read_run_json(self) -> dict[str, Any]:
        return read_run_json(self.run_json)

    def write_run_json(
        self, record: Mapping[str, Any], error: type[FertilityError] = TrainingError
    ) -> None:
        write_run_json(self.run_json, record, error)
