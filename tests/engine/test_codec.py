"""A task's counts on disk (fertility.engine.codec): what is saved is read back as it was,
the per-document rows as a few columns, and a file edited into nonsense is refused with its
name, never read as other numbers."""

import json

import numpy as np
import pytest

from fertility.engine import codec
from fertility.errors import FertilityError


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
    codec.save(tmp_path, "counts/00000", state)
    assert codec.load(tmp_path, "counts/00000") == state
    text = (tmp_path / "counts/00000.json").read_text()
    assert text.count(path) == 1 and len(text) < 1000


def test_a_string_numbered_outside_the_strings_is_refused(tmp_path):
    codec.save(tmp_path, "counts/00000", {"lang": ["en"] * 10 + ["hi"] * 10})
    npz = tmp_path / "counts/00000.npz"
    doc = json.loads((tmp_path / "counts/00000.json").read_text())
    ref = doc["dict"][0][1]["codes"]["nd"]  # the codes' array
    for bad in (2, -1):  # past the two strings; before them (Python would wrap it around)
        with np.load(npz) as z:
            arrays = dict(z)
        arrays[f"a{ref}"][3] = bad
        np.savez(npz, **arrays)
        with pytest.raises(FertilityError, match=r"^/w/counts/00000: unreadable task counts"):
            codec.load(tmp_path, "counts/00000", where="/w/counts/00000")


def test_packed_rows_unpack_to_the_rows(tmp_path):
    codec.save(tmp_path, "counts/00000", {"doc_rows": codec.pack_rows(rows())})
    back = codec.load(tmp_path, "counts/00000")["doc_rows"]
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


def test_a_local_folder_and_datatroves_data_folder_hold_the_same_files(tmp_path):
    """A local path is written through the os (no datatrove.io import), anything else through
    datatrove's DataFolder: either reads what the other wrote, and `saved` lists a name only
    once its JSON (written last) is there."""
    get_datafolder = pytest.importorskip("datatrove.io").get_datafolder  # (the engine's extra)

    state = {"lang": ["en"] * 3, "n": np.arange(5), "k": {"x": 1.5}}
    codec.save(tmp_path / "a", "counts/00000", state)
    codec.save(get_datafolder(str(tmp_path / "b")), "counts/00000", state)
    for name in ("counts/00000.json", "counts/00000.npz"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    for a, b in (("a", "b"), ("b", "a")):
        got = codec.load(get_datafolder(str(tmp_path / a)), "counts/00000")
        assert got.keys() == state.keys() and np.array_equal(got["n"], state["n"])
        assert codec.load(tmp_path / b, "counts/00000")["lang"] == state["lang"]
    (tmp_path / "a" / "counts" / "00001.npz").write_bytes(b"a task that died before its JSON")
    (tmp_path / "a" / "counts" / ".00001.json.fertility-partial-7").write_text("{")
    assert codec.saved(tmp_path / "a", "counts") == ["counts/00000"]
    assert codec.saved(get_datafolder(str(tmp_path / "b")), "counts") == ["counts/00000"]
    assert codec.saved(tmp_path / "none", "counts") == []
    # a URL, `file://` included, is datatrove's (as a local path, "file:" would be a folder)
    assert codec.load(f"file://{tmp_path / 'a'}", "counts/00000")["lang"] == state["lang"]
    assert codec.saved(f"file://{tmp_path / 'a'}", "counts") == ["counts/00000"]


def test_counts_are_never_written_through_a_link(tmp_path):
    """A `counts` link inside a local output folder is refused (exit 2's OutputError, naming
    it) and what it points to is untouched (before: datatrove's open followed it)."""
    from fertility.errors import OutputError

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "00000.json").write_text("the user's")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "counts").symlink_to(mine)
    with pytest.raises(OutputError, match="counts: is a symbolic link"):
        codec.save(tmp_path / "out", "counts/00000", {"a": 1})
    assert [p.name for p in mine.iterdir()] == ["00000.json"]
    assert (mine / "00000.json").read_text() == "the user's"
