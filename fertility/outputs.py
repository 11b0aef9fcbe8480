"""The one output policy every verb follows: what `fertility` may write, replace or delete.

The user's files are sacred. Three rules, checked here and nowhere else:

1. **An output is never an input of the same run.** Before anything is measured, each output
   path is compared (device and inode, after resolving links) with every file the command
   reads: corpus files, tokenizer files, the policy, task files, the run's own files. The
   same path named twice as an output (`-o X --junit X`) is refused too.
2. **An output folder is new, empty, or one this project made.** A folder `fertility` fills
   holds `MANIFEST`, which names the verb that made it and lists (relative POSIX paths; a
   folder entry ends in `/` and covers what is inside it) everything this project wrote
   there, each entry recorded before its file is written. Only a listed file is ever
   replaced or deleted; anything else in the folder is the user's and is kept; nothing is
   swept by pattern. A single-file output (`-o FILE`) is
   recorded in the manifest of its folder too, so a re-run may replace it and the corpus
   walker knows it is not text: an existing file the manifest does not list is the user's
   and is never replaced.
3. **Outputs stay out of the corpus.** An output inside a corpus folder the command reads
   is refused unless the user forces it (`--allow-output-in-corpus`); the corpus walker
   skips every file a manifest lists (`listed_outputs`) and says so in its summary.
4. **Inside its own folder, nothing is followed.** The folder the user names is resolved as
   named; below it, every write, replace and delete goes through the `inside` family
   (`inside`, `make_inside`, `write_inside`, `open_inside`, `replace_inside`, `remove`),
   which refuses a symbolic link at any part of the path (fertility makes none).

Refusals are `OutputError`: one line naming the path and how to proceed, exit 2.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Final, cast

from fertility.errors import FertilityError, OutputError
from fertility.files import PARTIAL, write_text_atomic

if TYPE_CHECKING:  # the manifest's record (fertility/schemas/manifest.py), for mypy only
    from fertility.schemas.manifest import Manifest

# The manifest's file name: hidden, so a listing of an output folder shows the outputs.
MANIFEST = ".fertility-manifest.json"
# The manifest's format; readers refuse a newer one rather than guess.
MANIFEST_SCHEMA: Final = "fertility.manifest/1"


def read_manifest(folder: str | os.PathLike) -> Manifest | None:
    """The manifest of `folder` as a dict (`schema`, `made_by`, `entries`), or None when the
    folder has none. A manifest that cannot be read or parsed is treated as absent: the folder
    is then not known to be ours, which is the safe side."""
    try:
        # O_NOFOLLOW: a manifest that is a symbolic link is not this folder's own record
        fd = os.open(Path(folder) / MANIFEST, os.O_RDONLY | _NOFOLLOW)
        with open(fd, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        return None
    entries = data.get("entries")
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return None
    return cast("Manifest", data)  # its schema and entries checked above


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


# ---------------------------------------------------------------- what this run reads


@dataclass
class Inputs:
    """Everything a command reads, for rule 1 and 3.

    files: input files (corpus files named directly, tokenizer files, the policy, task
    files). corpora: corpus folders, walked (an output inside one is refused unless forced).
    folders: other input folders (a run folder, a tokenizer folder): everything inside is an
    input, and an output inside one is refused outright. roles: what each folder is, for the
    message ("the run folder"); "input folder" when not named."""

    files: list[Path] = field(default_factory=list)
    corpora: list[Path] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)
    roles: dict[Path, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        corpus: Iterable[str | os.PathLike] = (),
        tokenizers: Iterable[str | None] = (),
        files: Iterable[str | os.PathLike | None] = (),
        folders: Iterable[str | os.PathLike | None] = (),
        roles: Mapping[str, str | os.PathLike] | None = None,
    ) -> Inputs:
        """The inputs of a command: corpus paths (files or folders), tokenizer specs
        (`[LABEL=]SPEC[#PATTERN]`; `hf:` and `tiktoken:` names read no local file of the
        user's), other files (policy, config, task files) and other input folders, and
        folders named by their role (`roles={"run folder": RUN}`). Paths that do not exist
        are left out: the command's own check names them."""
        made = cls()
        for p in corpus:
            made._add(Path(p), corpus=True)
        for spec in tokenizers:
            if spec and (path := _spec_path(spec)):
                made._add(Path(path), corpus=False)
        for file in files:
            if file:
                made._add(Path(file), corpus=False)
        for folder in folders:
            if folder:
                made._add(Path(folder), corpus=False)
        for role, p in (roles or {}).items():
            made._add(Path(p), corpus=False)
            made.roles[_real(Path(p))] = role
        # The project's configuration is read by every verb (tokenizers, the gate policy).
        for name in ("fertility.toml", "pyproject.toml"):
            made._add(Path(name), corpus=False)
        return made

    def _add(self, path: Path, corpus: bool) -> None:
        try:
            real = Path(os.path.realpath(path))
            st = os.stat(real)
        except (OSError, ValueError):
            return
        if stat.S_ISDIR(st.st_mode):
            (self.corpora if corpus else self.folders).append(real)
        elif stat.S_ISREG(st.st_mode):
            self.files.append(real)

    def identities(self) -> dict[tuple[int, int], Path]:
        """(device, inode) -> path of every input file, folders walked: only asked for when an
        existing output has other names (hard links), so a large corpus is walked rarely."""
        found: dict[tuple[int, int], Path] = {}
        for path in self.files:
            _identity(path, found)
        for top in self.corpora + self.folders:
            for dirpath, _dirs, names in os.walk(top):
                for name in names:
                    _identity(Path(dirpath) / name, found)
        return found


def _identity(path: Path, found: dict[tuple[int, int], Path]) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        found.setdefault((st.st_dev, st.st_ino), path)


def _spec_path(spec: str) -> str | None:
    """The local path a tokenizer argument `[LABEL=]SPEC[#PATTERN]` names (parsed as the
    loader parses it), or None for one it will refuse (it says why)."""
    # deferred: the tokenizers package (its adapters) loads only for a command that names
    # tokenizers; outputs sits on the corpus's row, below tokenizers/ (docs/ARCHITECTURE.md)
    from fertility.tokenizers.spec import parse_tokenizer_arg, split_pattern_suffix

    try:
        return split_pattern_suffix(parse_tokenizer_arg(spec)[1])[0]
    except FertilityError:
        return None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


# ---------------------------------------------------------------- single-file outputs


def check_file_outputs(
    outputs: Mapping[str, str | os.PathLike | None],
    inputs: Inputs,
    *,
    allow_in_corpus: bool = False,
) -> None:
    """Refuse, before anything is measured, every `-o`-style output that breaks a rule:
    `outputs` maps each option (`-o/--output`, `--junit`, ...) to its path (None or `-`: not
    given, or stdout). Checks: not an input (device and inode, links resolved), not inside an
    input folder, not inside a corpus folder unless `allow_in_corpus`, its folder exists, no
    path named twice, and an existing regular file is one this project wrote."""
    seen: dict[Path, str] = {}
    for option, given in outputs.items():
        if given is None or os.fspath(given) == "-":
            continue
        if not os.fspath(given).strip():
            raise OutputError(f"{option}: empty file name")
        real = _real(Path(given))
        if real in seen:
            raise OutputError(
                f"{given}: named as both {seen[real]} and {option}; give each output its own file"
            )
        seen[real] = option
        _check_against_inputs(Path(given), real, inputs, allow_in_corpus, folder=False)
        try:
            st = os.stat(real)
        except FileNotFoundError:
            if not real.parent.is_dir():
                raise OutputError(
                    f"{given}: the folder {real.parent} does not exist; create it first"
                ) from None
            continue
        except OSError as e:
            raise OutputError(f"{given}: cannot write ({e.strerror or e})") from None
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{given}: is a folder, not a file")
        if stat.S_ISREG(st.st_mode) and not _made_here(real):
            raise OutputError(
                f"{given}: exists and was not written by fertility (no {MANIFEST} beside it "
                "lists it); choose another name, or move the file away first"
            )


def write_file(path: str | os.PathLike, text: str, error: type[FertilityError] = FertilityError):
    """Write a single-file output (already passed `check_file_outputs`): recorded first in the
    manifest of its folder (so a re-run may replace it and a corpus walk skips it), then
    written atomically. A device or FIFO (/dev/null, a pipe) is written in place and not
    recorded."""
    real = _real(Path(path))
    try:
        mode = os.stat(real).st_mode
    except OSError:
        mode = None
    if mode is None or stat.S_ISREG(mode):
        if mode is not None and not _made_here(real):  # appeared since the check
            raise OutputError(f"{path}: exists and was not written by fertility; not replaced")
        record(real.parent, [real.name], error=error)
    write_text_atomic(path, text, error)


def _made_here(real: Path) -> bool:
    return is_listed(real.name, listed_outputs(real.parent))


def _real(path: Path) -> Path:
    """Where a write to `path` lands: links resolved, relative paths made absolute."""
    return Path(os.path.realpath(path))


def _check_against_inputs(
    given: Path, real: Path, inputs: Inputs, allow_in_corpus: bool, folder: bool
) -> None:
    for d in inputs.corpora:
        if folder and _inside(d, real):
            raise OutputError(
                f"{given}: contains the corpus folder {d}; write the output elsewhere"
            )
        if _inside(real, d) and not allow_in_corpus:
            raise OutputError(
                f"{given}: lies inside the corpus folder {d} that this run reads; write it "
                "elsewhere, or pass --allow-output-in-corpus (later runs skip what fertility "
                "wrote there)"
            )
    for d in inputs.folders:
        if _inside(real, d) or (folder and _inside(d, real)):
            where = "is" if real == d else "lies inside" if _inside(real, d) else "contains"
            role = inputs.roles.get(d, "input folder")
            raise OutputError(f"{given}: {where} the {role} {d}; write the output elsewhere")
    for f in inputs.files:
        if real == f or (folder and _inside(f, real)):
            what = "is" if real == f else "contains"
            raise OutputError(
                f"{given}: {what} an input of this run ({f}); write the output elsewhere"
            )
    try:
        st = os.stat(real)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        other = inputs.identities().get((st.st_dev, st.st_ino))
        if other is not None:
            raise OutputError(
                f"{given}: is another name (a hard link) of the input {other}; write the "
                "output elsewhere"
            )


# ---------------------------------------------------------------- output folders


def claim_folder(
    path: str | os.PathLike,
    made_by: str,
    entries: Iterable[str],
    inputs: Inputs,
    *,
    allow_in_corpus: bool = False,
    error: type[FertilityError] | None = None,
) -> Path:
    """Take `path` as the output folder of `fertility <made_by>`, which will write `entries`
    (relative paths; `x/` a subfolder it owns whole): `check_folder`, then the folder is
    created when new and its manifest lists `entries` before anything is written. Returns
    the resolved folder."""
    err = error or OutputError
    real, state = check_folder(
        path, made_by, entries, inputs, allow_in_corpus=allow_in_corpus, error=err
    )
    made = [p for p in (real, *real.parents) if not p.exists()] if state == "new" else []
    if state == "new":
        try:
            real.mkdir(parents=True)
        except OSError as e:
            raise err(f"{path}: cannot create the output folder ({e.strerror or e})") from None
    if state != "ours":  # this claim writes the manifest: a failed command may take it back
        _CLAIMS.append((real, made))
    _check_writable(real, path, entries, err)
    record(real, list(entries), made_by=made_by, error=err)
    return real


# This process's claims that wrote a folder's first manifest: (folder, the folders
# claim_folder created for it, innermost first). A folder that held a manifest before (an
# earlier run's) is not listed: its manifest is not this command's to take back.
_CLAIMS: list[tuple[Path, list[Path]]] = []


def forget_claims() -> None:
    """Keep every folder claimed so far as it is (a command that ended as it should)."""
    _CLAIMS.clear()


def release_unused_claims() -> None:
    """Undo this process's claims on folders that still hold nothing but the manifest the
    claim wrote (a command that failed or was stopped before writing anything, e.g. on a
    corpus it could not read): the manifest goes, and so do the folders the claim created; a
    folder the user had made stays, empty as it was. Anything else in a folder keeps it and
    its manifest, and so does a manifest an earlier run had written."""
    while _CLAIMS:
        folder, made = _CLAIMS.pop()
        try:
            if os.listdir(folder) != [MANIFEST]:
                continue
            os.unlink(folder / MANIFEST)
            for p in made:  # innermost first; stops at the first that is not empty
                os.rmdir(p)
        except OSError:
            continue


def _check_writable(real: Path, given, entries: Iterable[str], err) -> None:
    """A file can be made in the folder and in each subfolder of `entries` it holds already,
    tried by making one (permissions, ACLs, a read-only mount or an immutable folder: no
    `os.access` knows them all). Before: a rerun into a read-only folder failed after the
    whole training pass, as `unexpected Exception: Permission denied (os error 13)`."""
    subs = [_clean(e).rstrip("/") for e in entries if e.endswith("/")]
    for rel in ["", *(s for s in subs if s and (real / s).is_dir())]:
        probe = (real / rel if rel else real) / f".write-check{PARTIAL}{os.getpid()}"
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.unlink(probe)
        except OSError as e:
            shown = Path(given) / rel if rel else given
            raise err(
                f"{shown}: cannot write into this output folder ({e.strerror or e}); make it "
                "writable or choose another folder"
            ) from None


def check_folder(
    path: str | os.PathLike,
    made_by: str,
    entries: Iterable[str],
    inputs: Inputs,
    *,
    allow_in_corpus: bool = False,
    error: type[FertilityError] | None = None,
) -> tuple[Path, str]:
    """Whether `fertility <made_by>` may write `entries` into the folder `path`; nothing is
    written. Returns the resolved folder and its state: "new" (absent), "empty", or "ours"
    (its manifest says `made_by` made it: only listed files are replaced, anything else in it
    is the user's and is kept). Refused (one line, `error` or OutputError): a file; a folder
    that is not empty and was not made by `fertility <made_by>`; one of `entries` that exists
    and the manifest does not list; one of `entries` that is a symbolic link (`inside`: even
    a listed name; fertility wrote no link there); a folder that is, holds or lies inside an
    input."""
    err = error or OutputError
    given = Path(path)
    real = _real(given)
    try:
        _check_against_inputs(given, real, inputs, allow_in_corpus, folder=True)
    except OutputError as e:
        raise err(str(e)) from None
    if not real.exists():
        return real, "new"
    if not real.is_dir():
        raise err(f"{given}: exists and is not a folder")
    try:
        names = [n for n in os.listdir(real) if PARTIAL not in n]
    except OSError as e:
        raise err(f"{given}: cannot read the folder ({e.strerror or e})") from None
    if not names:
        return real, "empty"
    data = read_manifest(real)
    if data is None or data.get("made_by") != made_by:
        shown = ", ".join(sorted(names)[:3]) + (" ..." if len(names) > 3 else "")
        raise err(
            f"{given}: is not empty ({shown}) and was not made by `fertility {made_by}`; "
            "nothing there is replaced or deleted: choose a new or empty folder"
        )
    listed = listed_outputs(real)
    for entry in entries:
        rel = _clean(entry).rstrip("/")
        if not rel:
            continue
        inside(real, rel, err)  # a link where the verb writes: refused before any write
        if entry.endswith("/") and (link := _link_within(real / rel)) is not None:
            raise _link_refused(link, err)  # a subfolder's files are written by libraries too
        if (real / rel).exists() and not is_listed(rel, listed):
            raise err(
                f"{given / rel}: exists and was not written by fertility; move it away or "
                "choose another folder"
            )
    return real, "ours"


def record(
    folder: Path,
    entries: list[str],
    *,
    made_by: str | None = None,
    error: type[FertilityError] | None = None,
) -> None:
    """Add `entries` to the manifest of `folder` (created when missing), before the files
    themselves are written: a run killed midway still leaves them listed as its own."""
    data = read_manifest(folder) or {"schema": MANIFEST_SCHEMA, "made_by": None, "entries": []}
    have = [e for e in data["entries"] if _clean(e)]
    new = [e for e in (_clean(x) for x in entries) if e and e not in have]
    if not new and (made_by is None or data.get("made_by") == made_by):
        return
    data["entries"] = have + new
    if made_by is not None:
        data["made_by"] = made_by
    text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    write_inside(folder, MANIFEST, text, error)


def remove(folder: Path, rel: str, error: type[FertilityError] | None = None) -> None:
    """Delete `folder/rel` (a file, or a subfolder whole) only when its manifest lists it:
    what this project did not write is never deleted, whatever the caller believes. A
    symbolic link on the way (`inside`) is refused, never followed nor deleted."""
    if not is_listed(rel, listed_outputs(folder)):
        return
    target = inside(folder, rel, error)
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(target)  # removes links inside as links (never follows them)
    else:
        target.unlink(missing_ok=True)


# ---------------------------------------------------------------- inside an output folder
#
# Inside a folder fertility writes, nothing is ever followed (issue #35). fertility makes no
# symbolic links, so one found there was put by someone else, and following it wrote and
# deleted in the user's own folder (`OUT/heldout -> ../mine` lost `mine/*.jsonl`). The folder
# itself is resolved as the user named it (`--out LINK`); below it, every write, replace and
# delete goes through `inside`, which refuses a link at any part of the path: one line
# naming the link, exit 2; the link and what it points to are left as they are.

# O_NOFOLLOW where the platform has it (not Windows: there `inside`'s lstat check stands alone)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _link_refused(link: Path, error: type[FertilityError] | None = None) -> FertilityError:
    try:
        to = os.readlink(link)
    except OSError:
        to = "?"
    return (error or OutputError)(
        f"{link}: is a symbolic link (to {to}) inside fertility's output folder, where "
        "fertility writes its own; a link there is never followed, replaced or deleted: "
        "remove the link (what it points to stays) or choose another folder"
    )


def _link_within(folder: Path) -> Path | None:
    """The first symbolic link anywhere below `folder` (a subfolder the verb owns whole:
    datatrove writes `logs/`, not this module), or None; links not followed."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None  # absent, or not a folder: the write itself says so
    for entry in entries:
        if entry.is_symlink():
            return Path(entry.path)
        if entry.is_dir(follow_symlinks=False) and (link := _link_within(Path(entry.path))):
            return link
    return None


def inside(folder: Path, rel: str, error: type[FertilityError] | None = None) -> Path:
    """`folder/rel` for a write, replace or delete, refused (`error`, OutputError by default)
    when any part of it below `folder` is a symbolic link (checked with lstat, part by part:
    `heldout` in `heldout/en.jsonl`, then `en.jsonl`). Parts that do not exist yet are
    fine: they are made by `make_inside` or the write."""
    path = Path(folder)
    for part in PurePosixPath(_clean(rel)).parts:
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            break
        except OSError:
            break  # not a folder on the way, or unreadable: the write itself says so
        if stat.S_ISLNK(mode):
            raise _link_refused(path, error)
    return Path(folder) / rel


def make_inside(folder: Path, rel: str, error: type[FertilityError] | None = None) -> Path:
    """The subfolder `folder/rel`, made part by part where missing (`mkdir -p` that never
    goes through a link: each part is checked after it exists)."""
    path = Path(folder)
    for part in PurePosixPath(_clean(rel)).parts:
        path = path / part
        try:
            path.mkdir()
        except FileExistsError:
            pass
        except OSError as e:
            raise (error or OutputError)(
                f"{path}: cannot create the folder ({e.strerror or e})"
            ) from None
        inside(folder, os.path.relpath(path, folder), error)
    return path


def write_inside(
    folder: Path, rel: str, text: str | bytes, error: type[FertilityError] | None = None
) -> Path:
    """Write the file `folder/rel` whole (files.write_text_atomic: a temporary name, then a
    rename) after `inside` found no link on the way: the rename replaces the entry itself."""
    path = inside(folder, rel, error)
    write_text_atomic(path, text, error or OutputError)
    return path


def open_inside(
    folder: Path,
    rel: str,
    binary: bool = False,
    error: type[FertilityError] | None = None,
    append: bool = False,
) -> IO:
    """`folder/rel` opened for writing (created, and truncated or with `append` added to) as a
    stream, refused through a link (`inside`, then O_NOFOLLOW on the file itself: a link
    planted meanwhile fails)."""
    path = inside(folder, rel, error)
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if append else os.O_TRUNC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if os.path.islink(path):
            raise _link_refused(path, error) from None
        raise (error or OutputError)(f"{path}: cannot write ({e.strerror or e})") from None
    return open(fd, "wb") if binary else open(fd, "w", encoding="utf-8")


def replace_inside(
    src: Path, folder: Path, rel: str, error: type[FertilityError] | None = None
) -> Path:
    """Rename `src` (a finished temporary file or folder) onto `folder/rel` after `inside`
    found no link on the way."""
    path = inside(folder, rel, error)
    os.replace(src, path)
    return path
