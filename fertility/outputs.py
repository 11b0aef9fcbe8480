"""The one output policy every verb follows: what `fertility` may write, replace or delete.

The user's files are sacred. Three rules, checked here and nowhere else:

1. **An output is never an input of the same run.** Before anything is measured, each output
   path is compared (device and inode, after resolving links) with every file the command
   reads: corpus files, tokenizer files, the policy, task files, the run's own files. The
   same path named twice as an output (`-o X --junit X`) is refused too.
2. **An output folder is new, empty, or one this project made.** A folder `fertility` fills
   holds `MANIFEST`, which lists (relative POSIX paths; a folder entry ends in `/` and
   covers what is inside it) everything this project wrote there. Only a listed file is ever
   replaced or deleted; nothing is swept by pattern. A single-file output (`-o FILE`) is
   recorded in the manifest of its folder too, so a re-run may replace it and the corpus
   walker knows it is not text: an existing file the manifest does not list is the user's
   and is never replaced.
3. **Outputs stay out of the corpus.** An output inside a corpus folder the command reads
   is refused unless the user forces it (`--allow-output-in-corpus`); the corpus walker
   skips every file a manifest lists (`listed_outputs`) and says so in its summary.

Refusals are `OutputError`: one line naming the path and how to proceed, exit 2.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

# The manifest's file name: hidden, so a listing of an output folder shows the outputs.
MANIFEST = ".fertility-manifest.json"
# The manifest's format; readers refuse a newer one rather than guess.
MANIFEST_SCHEMA = "fertility.manifest/1"


def read_manifest(folder: str | os.PathLike) -> dict | None:
    """The manifest of `folder` as a dict (`schema`, `made_by`, `entries`), or None when the
    folder has none. A manifest that cannot be read or parsed is treated as absent: the folder
    is then not known to be ours, which is the safe side."""
    try:
        with open(Path(folder) / MANIFEST, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        return None
    entries = data.get("entries")
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return None
    return data


def listed_outputs(folder: str | os.PathLike) -> frozenset[str]:
    """The relative POSIX paths the manifest of `folder` lists (folder entries end in `/`),
    always including the manifest itself; empty when there is no manifest."""
    data = read_manifest(folder)
    if data is None:
        return frozenset()
    return frozenset([MANIFEST, *(_clean(e) for e in data["entries"] if _clean(e))])


def is_listed(rel: str, entries: frozenset[str]) -> bool:
    """Whether the relative POSIX path `rel` is one of `entries` or lies inside a folder
    entry (`checkpoints/` covers `checkpoints/step-10/state.json`)."""
    rel = _clean(rel)
    if rel in entries or rel + "/" in entries:
        return True
    parts = PurePosixPath(rel).parts
    return any("/".join(parts[:i]) + "/" in entries for i in range(1, len(parts)))


def _clean(entry: str) -> str:
    """A manifest entry normalised: no `.` or `..` parts, no leading `/` (an entry can never
    point outside its folder), a folder entry keeps its trailing `/`."""
    folder = entry.endswith("/")
    parts = [p for p in PurePosixPath(entry).parts if p not in ("", ".", "/")]
    if not parts or ".." in parts:
        return ""
    return "/".join(parts) + ("/" if folder else "")

