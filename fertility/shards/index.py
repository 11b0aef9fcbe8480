"""A data folder's index.json (schema fertility.shards/1): read back, and every shard it lists
checked to be a regular file inside the folder before any is opened. Written by
trainer.data.build_shards (pretrain given a corpus) and fertility.engine.tokenize
(`fertility tokenize`); read by both and by the trainer."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Final

from fertility.errors import TrainingError

if TYPE_CHECKING:  # index.json's record (fertility/schemas/shards.py), for mypy only
    from fertility.schemas.shards import Shards

INDEX_SCHEMA: Final = "fertility.shards/1"


def read_index(data_dir: str | Path) -> Shards | None:
    """The data folder's index, or None when there is no complete one."""
    path = Path(data_dir) / "index.json"
    if not path.is_file():
        return None
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TrainingError(f"{path}: unreadable shard index ({e})") from None
    if index.get("schema") != INDEX_SCHEMA:
        raise TrainingError(f"{path}: unknown shard index schema {index.get('schema')!r}")
    check_entries(path, index)
    return index  # JSON read back (Any), its schema and shard entries checked


def check_entries(path: Path, index: dict) -> None:
    """Every shard the index lists is a regular file inside its folder, said by name before
    any is opened: an entry edited to `../corpus/en.txt` or `/dev/zero` was opened (read
    whole, or forever) before it was refused."""
    folder = path.parent
    for split in ("train", "heldout"):
        entries = index.get(split)
        if not isinstance(entries, list):
            raise TrainingError(f"{path}: '{split}' is not a list of shards")
        for entry in entries:
            name = entry.get("file") if isinstance(entry, dict) else None
            if not isinstance(name, str) or not _inside_name(name):
                raise TrainingError(
                    f"{path}: the {split} shard {name!r} is not a file inside {folder}; the "
                    "index was edited or damaged: tokenize again"
                )
            try:
                mode = os.lstat(folder / name).st_mode
            except OSError as e:
                raise TrainingError(
                    f"{folder / name}: {split} shard listed in {path} ({e.strerror})"
                ) from None
            if not stat.S_ISREG(mode):
                raise TrainingError(
                    f"{folder / name}: {split} shard listed in {path} is not a regular file "
                    "(a link, a device or a folder); tokenize again"
                )


def _inside_name(name: str) -> bool:
    """A relative name that stays inside its folder (no `..`, not absolute, no backslash)."""
    parts = PurePosixPath(name).parts
    return (
        bool(parts)
        and not PurePosixPath(name).is_absolute()
        and ".." not in parts
        and ("\\" not in name)
    )
