"""Which files a corpus reads, and why the others are not: the walk of the paths named.

Folders are walked in sorted name order, depth first, with a stack (no recursion limit).
Skipped, each with its reason in the corpus summary's `skipped_files`: unsupported formats,
hidden entries, non-regular files, symbolic links to folders (never followed), broken links
and link loops, a second name for a file or folder already met (told apart by device and
inode), a file that appeared after the corpus was opened, and what a manifest of fertility's
outputs lists (fertility.outputs: a manifest above a named path is not read, so an output
named itself is read). A file's language comes from its name, else from the nearest folder
whose name is a known ISO 639 code (iso639.txt beside this file). A URL (`hf://`, `s3://`,
`http(s)://`, any fsspec protocol) is listed and read in place (fertility/corpus/remote.py).
"""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import PurePath

from fertility import outputs
from fertility.corpus import formats as fmt
from fertility.corpus import remote
from fertility.errors import CorpusError, visible


@dataclass(frozen=True)
class CorpusFile:
    path: str  # as reached from the argument, e.g. "corpus/bn/part-1.txt"
    rel: str  # relative to the argument that named it (POSIX separators); keys sampling
    format: str  # "txt" | "jsonl" | "parquet"
    compression: str | None  # "gzip" | "zstd" | "xz" | "bzip2" | None
    lang: str | None  # label from the file name or a folder; None when they say nothing
    size: int = 0  # bytes when the corpus was opened: all that is read of it
    fs_path: str | None = None  # the name to open, when `path` had to be made printable
    folder_lang: bool = False  # `lang` is a folder's: a record's lang_field wins over it


class Walk:
    """The files of the paths given to `resolve`, in order (`files`), and what was skipped
    (`skipped`: path and reason). `sizes` fixes each file's size (a worker reads what its
    parent saw; a file it does not list appeared since); `warn` takes one line per named
    path with skipped entries."""

    def __init__(self, sizes: dict[str, int] | None, warn: Callable[[str], None]):
        self._sizes = sizes
        self.warn = warn
        self.files: list[CorpusFile] = []
        self.skipped: list[dict] = []
        # (st_dev, st_ino) -> the name first met: a file is read once, a folder walked once,
        # whatever names (hard links, symbolic links, arguments) lead to them
        self._ids: dict[tuple[int, int], str] = {}
        self._folders: dict[tuple[int, int], str] = {}

    def resolve(self, path: str) -> None:
        """Add the files `path` names (a file, or a folder walked), or record why not."""
        if remote.is_remote(path):  # a URL: listed and read through fsspec (remote.py)
            before = len(self.skipped)
            for url, rel, folders, size in remote.files(path):
                self._add_remote(url, rel, folders, size)
            if skipped := self.skipped[before:]:
                self.warn(f"{shown(path)}: skipped {len(skipped)} file(s) ({skip_counts(skipped)})")
            return
        if os.path.isdir(path):
            before = len(self.skipped)
            self._walk(path, [os.path.basename(os.path.abspath(path))])
            if skipped := self.skipped[before:]:
                self.warn(
                    f"{shown(path)}: skipped {len(skipped)} file(s) "
                    f"({skip_counts(skipped)}); see summary skipped_files"
                )
        elif os.path.isfile(path):
            parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
            if reason := self._add(path, os.path.basename(path), [parent]):
                self.warn(f"{shown(path)}: skipped ({reason})")
        elif os.path.islink(path):
            if _link_loop(path):
                raise CorpusError(f"{shown(path)}: symbolic link loop (it leads back to itself)")
            raise CorpusError(f"{shown(path)}: broken symbolic link (its target does not exist)")
        elif os.path.lexists(path):
            self._skip(path, "not a regular file")
            self.warn(f"{shown(path)}: skipped (not a regular file)")
        else:
            raise CorpusError(f"{shown(path)}: no such file or directory")

    def _walk(self, top: str, folders: list[str]) -> None:
        # A stack, not recursion: a folder nested 1,100 deep is read, not a RecursionError.
        # Each folder's entries go on in reverse, so the walk keeps sorted depth-first order.
        # A frame carries the manifests met on the way down ((depth of their folder, what
        # they list)): an entry may list a path a few folders down (`runs/step-10/`).
        stack: list = [(top, (), folders, (), None)]
        while stack:
            folder, rel, folders, manifests, entry = stack.pop()
            if entry is None:
                if first := self._walked(folder):
                    self._skip(folder, f"same folder as {shown(first)}")
                    continue
                try:
                    entries = sorted(os.scandir(folder), key=lambda e: e.name)
                except OSError as e:
                    raise CorpusError(
                        f"{shown(folder)}: cannot list folder ({e.strerror or e})"
                    ) from None
                if any(e.name == outputs.MANIFEST for e in entries):
                    if listed := outputs.listed_outputs(folder):
                        manifests += ((len(rel), listed),)
                stack.extend((folder, rel, folders, manifests, e) for e in reversed(entries))
                continue
            path = os.path.join(folder, entry.name)
            if manifests and any(
                outputs.is_listed("/".join(rel[depth:] + (entry.name,)), listed)
                for depth, listed in manifests
            ):
                self._skip(path, WRITTEN_BY_FERTILITY)
            elif entry.name.startswith("."):
                self._skip(path, "hidden")
            elif entry.is_dir(follow_symlinks=False):
                stack.append((path, rel + (entry.name,), [entry.name] + folders, manifests, None))
            elif entry.is_file(follow_symlinks=False):
                self._add(path, "/".join(rel + (entry.name,)), folders, self._stat(entry))
            elif not entry.is_symlink():
                self._skip(path, "not a regular file")
            elif (target := self._stat(entry, follow=True)) is None:
                self._skip(
                    path, "symbolic link loop" if _link_loop(path) else "broken symbolic link"
                )
            elif stat.S_ISDIR(target.st_mode):
                self._skip(path, "symbolic link to a folder (not followed)")
            elif stat.S_ISREG(target.st_mode):
                self._add(path, "/".join(rel + (entry.name,)), folders, target)
            else:
                self._skip(path, "not a regular file")

    def _walked(self, folder: str) -> str | None:
        """The name `folder` was walked under already, or None (it is now)."""
        try:
            st = os.stat(folder)
        except OSError as e:
            raise CorpusError(f"{shown(folder)}: cannot list folder ({e.strerror or e})") from None
        first = self._folders.setdefault((st.st_dev, st.st_ino), folder)
        return None if first is folder else first

    @staticmethod
    def _stat(entry: os.DirEntry, follow: bool = False) -> os.stat_result | None:
        """The entry's stat (its target's with `follow`); None for a link that leads nowhere
        (broken, or a loop)."""
        try:
            return entry.stat(follow_symlinks=follow)
        except OSError as e:
            if follow and e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return None
            raise CorpusError(f"{shown(entry.path)}: cannot read ({e.strerror or e})") from None

    def _add(
        self, path: str, rel: str, folders: list[str], st: os.stat_result | None = None
    ) -> str | None:
        """Add the file (`st`: its stat, following links), or skip it and return why."""
        stem, format_, compression = fmt.split_name(os.path.basename(path))
        if format_ is None:
            suffix = PurePath(stem).suffix + (PurePath(path).suffix if compression else "")
            reason = f"unsupported format ({suffix or 'no extension'})"
        else:
            if st is None:
                try:
                    st = os.stat(path)
                except OSError as e:
                    raise CorpusError(f"{shown(path)}: cannot read ({e.strerror or e})") from None
            first = self._ids.get((st.st_dev, st.st_ino))
            if first is not None:
                reason = f"same file as {shown(first)}"
            elif self._sizes is not None and path not in self._sizes:
                reason = "appeared after the corpus was opened"  # so the other readers lack it
            else:
                self._ids[st.st_dev, st.st_ino] = path
                size = st.st_size if self._sizes is None else self._sizes[path]
                self._file(path, rel, stem, format_, compression, folders, size)
                return None
        self._skip(path, reason)
        return reason

    def _file(
        self,
        path: str,
        rel: str,
        stem: str,
        format_: str,
        compression: str | None,
        folders: list[str],
        size: int,
    ) -> None:
        lang = fmt.lang_label(stem)  # the file's name, else the nearest folder's
        from_folder = lang is None
        if from_folder:
            lang = next(filter(None, map(folder_lang, folders)), None)
        name = shown(path)
        self.files.append(
            CorpusFile(
                name,
                rel,
                format_,
                compression,
                lang,
                size,
                None if name == path else path,
                from_folder and lang is not None,
            )
        )

    def _add_remote(self, url: str, rel: str, folders: list[str], size: int) -> None:
        """A file of a URL (remote.files): no links or inodes to follow, the rest as _add."""
        stem, format_, compression = fmt.split_name(url.rsplit("/", 1)[-1])
        if any(part.startswith(".") for part in rel.split("/")):
            self._skip(url, "hidden")
        elif format_ is None:
            suffix = PurePath(stem).suffix + (PurePath(url).suffix if compression else "")
            self._skip(url, f"unsupported format ({suffix or 'no extension'})")
        elif self._sizes is not None and url not in self._sizes:
            self._skip(url, "appeared after the corpus was opened")
        else:
            size = size if self._sizes is None else self._sizes[url]
            self._file(url, rel, stem, format_, compression, folders, size)

    def _skip(self, path: str, reason: str) -> None:
        self.skipped.append({"path": shown(path), "reason": reason})


def skip_counts(skipped: list[dict]) -> str:
    """`skipped` in a few words: how many for each reason."""
    counts = Counter(s["reason"].split(" (")[0] for s in skipped)
    return ", ".join(f"{n} {reason}" for reason, n in counts.items())


def shown(path: str) -> str:
    """`path` as it can be printed on one line and written to JSON: bytes of a file name that
    are not UTF-8 (kept by Python as lone surrogates) become \\xNN, and control and
    bidirectional characters are escaped (`fertility.errors.visible`: `\\n`, `\\x1b`,
    `\\u202e`), so a message naming it is one line that reads as it is."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        path = os.fsencode(path).decode("utf-8", "backslashreplace")
    return visible(path)


WRITTEN_BY_FERTILITY = f"written by fertility (listed in {outputs.MANIFEST})"


def _link_loop(path: str) -> bool:
    """Whether the symbolic link `path` leads back to itself (a -> b -> a, a -> a)."""
    try:
        os.stat(path)
    except OSError as e:
        return e.errno == errno.ELOOP
    return False


# -- folder names that are language codes -------------------------------------------------
# A folder's name is a label only when it is a known code: ISO 639-1 for two letters, ISO
# 639-3 or 639-2/B (`ger`, `fre`) for three, listed in iso639.txt beside this file (from
# Debian's iso-codes 4.15; tests/corpus/test_walk.py checks it against /usr/share/iso-codes).
LANG_CODES = frozenset(
    code
    for line in (files("fertility.corpus") / "iso639.txt").read_text("ascii").splitlines()
    if not line.startswith("#")
    for code in line.split()
)


def folder_lang(name: str) -> str | None:
    """The language a folder's name gives, or None: `bn`, `ben`, `ger`, `ben_Beng`, `pt_BR`,
    never `pq`, `data`, `dev`. A bare 2-3 letter name must be a known code (above); with a
    script or region subtag the shape is enough (FineWeb-2 `ben_Beng/`)."""
    lang = fmt.lang_label(name)
    if lang is None or len(lang) > 3:
        return lang
    return lang if lang in LANG_CODES else None
