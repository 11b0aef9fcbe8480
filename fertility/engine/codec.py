"""A task's measured state on disk without pickle: numpy arrays in one .npz (loaded with
allow_pickle=False) and everything else in one JSON file that refers to them.

pickle would run code from a file; these files sit in a shared work folder other jobs and
users can write, so a merge reads only data: JSON values, arrays of plain dtypes, and the
counter classes named in CLASSES rebuilt from their attributes.
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from fertility.corpus.remote import is_url
from fertility.errors import FertilityError
from fertility.measure.counters import Bootstrap, GroupCounts
from fertility.measure.frame import ROW_NUMBERS, ROW_STRINGS, joined_rows
from fertility.outputs import make_inside, write_inside

# the objects a TokenizerAccumulator's export holds besides plain data (rebuilt attribute by
# attribute, their __init__ not called)
CLASSES = {"GroupCounts": GroupCounts, "Bootstrap": Bootstrap}
_PLAIN = {str, int, float, bool, type(None)}


def _encode(obj: Any, arrays: list[np.ndarray]) -> Any:
    """obj -> JSON value; arrays (and numpy scalars, as 0-d arrays) go to `arrays`."""
    if isinstance(obj, (np.ndarray, np.generic)):
        if np.asarray(obj).dtype.hasobject:  # np.savez would pickle it
            raise TypeError("cannot store an object array in a task's counts")
        arrays.append(np.asarray(obj))
        return {"nd": len(arrays) - 1, "scalar": isinstance(obj, np.generic)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, Counter):  # before dict: keys may be any value, order kept
        return {"counter": [[_encode(k, arrays), v] for k, v in obj.items()]}
    if isinstance(obj, dict):  # keys may be ints (language and script ids) or tuples
        return {"dict": [[_encode(k, arrays), _encode(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"tuple": [_encode(x, arrays) for x in obj]}
    if isinstance(obj, list):
        # a list of plain values (a batch's sources, lines, language ids: one per document)
        # is stored as it is, without a call per element; strings that repeat (a file's
        # path and a language per document: 11 of a 25 MB corpus's 12.7 MB of JSON) as
        # each distinct one once and a number per element
        types = set(map(type, obj))
        if types == {str} and len(distinct := dict.fromkeys(obj)) <= len(obj) // 2:
            number = {s: i for i, s in enumerate(distinct)}
            codes = np.fromiter(map(number.__getitem__, obj), np.int32, len(obj))
            return {"strings": list(distinct), "codes": _encode(codes, arrays)}
        if types <= _PLAIN:
            return {"plain": obj}
        return [_encode(x, arrays) for x in obj]
    name = type(obj).__name__
    if CLASSES.get(name) is type(obj):
        return {"object": name, "attrs": _encode(vars(obj), arrays)}
    raise TypeError(f"cannot store a {name} in a task's counts")


def _decode(value: Any, arrays) -> Any:
    if isinstance(value, list):
        return [_decode(x, arrays) for x in value]
    if not isinstance(value, dict):
        return value
    if "plain" in value:
        return value["plain"]
    if "strings" in value:
        return _strings(value["strings"], _decode(value["codes"], arrays))
    if "nd" in value:
        a = arrays[f"a{value['nd']}"]
        return a[()] if value["scalar"] else a
    if "counter" in value:
        return Counter({_decode(k, arrays): v for k, v in value["counter"]})
    if "dict" in value:
        return {_hashable(_decode(k, arrays)): _decode(v, arrays) for k, v in value["dict"]}
    if "tuple" in value:
        return tuple(_decode(x, arrays) for x in value["tuple"])
    cls = CLASSES[value["object"]]
    obj = cls.__new__(cls)
    vars(obj).update(_decode(value["attrs"], arrays))
    return obj


def _strings(strings: Any, codes: Any) -> list[str]:
    """The list `_encode` stored as its distinct strings and a number per element; a number
    that names none of them (the file was edited or cut) is refused, not wrapped around."""
    if not isinstance(strings, list) or not set(map(type, strings)) <= {str}:
        raise ValueError("a list of strings holds other values")
    if not isinstance(codes, np.ndarray) or codes.ndim != 1 or codes.dtype.kind not in "iu":
        raise ValueError("a list of strings is numbered by other than one array of integers")
    if codes.size and not 0 <= codes.min() <= codes.max() < len(strings):
        raise ValueError(f"a list of {len(strings)} strings is numbered outside them")
    return list(map(strings.__getitem__, codes.tolist()))


def _hashable(key: Any) -> Any:
    return key.item() if isinstance(key, np.generic) else key


def save(output: Any, name: str, state: dict) -> None:
    """Write `state` as NAME.npz and NAME.json in `output` (a local folder, a URL or a
    datatrove DataFolder: _Folder). The JSON goes last, so a task that died between the two
    leaves no JSON and its part is not read."""
    arrays: list[np.ndarray] = []
    doc = _encode(state, arrays)
    buf = io.BytesIO()
    named: dict[str, Any] = {f"a{i}": a for i, a in enumerate(arrays)}
    np.savez(buf, **named)
    folder = _Folder(output)
    folder.write(f"{name}.npz", buf.getvalue())
    folder.write(f"{name}.json", json.dumps(doc, allow_nan=True))


def load(output: Any, name: str, keys: Collection[str] | None = None, where: str = "") -> dict:
    """Read what `save` wrote as NAME in `output`; with `keys`, only those entries of the
    saved dict (the index reads the corpus summary alone). `where`: the files' name in an
    error, default NAME."""
    folder = _Folder(output)
    try:
        doc = json.loads(folder.read(f"{name}.json").decode("utf-8"))
        if keys is not None:
            doc = {"dict": [kv for kv in doc["dict"] if kv[0] in keys]}
        data = folder.read(f"{name}.npz")
        # read lazily: only the arrays the entries refer to are decompressed
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return _decode(doc, arrays)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FertilityError(f"{where or name}: unreadable task counts ({exc})") from None


def saved(output: Any, subfolder: str) -> list[str]:
    """The names `save` wrote in `output`'s `subfolder` (SUBFOLDER/NAME, sorted), each with
    its JSON, the part written last."""
    return _Folder(output).saved(subfolder)


class _Folder:
    """Where a task's counts are written and read. A local path through the os, each file
    written whole under a temporary name and never through a link (fertility.outputs):
    importing datatrove.io costs a third of a second (its Hub client), 5% of a 25 MB
    `tokenize` run in one task, which needs nothing else of it. A URL or a DataFolder
    through datatrove's data folders (fsspec: local disks and remote stores alike)."""

    def __init__(self, output: Any) -> None:
        self.local = isinstance(output, (str, os.PathLike)) and not is_url(os.fspath(output))
        if self.local:
            self.root = Path(output)
        else:
            from datatrove.io import get_datafolder

            self.fs = get_datafolder(output)

    def write(self, rel: str, data: str | bytes) -> None:
        if not self.local:
            with self.fs.open(rel, "wb" if isinstance(data, bytes) else "w") as fh:
                fh.write(data)
            return
        self.root.mkdir(parents=True, exist_ok=True)  # as datatrove's folders make it
        make_inside(self.root, os.path.dirname(rel))
        write_inside(self.root, rel, data)

    def read(self, rel: str) -> bytes:
        if not self.local:
            with self.fs.open(rel, "rb") as fh:
                return fh.read()
        return (self.root / rel).read_bytes()

    def saved(self, subfolder: str) -> list[str]:
        if not self.local:
            found = self.fs.list_files(subfolder)
        else:
            here = self.root / subfolder
            names = os.listdir(here) if here.is_dir() else []
            found = [f"{subfolder}/{n}" for n in names if not n.startswith(".")]
        return sorted(f[: -len(".json")] for f in found if f.endswith(".json"))


def pack_rows(rows: list[dict]) -> dict | None:
    """A pass's per-document rows (PassState.doc_rows: one dict per batch) as one dict of
    columns (fertility.measure.frame.joined_rows) with each row's order and size, what a task
    saves: a few arrays where there were four per batch and one per tokenizer, beside three
    lists in its JSON (49 batches of a 25 MB corpus: 245 arrays and 11 MB of repeated
    strings). None when there are no rows."""
    if not rows:
        return None
    return {
        "order": [r["order"] for r in rows],
        "sizes": np.array([len(r["lang"]) for r in rows], np.int64),
        **joined_rows(rows),
    }


def unpack_rows(packed: dict | None, name: str) -> list[dict]:
    """The rows pack_rows packed, each as it was (its lists and arrays sliced back out);
    sizes that do not add up to every column's length are refused (name: the file's)."""
    if packed is None:
        return []
    try:
        sizes = packed["sizes"]
        columns = [packed[k] for k in (*ROW_STRINGS, *ROW_NUMBERS)]
        columns += list(packed["tokens"].values())
        ok = isinstance(sizes, np.ndarray) and sizes.ndim == 1
        ok = ok and len(sizes) == len(packed["order"]) and not (sizes < 0).any()
        ok = ok and all(len(c) == sizes.sum() for c in columns)
    except (KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise FertilityError(f"{name}: unreadable task counts (its documents' rows do not add up)")
    ends = np.cumsum(sizes).tolist()
    return [
        {
            "order": order,
            **{k: packed[k][start:end] for k in (*ROW_STRINGS, *ROW_NUMBERS)},
            "tokens": {label: t[start:end] for label, t in packed["tokens"].items()},
        }
        for order, start, end in zip(packed["order"], [0, *ends], ends)
    ]
