"""Writing a whole text file so that nobody ever sees half of it."""

from __future__ import annotations

import contextlib
import glob
import json
import math
import os
import stat
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from fertility.errors import FertilityError


def write_text_atomic(
    path: str | os.PathLike, text: str | bytes, error: type[FertilityError] = FertilityError
) -> None:
    """Write `text` (UTF-8; bytes as they are: an image) to `path` so that a reader, or a run
    killed midway, sees the old file or the new one. An OSError becomes `error` naming the
    file (exit 2).

    Only a regular file (or a new name) is replaced by a rename. A symlink is written through:
    the rename happens beside its target, so the link stays a link and the target is fresh.
    A character device, FIFO or socket (/dev/null, /dev/stdout, a pipe) is written to in place:
    renaming over it would replace the device node with a file."""
    if not os.fspath(path):
        raise error("empty output file name")
    try:
        mode = os.stat(path).st_mode  # follows symlinks (and /dev/stdout's magic link)
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise error(f"{path}: cannot write ({e.strerror or e})") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise error(f"{path}: is a folder, not a file")
    if mode is not None and not stat.S_ISREG(mode):
        try:
            if isinstance(text, bytes):
                with open(path, "wb") as fb:
                    fb.write(text)
            else:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
        except OSError as e:
            raise error(f"{path}: cannot write ({e.strerror or e})") from None
        return
    path = Path(os.path.realpath(path))  # the rename happens where the file really is
    remove_stale_partials(path)
    tmp = path.with_name(f".{path.name}{PARTIAL}{os.getpid()}")
    try:
        # O_NOFOLLOW: the temporary name is ours alone; a link planted there is not written
        # through (the write fails, naming the file)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        with open(os.open(tmp, flags, 0o666), "wb") as fb:
            fb.write(text if isinstance(text, bytes) else text.encode("utf-8"))
        os.replace(tmp, path)
    except OSError as e:
        raise error(f"{path}: cannot write ({e.strerror or e})") from None
    finally:
        if tmp.exists() and not tmp.is_symlink():
            tmp.unlink()


# A temporary file of ours: `.NAME.fertility-partial-PID` beside NAME, renamed into place.
# The name is this project's own, so a leftover of a killed run is never confused with a
# user's file (a browser's or a download manager's `.partial`).
PARTIAL = ".fertility-partial-"


def partial_path(final: Path) -> Path:
    """The temporary name of `final` for this process (see PARTIAL)."""
    return final.with_name(f".{final.name}{PARTIAL}{os.getpid()}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # exists but is not ours (or cannot be asked): leave its files alone
    return True


def remove_stale_partials(path: Path) -> None:
    """Delete `.NAME.fertility-partial-PID` files beside `path` left by a run that was killed
    (SIGKILL leaves no chance to clean up); a running writer's file (its PID alive) is kept."""
    try:
        leftovers = list(path.parent.glob(f".{glob.escape(path.name)}{PARTIAL}*"))
    except OSError:
        return
    for tmp in leftovers:
        pid = tmp.name.rsplit("-", 1)[-1]
        if tmp.is_symlink():
            continue  # not a file of ours: fertility makes no links
        if pid.isdigit() and not pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def locked_folder(folder: Path, error: type[FertilityError], what: str, subfolders=()):
    """Hold an exclusive lock on `folder` (flock on the folder itself: no lock file to leave
    behind; the kernel drops it when the process dies, however it dies). A second writer gets
    `error` at once. Under the lock no one else can be writing, so this project's temporary
    files (PARTIAL) in the folder and in `subfolders` (relative names) are a killed run's
    leftovers and are removed; nothing else is touched, nothing is swept recursively."""
    try:
        # deferred: optional: probed, ImportError handled
        import fcntl
    except ImportError:  # no flock (Windows): run unlocked
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise error(
                f"{folder}: another {what} is writing this folder; wait for it to "
                "end or choose another one"
            ) from None
        for where in (folder, *(folder / s for s in subfolders)):
            for tmp in where.glob(f".*{PARTIAL}*"):
                if tmp.is_file() and not tmp.is_symlink():
                    tmp.unlink(missing_ok=True)
        yield
    finally:
        os.close(fd)


# A folder being filled as one unit (`fertility fix --out`) holds this file, naming the writer's
# PID, from its first change until its last file is in place: a reader that finds it refuses
# the folder, whose files may come from two runs. The next run of the writer replaces it.
UNFINISHED = ".unfinished"


def mark_unfinished(folder: Path) -> None:
    # O_NOFOLLOW: a link planted at the marker's name is refused, not written through
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with open(os.open(folder / UNFINISHED, flags, 0o666), "w", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")


def mark_finished(folder: Path) -> None:
    (folder / UNFINISHED).unlink(missing_ok=True)


def unfinished_by_another(folder: Path) -> bool:
    """Whether `folder` is marked unfinished by a process other than this one or its parent
    (the writer itself, and its measuring workers, read what it has written so far)."""
    try:
        pid = (folder / UNFINISHED).read_text().strip()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return pid not in (str(os.getpid()), str(os.getppid()))


def json_safe(x: Any) -> Any:
    """`x` with what JSON cannot hold made plain, dicts and lists walked: numpy numbers as
    Python numbers, NaN and infinities as null, tuples and sets as lists, paths as strings.
    Every JSON document fertility writes goes through it (with `allow_nan=False`)."""
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, PurePath):
        return str(x)
    return x


def report_json(obj: Any) -> str:
    """A result record's JSON file text (fix-report.json, extend-report.json): json_safe,
    strict (no NaN), indented, UTF-8 as itself, one newline at the end."""
    text = json.dumps(json_safe(obj), ensure_ascii=False, indent=2, allow_nan=False, default=str)
    return text + "\n"
