"""A task's counts on disk (fertility.engine.codec): what is saved is read back as it was,
the per-document rows as a few columns, and a file edited into nonsense is refused with its
name, never read as other numbers."""

import json
from pathlib import Path

import numpy as np
import pytest

from fertility.engine import codec
from fertility.errors import FertilityError


class Folder:
    """What codec.save and codec.load need of a datatrove DataFolder: open() under a root."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def open(self, name: str, mode: str):
        (self.root / name).parent.mkdir(parents=True, exist_ok=True)
        return open(self.root / name, mode)


def rows() -> list[dict]:
    """Two batches' rows as fertility.measure.batch makes them (lists and arrays)."""
    return [
        {
            "order": 3,
            "lang": ["hi", "hi", "en"],
            "source": ["/data/hi.txt", "/data/hi.txt", "/data/mixed.txt"],
            "line": [1, 2, 7],
            "script": np.array([20, 20, 5]),
            "chars": np.array([10, 12, 30]),
            "graphemes": np.array([8, 9, 30]),
            "bytes": np.array([30, 36, 30]),
            "tokens": {"a": np.array([5, 6, 8]), "b": np.array([4, 4, 9])},
        },
        {
            "order": 5,
            "lang": ["en"],
            "source": ["/data/mixed.txt"],
            "line": [9],
            "script": np.array([5]),
            "chars": np.array([4]),
            "graphemes": np.array([4]),
            "bytes": np.array([4]),
            "tokens": {"a": np.array([1]), "b": np.array([2])},
        },
    ]


def assert_rows_equal(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.keys() == w.keys() and g["order"] == w["order"]
        assert list(g["lang"]) == w["lang"] and list(g["source"]) == w["source"]
        for k in ("line", "script", "chars", "graphemes", "bytes"):
            assert np.array_equal(g[k], w[k]), k
        assert all(np.array_equal(g["tokens"][t], w["tokens"][t]) for t in w["tokens"])


def test_repeated_strings_are_stored_once_and_read_back(tmp_path):
    path = "/a/corpus/file-with-a-long-name.txt"
    state = {
        "source": [path] * 500 + ["/a/other.txt"] * 500,
        "names": ["x", "y", "z"],  # no repeats: stored as it is
        "mixed": [1, "a", None],
        "nested": {"k": (1, 2.5, ["u", "u", "u"])},
    }
    codec.save(Folder(tmp_path), "counts/00000", state)
    assert codec.load(Folder(tmp_path).open, "counts/00000") == state
    text = (tmp_path / "counts/00000.json").read_text()
    assert text.count(path) == 1 and len(text) < 1000


def test_a_string_numbered_outside_the_strings_is_refused(tmp_path):
    codec.save(Folder(tmp_path), "counts/00000", {"lang": ["en"] * 10 + ["hi"] * 10})
    npz = tmp_path / "counts/00000.npz"
    doc = json.loads((tmp_path / "counts/00000.json").read_text())
    ref = doc["dict"][0][1]["codes"]["nd"]  # the codes' array
    for bad in (2, -1):  # past the two strings; before them (Python would wrap it around)
        with np.load(npz) as z:
            arrays = dict(z)
        arrays[f"a{ref}"][3] = bad
        np.savez(npz, **arrays)
        with pytest.raises(FertilityError, match=r"^/w/counts/00000: unreadable task counts"):
            codec.load(Folder(tmp_path).open, "counts/00000", where="/w/counts/00000")


def test_packed_rows_unpack_to_the_rows(tmp_path):
    codec.save(Folder(tmp_path), "counts/00000", {"doc_rows": codec.pack_rows(rows())})
    back = codec.load(Folder(tmp_path).open, "counts/00000")["doc_rows"]
    assert_rows_equal(codec.unpack_rows(back, "w"), rows())
    assert codec.pack_rows([]) is None and codec.unpack_rows(None, "w") == []


def test_rows_that_do_not_add_up_are_refused():
    packed = codec.pack_rows(rows())
    packed["sizes"] = np.array([3, 2])  # one document more than the columns hold
    with pytest.raises(FertilityError, match=r"^/w/counts/00001: unreadable task counts"):
        codec.unpack_rows(packed, "/w/counts/00001")
    packed["sizes"] = np.array([5, -1])  # adds up, but a batch of -1 documents
    with pytest.raises(FertilityError, match="rows do not add up"):
        codec.unpack_rows(packed, "/w/counts/00001")
    del packed["source"]
    with pytest.raises(FertilityError, match="rows do not add up"):
        codec.unpack_rows(packed, "/w/counts/00001")
