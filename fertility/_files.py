"""Writing a whole text file so that nobody ever sees half of it."""

from __future__ import annotations

import os
from pathlib import Path

from fertility.errors import FertilityError


def write_text_atomic(path: str | os.PathLike, text: str,
                      error: type[FertilityError] = FertilityError) -> None:
    """Replace `path` with `text` in one rename: a reader, or a run killed midway, sees the
    old file or the new one. An OSError becomes `error` naming the file (exit 2)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        raise error(f"{path}: cannot write ({e.strerror or e})") from None
    finally:
        if tmp.exists():
            tmp.unlink()
