"""fertility.corpus's walk (issue #20): manifests of this project's outputs, link loops, one
read per file and per folder, folder names as language codes, the lang_field warning, control
garbage as binary, and names made visible. Fixtures are written here into tmp_path."""

from __future__ import annotations

import codecs
import gzip
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fertility.corpus import Corpus
from fertility.corpus import walk as walk_module
from fertility.corpus.walk import folder_lang, shown
from fertility.errors import CorpusError, visible
from fertility.report.table import grid

MANIFEST = ".fertility-manifest.json"
WRITTEN = f"written by fertility (listed in {MANIFEST})"


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def manifest(folder: Path, entries: list[str], made_by: str = "fix") -> None:
    data = {"schema": "fertility.manifest/1", "made_by": made_by, "entries": entries}
    write(folder / MANIFEST, json.dumps(data))


def read(*paths, **options):
    warnings: list[str] = []
    corpus = Corpus([str(p) for p in paths], on_warning=warnings.append, **options)
    docs = list(corpus.documents())
    return docs, corpus.summary(), warnings


def skipped(summary, root) -> dict[str, str]:
    return {os.path.relpath(s["path"], root): s["reason"] for s in summary["skipped_files"]}


# -- manifests ------------------------------------------------------------------------------


def test_manifest_entries_files_folders_and_nested_paths(tmp_path):
    write(tmp_path / "en.txt", "user\n")
    manifest(tmp_path, ["out/", "notes.txt", "deep/er/gen.txt", "../escape.txt", "/abs.txt"])
    write(tmp_path / "out/a.txt", "ours\n")
    write(tmp_path / "notes.txt", "ours\n")
    write(tmp_path / "deep/er/gen.txt", "ours\n")
    write(tmp_path / "deep/er/kept.txt", "user's\n")
    write(tmp_path / "escape.txt", "user's: an entry never reaches outside its folder\n")
    write(tmp_path / "abs.txt", "ours: a leading / is dropped\n")
    docs, summary, warnings = read(tmp_path)
    assert sorted(d.text for d in docs) == sorted(
        ["user", "user's", "user's: an entry never reaches outside its folder"]
    )
    assert skipped(summary, tmp_path) == {
        MANIFEST: WRITTEN,
        "abs.txt": WRITTEN,
        "deep/er/gen.txt": WRITTEN,
        "notes.txt": WRITTEN,
        "out": WRITTEN,
    }
    assert warnings == [
        f"{tmp_path}: skipped 5 file(s) (5 written by fertility); see summary skipped_files"
    ]


def test_a_listed_folder_is_not_even_listed(tmp_path, monkeypatch):
    write(tmp_path / "en.txt", "user\n")
    manifest(tmp_path, ["run/"], "pretrain")
    for i in range(5):
        write(tmp_path / f"run/checkpoints/step-{i}/sample.txt", "x\n")
    listed = []
    scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: listed.append(p) or scandir(p))
    docs, _, _ = read(tmp_path)
    assert [d.text for d in docs] == ["user"] and listed == [str(tmp_path)]


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        json.dumps({"schema": "fertility.manifest/99", "entries": ["x.txt"]}),
        json.dumps({"schema": "fertility.manifest/1", "entries": "x.txt"}),
    ],
)
def test_an_unreadable_or_foreign_manifest_lists_nothing(tmp_path, content):
    write(tmp_path / "x.txt", "read\n")
    write(tmp_path / MANIFEST, content)
    docs, summary, _ = read(tmp_path)
    assert [d.text for d in docs] == ["read"]
    assert skipped(summary, tmp_path) == {MANIFEST: "hidden"}


def test_a_manifest_above_a_named_path_is_not_read(tmp_path):
    manifest(tmp_path, ["heldout/", "report.txt"])
    write(tmp_path / "heldout/en.jsonl", '{"text": "held", "lang": "en"}\n')
    write(tmp_path / "report.txt", "a report\n")
    docs, summary, warnings = read(tmp_path / "heldout", tmp_path / "report.txt")
    assert [d.text for d in docs] == ["held", "a report"]
    assert summary["skipped_files"] == [] and warnings == []


def test_workers_walk_the_same_files(tmp_path):
    # a worker reopens the corpus with the parent's sizes: same files, same skips
    write(tmp_path / "en.txt", "one\n")
    manifest(tmp_path, ["out.txt"])
    write(tmp_path / "out.txt", "ours\n")
    os.link(tmp_path / "en.txt", tmp_path / "hard.txt")
    parent = Corpus([str(tmp_path)], on_warning=lambda m: None)
    docs, summary, _ = read(tmp_path, sizes=parent.sizes())
    assert [d.text for d in docs] == ["one"]
    assert [f.path for f in parent.files] == [str(tmp_path / "en.txt")]
    assert summary["skipped_files"] == parent.summary()["skipped_files"]


# -- links and names ------------------------------------------------------------------------


def test_link_loops_and_dangling_links_are_skipped_with_their_reason(tmp_path):
    write(tmp_path / "c/en.txt", "one\n")
    os.symlink("b.txt", tmp_path / "c/a.txt")
    os.symlink("a.txt", tmp_path / "c/b.txt")
    os.symlink("gone.txt", tmp_path / "c/dangling.txt")
    os.symlink(tmp_path, tmp_path / "c/root")
    docs, summary, warnings = read(tmp_path / "c")
    assert [d.text for d in docs] == ["one"]
    assert skipped(summary, tmp_path / "c") == {
        "a.txt": "symbolic link loop",
        "b.txt": "symbolic link loop",
        "dangling.txt": "broken symbolic link",
        "root": "symbolic link to a folder (not followed)",
    }
    assert len(warnings) == 1 and "2 symbolic link loop, 1 broken symbolic link" in warnings[0]


def test_a_folder_is_walked_once_under_any_name(tmp_path):
    write(tmp_path / "c/bn/a.txt", "one\n")
    os.symlink(tmp_path / "c", tmp_path / "link")
    docs, summary, _ = read(tmp_path / "c", tmp_path / "c/bn", tmp_path / "link")
    assert [d.text for d in docs] == ["one"]
    assert summary["skipped_files"] == [
        {"path": str(tmp_path / "c/bn"), "reason": f"same folder as {tmp_path / 'c/bn'}"},
        {"path": str(tmp_path / "link"), "reason": f"same folder as {tmp_path / 'c'}"},
    ]


def test_hard_links_are_one_file_whatever_their_names(tmp_path):
    write(tmp_path / "a/bn.txt", "one\ntwo\n")
    os.link(tmp_path / "a/bn.txt", tmp_path / "b.txt")
    os.symlink(tmp_path / "b.txt", tmp_path / "z.txt")
    docs, summary, _ = read(tmp_path)
    assert [(d.text, d.lang) for d in docs] == [("one", "bn"), ("two", "bn")]
    first = tmp_path / "a/bn.txt"
    assert skipped(summary, tmp_path) == {
        "b.txt": f"same file as {first}",
        "z.txt": f"same file as {first}",
    }


def test_names_are_shown_on_one_line():
    assert shown("a\nb.txt") == "a\\nb.txt"
    assert shown("caf\udce9\t\u202e.txt") == "caf\\xe9\\t\\u202e.txt"
    assert shown("x\x1b[31m\x85\u2028\u2066\u200f\u061c") == (
        "x\\x1b[31m\\u0085\\u2028\\u2066\\u200f\\u061c"
    )
    # every script, joiners and non-breaking spaces are names, not controls
    for name in ["বাংলা.txt", "العربية.txt", "क्\u200dष.txt", "a\u00a0b.txt", "日本語.txt"]:
        assert shown(name) == name
    assert visible(visible("a\nb\u202e")) == visible("a\nb\u202e")


def test_grid_escapes_every_cell():
    lines = grid(["group", "docs"], [["language:en\u202e", "1"], ["language:a\nb", "2"]])
    assert lines == [
        "group              docs",
        "-----------------  ----",
        "language:en\\u202e     1",
        "language:a\\nb         2",
    ]


def test_a_named_file_with_a_control_in_its_name_is_read_and_shown_escaped(tmp_path):
    path = write(tmp_path / "bad\rname.txt", "one\n")
    docs, summary, _ = read(path)
    assert docs[0].source == f"{tmp_path}/bad\\rname.txt"
    assert summary["files"][0]["path"] == f"{tmp_path}/bad\\rname.txt"


# -- language labels ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, lang",
    [
        ("bn", "bn"),
        ("en", "en"),
        ("sh", "sh"),
        ("ben", "ben"),
        ("eng", "eng"),
        ("cmn", "cmn"),
        ("ger", "ger"),  # ISO 639-2/B
        ("xss", "xss"),  # ISO 639-3: Assan
        ("und", "und"),
        ("ben_Beng", "ben_Beng"),
        ("pt_BR", "pt_BR"),
        ("zh-Hans", "zh-Hans"),
        ("xyz_Latn", "xyz_Latn"),  # with a script the shape is enough
        ("pq", None),
        ("xx", None),
        ("qqq", None),
        ("zzz", None),
        ("dev", None),
        ("raw", None),
        ("EN", None),
        ("data", None),
        ("2023", None),
    ],
)
def test_folder_names_are_languages_only_when_known_codes(name, lang):
    assert folder_lang(name) == lang


def iso_codes() -> tuple[set[str], set[str]] | None:
    """(two-letter, three-letter) codes from Debian's iso-codes, or None without it."""
    folder = Path("/usr/share/iso-codes/json")
    try:
        part3 = json.loads((folder / "iso_639-3.json").read_text("utf-8"))["639-3"]
        part2 = json.loads((folder / "iso_639-2.json").read_text("utf-8"))["639-2"]
    except OSError:
        return None
    two = {c["alpha_2"] for c in part3 if "alpha_2" in c}
    three = {c["alpha_3"] for c in part3} | {
        c["bibliographic"] for c in part2 if "bibliographic" in c
    }
    return two, three


def test_the_shipped_code_list_is_iso_codes():
    codes = iso_codes()
    if codes is None:
        pytest.skip("Debian's iso-codes is not installed")
    two, three = codes
    assert walk_module.LANG_CODES == two | three


def test_lang_field_wins_over_a_folder_and_the_folder_fills_in(tmp_path):
    records = '{"text": "a", "lang": "de"}\n{"text": "b"}\n{"text": "c", "lang": ""}\n'
    write(tmp_path / "bn/part.jsonl", records)
    write(tmp_path / "bn/hi.jsonl", records)  # a file name still wins over the field
    write(tmp_path / "bn/part.txt", "d\n")  # no records: the folder
    docs, summary, warnings = read(tmp_path, lang_field="lang")
    assert [(d.text, d.lang) for d in docs] == [
        ("a", "hi"),
        ("b", "hi"),
        ("c", "hi"),
        ("a", "de"),
        ("b", "bn"),
        ("c", "bn"),
        ("d", "bn"),
    ]
    assert warnings == []  # nothing left und
    assert [f["lang"] for f in summary["files"]] == ["hi", "bn", "bn"]
    # without lang_field the folder labels them all, as before
    docs, _, _ = read(tmp_path / "bn/part.jsonl")
    assert {d.lang for d in docs} == {"bn"}


def test_und_for_want_of_lang_field_is_one_warning_per_file(tmp_path):
    write(tmp_path / "a.jsonl", '{"text": "x", "lang": "en"}\n' + '{"text": "y", "lang": 7}\n' * 3)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"text": ["p", "q"] * 700}), sink)  # no lang column; 2 blocks
    write(tmp_path / "b.parquet", sink.getvalue().to_pybytes())
    write(tmp_path / "c.txt", "one\ntwo\n")
    write(tmp_path / "fr.jsonl", '{"text": "z"}\n')  # named: not und
    _, summary, warnings = read(tmp_path, lang_field="lang")
    assert warnings == [
        f'{tmp_path / "a.jsonl"}: 3 of 4 records have no "lang" field (or an empty or '
        "non-string one); labelled und",
        f'{tmp_path / "b.parquet"}: 1,400 of 1,400 records have no "lang" field (or an empty '
        "or non-string one); labelled und",
        f'{tmp_path / "c.txt"}: a .txt file has no "lang" field; its 2 document(s) are '
        "labelled und (name the file or its folder by language, e.g. bn.txt or bn/)",
    ]
    # the counts are of the documents read: a sample counts what it kept
    _, summary, warnings = read(tmp_path / "b.parquet", lang_field="lang", max_docs=10)
    assert warnings == [
        f'{tmp_path / "b.parquet"}: 10 of 10 records have no "lang" field (or an empty or '
        "non-string one); labelled und"
    ]
    _, _, warnings = read(tmp_path)  # no lang_field asked for: nothing to say
    assert warnings == []


# -- control characters ---------------------------------------------------------------------

GARBAGE = bytes(b for b in range(1, 32) if b not in b"\t\n\r") * 20 + b"\x7f\n"


@pytest.mark.parametrize(
    "name, data, options",
    [
        ("x.txt", GARBAGE, {}),
        ("x.txt.gz", gzip.compress(GARBAGE * 100), {}),
        ("x.txt", GARBAGE, {"whole_files": True}),
        ("x.txt", GARBAGE, {"max_invalid_utf8": 1}),
        ("x.jsonl", GARBAGE, {}),  # binary, not "not valid JSON"
        ("x.txt", b"\xef\xbb\xbf" + GARBAGE, {}),
    ],
)
def test_mostly_control_characters_is_binary(tmp_path, name, data, options):
    write(tmp_path / "en.txt", "text\n")
    write(tmp_path / name, data)
    docs, summary, warnings = read(tmp_path, **options)
    assert [d.text for d in docs] == ["text"]
    (binary,) = summary["binary_files"]
    assert binary["path"] == str(tmp_path / name) and binary["offset"] == 0
    assert binary["why"].endswith("control characters")
    assert any(w.startswith(f"{tmp_path / name}: skipped (binary: ") for w in warnings)


def test_some_control_characters_are_text(tmp_path):
    # half of the head exactly is not "mostly"; a terminal capture, form feeds, a BOM'd file
    half = b"\x01a" * 300 + b"\n"
    colours = b"".join(b"\x1b[1;32mok\x1b[0m step %d done\x0c\n" % i for i in range(500))
    write(tmp_path / "half.txt", half)
    write(tmp_path / "log.txt", colours)
    docs, summary, _ = read(tmp_path)
    assert len(docs) == 501 and summary["binary_files"] == []


def test_utf16_is_still_refused_as_utf16_not_binary(tmp_path):
    # Cyrillic in UTF-16LE: every other byte is 0x04, a control byte
    path = write(tmp_path / "ru.txt", codecs.BOM_UTF16_LE + "Привет мир\n".encode("utf-16-le") * 50)
    with pytest.raises(CorpusError, match="UTF-16LE text"):
        read(path)


def test_a_file_read_after_its_head_is_whole(tmp_path):
    # the head read for the check is given back: nothing lost or repeated at the seam
    lines = [f"line {i} " + "x" * (i % 97) for i in range(3000)]
    path = write(tmp_path / "en.txt.gz", gzip.compress("\n".join(lines).encode()))
    docs, _, _ = read(path)
    assert [d.text for d in docs] == lines
