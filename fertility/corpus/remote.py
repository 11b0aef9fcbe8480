"""Corpus paths that are URLs: `hf://`, `s3://`, `gs://`, `http(s)://`, `memory://` and any
other fsspec protocol, read in place through one code path (fsspec).

A URL names a file or a folder, as a local path does: a folder is listed with the
filesystem's own `find` (for http(s), a URL ending in `/`: the links of its index page), in
sorted order, and each file's language comes from its name or the nearest folder whose name is
a language code (`.../data/ben_Beng/train/000.parquet` -> `ben_Beng`), by the walk's own rules
(fertility/corpus/walk.py). Files are opened with ranged reads (`open_binary`, blocks of
BLOCK_BYTES): a parquet file is read through its footer and then by row groups, so
`--precision` reads only the row groups of the blocks it draws, and a text file is streamed.
Nothing is downloaded whole first.

Credentials are the user's own: fsspec and each protocol's library read their usual
configuration (~/.aws, gcloud's, `huggingface-cli login`, fsspec's config files); fertility
takes no key and logs none.

Never a hang: offline (HF_HUB_OFFLINE=1 for hf://) no request is made, and a host that does
not answer one HEAD request within ANSWER_S is not waited for; either is one line naming the
URL (CorpusError: exit 2). A protocol whose library is not installed is one line naming it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

from fertility.errors import CorpusError, one_line
from fertility.hub import HUB_ANSWER_S, hub_offline, hub_unreachable, within

HF = "hf"  # the Hugging Face hub's protocol (HfFileSystem): its own checks and messages
ANSWER_S = HUB_ANSWER_S  # seconds a host has to answer the first request
BLOCK_BYTES = 1 << 18  # one ranged read: a parquet footer or a column chunk's share of it
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")  # two letters at least: not `C:\`
# where each protocol's service answers, probed before the first request
_ENDPOINTS = {
    "s3": lambda: (
        os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
        or "https://s3.amazonaws.com"
    ),
    "gs": lambda: os.environ.get("STORAGE_EMULATOR_HOST") or "https://storage.googleapis.com",
    "gcs": lambda: os.environ.get("STORAGE_EMULATOR_HOST") or "https://storage.googleapis.com",
}


def is_url(path: str) -> bool:
    """`path` names a protocol (`s3://`, `hf://`, `file://`, ...): not a bare local path."""
    return _URL.match(path) is not None


def is_remote(path: str) -> bool:
    """A URL of a protocol other than `file://` (which is a local path)."""
    m = _URL.match(path)
    return m is not None and m.group(1).lower() != "file"


def files(url: str) -> Iterator[tuple[str, str, list[str], int]]:
    """(file URL, path relative to `url`, folder names nearest first, size) for each file
    `url` names, in sorted order (hidden ones too: the walk skips them, saying so)."""
    fs, root = _filesystem(url)
    folder = _is_folder(fs, root, url)
    if not folder:
        info = _ask(url, lambda: fs.info(root))
        parent = root.rstrip("/").rsplit("/", 2)
        yield url, root.rsplit("/", 1)[-1], [parent[-2] if len(parent) > 1 else ""], _size(info)
        return
    base = root.rstrip("/")
    found: dict[str, Any] = _ask(url, lambda: fs.find(base, detail=True))
    top = base.rsplit("/", 1)[-1]
    for path in sorted(found):
        rel = path[len(base) :].lstrip("/")
        parts = rel.split("/")
        if not rel:
            continue
        info = found[path]
        if info.get("size") is None:  # an http index page gives names only: ask each file
            info = _ask(url, lambda: fs.info(path))
        yield fs.unstrip_protocol(path), rel, [*reversed(parts[:-1]), top], _size(info)


def open_file(path: str) -> BinaryIO:
    """A corpus file for reading: a URL through open_binary, a local path with open()."""
    return open_binary(path) if is_remote(path) else open(path, "rb")


def open_binary(url: str) -> BinaryIO:
    """The file at `url`, opened for ranged reads (seekable: pyarrow reads parquet by its
    footer and row groups through it)."""
    fs, path = _filesystem(url, probe=False)
    try:
        return fs.open(path, "rb", block_size=BLOCK_BYTES, cache_type="none")
    except Exception as e:  # the protocol's own errors (HTTP, auth, not found) alike
        raise CorpusError(f"{url}: cannot open ({one_line(e)})") from None


def _filesystem(url: str, probe: bool = True) -> tuple[Any, str]:
    """The fsspec filesystem of `url` and the path in it; `probe`: first make sure the host
    answers (or say why not)."""
    try:
        import fsspec  # deferred: only for URLs, and optional
    except ImportError:
        raise CorpusError(
            f"{url}: a URL needs the fsspec package: pip install 'fertility[remote]'"
        ) from None
    protocol = _URL.match(url).group(1).lower()  # type: ignore[union-attr]  # is_remote
    if protocol == HF:
        _check_hf(url)
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError as e:  # fsspec knows the protocol; its library is not installed
        raise CorpusError(f"{url}: {one_line(e)}") from None
    except ValueError as e:  # a protocol fsspec does not know
        raise CorpusError(f"{url}: {one_line(e)}") from None
    endpoint = _endpoint(protocol, url) if probe else None
    why = endpoint and hub_unreachable(endpoint, ANSWER_S)
    if why:  # hub_unreachable speaks of the hub: any other host by its address
        host = endpoint.rstrip("/")  # type: ignore[union-attr]  # set when why is
        raise CorpusError(
            f"{url}: {why if protocol == HF else why.replace('the Hugging Face hub', host)}"
        )
    return fs, path


def _check_hf(url: str) -> None:
    parts = url[len("hf://") :].split("/")
    if len(parts) < 3 or parts[0] != "datasets" or not parts[1] or not parts[2]:
        raise CorpusError(f"{url}: not a Hugging Face dataset path (hf://datasets/ORG/NAME/PATH)")
    try:
        from huggingface_hub import constants  # noqa: F401  # deferred: hf://'s library
    except ImportError:
        raise CorpusError(
            f"{url}: needs the huggingface_hub package (pip install huggingface_hub)"
        ) from None
    if hub_offline():
        raise CorpusError(f"{url}: offline (HF_HUB_OFFLINE=1): a hf:// path needs the hub")


def _endpoint(protocol: str, url: str) -> str | None:
    if protocol in ("http", "https"):
        m = re.match(r"https?://[^/?#]+", url)
        return m.group(0) if m else None
    if protocol == HF:
        from huggingface_hub import constants  # deferred: the hf:// protocol's library

        return constants.ENDPOINT
    endpoint = _ENDPOINTS.get(protocol)
    return endpoint() if endpoint else None


def _is_folder(fs: Any, path: str, url: str) -> bool:
    if "http" in fs.protocol:  # ("http", "https")
        return url.endswith("/")  # asking an http server would fetch the file to find links
    return bool(_ask(url, lambda: fs.isdir(path)))


LIST_S = 300.0  # a listing or an info past the first answer: a large bucket lists slowly


def _ask(url: str, fn: Any) -> Any:
    """fn() (a listing, an info), its errors one line naming `url`; no answer within LIST_S
    (the host answered the probe, so this is a stall, not a dead host) is one line too."""
    try:
        finished, result = within(LIST_S, fn)
    except FileNotFoundError:
        raise CorpusError(f"{url}: no such file or directory") from None
    except Exception as e:  # the protocol's own errors (HTTP, auth) alike
        raise CorpusError(f"{url}: {one_line(e)}") from None
    if not finished:
        raise CorpusError(f"{url}: no answer within {LIST_S:g} s")
    return result


def _size(info: dict) -> int:
    size = info.get("size")
    return int(size) if size is not None else 0
