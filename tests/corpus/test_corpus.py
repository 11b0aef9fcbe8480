"""fertility.corpus: formats, compression, labels, walking, sampling, bad input, streaming.

Every fixture is written here into tmp_path; expected values are worked out by hand from
the bytes written, not taken from the code under test."""

from __future__ import annotations

import builtins
import bz2
import codecs
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import sys
import tracemalloc

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from fertility.corpus import Corpus, Document
from fertility.corpus import formats as fmt
from fertility.errors import CorpusError

COMPRESS = {
    "": lambda b: b,
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".zst": lambda b: zstandard.ZstdCompressor().compress(b),
}


def write(path, data: bytes | str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def parquet_bytes(columns: dict) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), sink, row_group_size=2)  # several row groups
    return sink.getvalue().to_pybytes()


def read(*paths, **options) -> tuple[list[Document], dict, list[str]]:
    warnings: list[str] = []
    corpus = Corpus([str(p) for p in paths], on_warning=warnings.append, **options)
    docs = list(corpus.documents())
    return docs, corpus.summary(), warnings


def texts(docs):
    return [d.text for d in docs]


# -- formats --------------------------------------------------------------------------


@pytest.mark.parametrize("ext", COMPRESS)
@pytest.mark.parametrize("kind", ["txt", "jsonl", "parquet"])
def test_every_format_and_compression(tmp_path, kind, ext):
    lines = ["প্রথম বাক্য", "second line", "third"]
    if kind == "txt":
        raw = ("\n".join(lines) + "\n").encode()
    elif kind == "jsonl":
        raw = "".join(json.dumps({"text": t, "id": i}) + "\n" for i, t in enumerate(lines)).encode()
    else:
        raw = parquet_bytes({"text": lines, "id": [0, 1, 2]})
    path = write(tmp_path / f"data.{kind}{ext}", COMPRESS[ext](raw))
    docs, summary, _ = read(path)
    assert docs == [Document(t, "und", str(path), i) for i, t in enumerate(lines, 1)]
    assert (
        summary["files"][0]["compression"]
        == {"": None, ".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd"}[ext]
    )


def test_txt_lines_crlf_cr_blank_and_whitespace(tmp_path):
    raw = b"one\r\ntwo\rthree\n\n \t \r\n  four  \n\r\nlast"
    docs, summary, _ = read(write(tmp_path / "a.txt", raw))
    # Lines: 1 one, 2 two, 3 three, 4 empty, 5 whitespace, 6 "  four  ", 7 empty, 8 last.
    assert [(d.text, d.line) for d in docs] == [
        ("one", 1),
        ("two", 2),
        ("three", 3),
        ("  four  ", 6),
        ("last", 8),
    ]
    assert summary["documents"] == summary["documents_seen"] == 5


def test_only_newline_terminators_split_lines(tmp_path):
    docs, _, _ = read(write(tmp_path / "a.txt", "a\u2028b\x0cc\u0085d\n"))
    assert texts(docs) == ["a\u2028b\x0cc\u0085d"]


def test_utf8_bom_is_dropped(tmp_path):
    docs, _, _ = read(write(tmp_path / "a.txt", b"\xef\xbb\xbfhi\nthere\n"))
    assert texts(docs) == ["hi", "there"]


def test_whole_files(tmp_path):
    write(tmp_path / "c/a.txt", "line one\nline two\r\n")
    write(tmp_path / "c/b.txt", "keeps one blank line\n\n")
    write(tmp_path / "c/c.txt", " \n\t\n")
    docs, summary, _ = read(tmp_path / "c", whole_files=True)
    assert [(d.text, d.line) for d in docs] == [
        ("line one\nline two", 1),
        ("keeps one blank line\n", 1),
    ]
    assert [f["documents"] for f in summary["files"]] == [1, 1, 0]


def test_jsonl_text_field_blank_lines_and_empty_records(tmp_path):
    raw = (
        '{"content": "first"}\n\n   \n{"content": ""}\n{"content": "  "}\n'
        '{"content": "second", "text": 5}\n'
    )
    docs, summary, _ = read(write(tmp_path / "a.jsonl", raw), text_field="content")
    # Records (blank lines are not records): 1 first, 2 "", 3 "  ", 4 second.
    assert [(d.text, d.line) for d in docs] == [("first", 1), ("second", 4)]
    assert summary["empty_records"] == 2


def test_parquet_column_option_and_nulls(tmp_path):
    path = write(
        tmp_path / "a.parquet",
        parquet_bytes({"body": ["x", None, "", "y", "z"], "text": [1, 2, 3, 4, 5]}),
    )
    docs, summary, _ = read(path, text_field="body")
    assert [(d.text, d.line) for d in docs] == [("x", 1), ("y", 4), ("z", 5)]
    assert summary["empty_records"] == 2


def test_counts_chars_bytes_and_json_ready_summary(tmp_path):
    write(tmp_path / "a.txt", "ক খ\nab\n")  # ক and খ are 3 UTF-8 bytes each
    docs, summary, _ = read(tmp_path / "a.txt")
    assert (summary["chars"], summary["bytes"]) == (3 + 2, 7 + 2)
    assert json.loads(json.dumps(summary)) == summary
    assert summary["complete"] is True and summary["paths"] == [str(tmp_path / "a.txt")]


# -- language labels ------------------------------------------------------------------


def test_language_labels(tmp_path):
    root = tmp_path / "corpus"
    write(root / "bn.txt", "a\n")
    write(root / "ben_Beng.txt", "a\n")
    write(root / "zh-Hans.jsonl.gz", gzip.compress(b'{"text": "a"}\n'))
    write(root / "pt_BR.txt", "a\n")
    write(root / "hi/part-1.txt", "a\n")
    write(root / "hi/2023/data.txt", "a\n")  # nearest language folder counts
    write(root / "misc/part-1.txt", "a\n")
    for not_a_code in ["data", "dev", "EN", "engl", "en-us", "new"]:
        write(root / f"x/{not_a_code}.txt", "a\n")
    docs, summary, _ = read(root)
    labels = {os.path.relpath(d.source, root): d.lang for d in docs}
    assert labels == {
        "bn.txt": "bn",
        "ben_Beng.txt": "ben_Beng",
        "zh-Hans.jsonl.gz": "zh-Hans",
        "pt_BR.txt": "pt_BR",
        "hi/part-1.txt": "hi",
        "hi/2023/data.txt": "hi",
        "misc/part-1.txt": "und",
        "x/data.txt": "und",
        "x/dev.txt": "und",
        "x/EN.txt": "und",
        "x/engl.txt": "und",
        "x/en-us.txt": "und",
        "x/new.txt": "und",
    }


def test_named_folder_and_named_file_labels(tmp_path):
    write(tmp_path / "ta/a.txt", "x\n")
    assert read(tmp_path / "ta")[0][0].lang == "ta"  # the named folder itself
    assert read(tmp_path / "ta/a.txt")[0][0].lang == "ta"  # a named file's parent


def test_folder_labels_are_known_codes_only(tmp_path):
    # a file name keeps the shape rule; a bare 2-3 letter folder must be an ISO 639 code
    root = tmp_path / "corpus"
    for name in [
        "pq/a.txt",
        "xx/a.txt",
        "ger/a.txt",
        "swh/a.txt",
        "pq/sw.txt",
        "qq/ben_Beng/a.txt",
    ]:
        write(root / name, "a\n")
    docs, _, _ = read(root)
    assert {os.path.relpath(d.source, root): d.lang for d in docs} == {
        "ger/a.txt": "ger",
        "pq/a.txt": "und",
        "pq/sw.txt": "sw",
        "qq/ben_Beng/a.txt": "ben_Beng",
        "swh/a.txt": "swh",
        "xx/a.txt": "und",
    }


def test_lang_field_fills_in_only_where_names_say_nothing(tmp_path):
    records = [
        {"text": "a", "lang": "bn"},
        {"text": "b", "lang": "hi"},
        {"text": "c"},
        {"text": "d", "lang": ""},
        {"text": "e", "lang": 7},
    ]
    raw = "".join(json.dumps(r) + "\n" for r in records)
    write(tmp_path / "mixed/data.jsonl", raw)
    write(tmp_path / "mixed/sw.jsonl", raw)  # the file name wins over the field
    write(
        tmp_path / "mixed/data.parquet", parquet_bytes({"text": ["p", "q"], "lang": ["ur", None]})
    )
    docs, summary, _ = read(tmp_path / "mixed", lang_field="lang")
    assert [(d.text, d.lang) for d in docs] == [
        ("a", "bn"),
        ("b", "hi"),
        ("c", "und"),
        ("d", "und"),
        ("e", "und"),
        ("p", "ur"),
        ("q", "und"),
        ("a", "sw"),
        ("b", "sw"),
        ("c", "sw"),
        ("d", "sw"),
        ("e", "sw"),
    ]
    assert summary["files"][0]["langs"] == {"bn": 1, "hi": 1, "und": 3}
    assert summary["files"][0]["lang"] is None and summary["files"][2]["lang"] == "sw"


# -- walking and skipping -------------------------------------------------------------


def test_recursive_sorted_walk_and_skipped_files(tmp_path):
    root = tmp_path / "c"
    for name in ["z/3.txt", "a/b/2.txt", "c.txt", "a/1.txt"]:
        write(root / name, name + "\n")
    write(root / "README.md", "x")
    write(root / "data.json", "{}")
    write(root / "a/archive.tar.gz", b"x")
    write(root / ".DS_Store", b"\0\0")
    write(root / ".git/HEAD.txt", "hidden folder\n")
    os.mkfifo(root / "pipe.txt")
    docs, summary, warnings = read(root)
    assert texts(docs) == ["a/1.txt", "a/b/2.txt", "c.txt", "z/3.txt"]
    skipped = {os.path.relpath(s["path"], root): s["reason"] for s in summary["skipped_files"]}
    assert skipped == {
        "README.md": "unsupported format (.md)",
        "data.json": "unsupported format (.json)",
        "a/archive.tar.gz": "unsupported format (.tar.gz)",
        ".DS_Store": "hidden",
        ".git": "hidden",
        "pipe.txt": "not a regular file",
    }
    assert len(warnings) == 1 and "skipped 6 file(s)" in warnings[0]


def test_mixed_arguments_explicit_unsupported_file_and_duplicates(tmp_path):
    write(tmp_path / "d/bn.txt", "from folder\n")
    write(tmp_path / "hi.txt", "named file\n")
    notes = write(tmp_path / "notes.csv", "a,b\n")
    docs, summary, warnings = read(
        tmp_path / "d", tmp_path / "hi.txt", notes, tmp_path / "d/bn.txt"
    )
    assert [(d.text, d.lang) for d in docs] == [("from folder", "bn"), ("named file", "hi")]
    reasons = [s["reason"] for s in summary["skipped_files"]]
    assert reasons == ["unsupported format (.csv)", f"same file as {tmp_path / 'd/bn.txt'}"]
    assert any("notes.csv" in w and "unsupported" in w for w in warnings)


def test_only_unsupported_files_is_an_error(tmp_path):
    notes = write(tmp_path / "notes.md", "text")
    with pytest.raises(CorpusError, match="notes.md.*no corpus files"):
        Corpus([str(notes)], on_warning=lambda m: None)


# -- sampling -------------------------------------------------------------------------


def _thousand(tmp_path):
    return write(tmp_path / "c/a.txt", "".join(f"doc {i}\n" for i in range(1, 1001)))


def test_sample_is_deterministic_and_independent_of_batch_size(tmp_path):
    _thousand(tmp_path)
    corpus = Corpus([str(tmp_path / "c")], sample=0.3, seed=7)
    first = [d.line for d in corpus.documents()]
    for size in (1, 7, 512, 5000):
        again = Corpus([str(tmp_path / "c")], sample=0.3, seed=7)
        assert [d.line for batch in again.batches(size) for d in batch] == first
    assert 250 <= len(first) <= 350 and first == sorted(first)
    other = [d.line for d in Corpus([str(tmp_path / "c")], sample=0.3, seed=8).documents()]
    assert other != first
    summary = corpus.summary()
    assert (summary["documents"], summary["documents_seen"]) == (len(first), 1000)
    assert (summary["sample"], summary["seed"], summary["stopped_early"]) == (0.3, 7, False)


def test_sample_of_a_file_does_not_depend_on_other_files(tmp_path):
    _thousand(tmp_path)
    alone = [d.line for d in Corpus([str(tmp_path / "c")], sample=0.5).documents()]
    write(tmp_path / "c/0-before.txt", "".join(f"x {i}\n" for i in range(123)))
    with_other = [
        d.line
        for d in Corpus([str(tmp_path / "c")], sample=0.5).documents()
        if d.source.endswith("a.txt")
    ]
    assert with_other == alone


def hash_key(seed: int, rel: str, line: int) -> int:
    """The documented key of a document (fertility/corpus/stratify.py), computed here from
    its definition: BLAKE2b-64 of "seed NUL relative path NUL line", big-endian."""
    key = f"{seed}\0{rel}\0{line}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def test_max_docs_keeps_the_smallest_keys_of_the_sample(tmp_path):
    # One language (und): max_docs keeps the 10 sampled lines with the smallest keys, in
    # file order, whichever part of the file they are in.
    _thousand(tmp_path)
    full = [d.line for d in Corpus([str(tmp_path / "c")], sample=0.5, seed=3).documents()]
    corpus = Corpus([str(tmp_path / "c")], sample=0.5, seed=3, max_docs=10)
    smallest = sorted(full, key=lambda line: hash_key(3, "a.txt", line))[:10]
    assert [d.line for d in corpus.documents()] == sorted(smallest)
    assert max(smallest) > 500  # not the first ten sampled: from across the file
    summary = corpus.summary()
    assert (summary["stopped_early"], summary["stopped_at"]) == (True, None)
    assert summary["documents"] == 10 and summary["documents_seen"] == 1000
    assert summary["subset"]["method"] == "stratified"
    assert summary["subset"]["languages"] == {
        "und": {"seen": 1000, "sampled": len(full), "kept": 10, "target": 10.0}
    }


def test_max_docs_across_files_and_at_exact_end(tmp_path):
    write(tmp_path / "c/1.txt", "a\nb\n")
    write(tmp_path / "c/2.txt", "c\nd\ne\n")
    write(tmp_path / "c/3.txt", "f\n")
    docs, summary, _ = read(tmp_path / "c", max_docs=3)
    lines = {"a": ("1.txt", 1), "b": ("1.txt", 2), "c": ("2.txt", 1)}
    lines |= {"d": ("2.txt", 2), "e": ("2.txt", 3), "f": ("3.txt", 1)}
    smallest = sorted(lines, key=lambda t: hash_key(0, *lines[t]))[:3]
    assert texts(docs) == sorted(smallest)  # file order of the three smallest keys
    assert summary["stopped_at"] is None and summary["stopped_early"] is True
    assert [f["documents"] for f in summary["files"]] == [
        sum(lines[t][0] == name for t in smallest) for name in ("1.txt", "2.txt", "3.txt")
    ]  # every file is read, and listed
    docs, summary, _ = read(tmp_path / "c", max_docs=6)
    assert texts(docs) == list("abcdef") and summary["stopped_early"] is False
    assert summary["subset"]["method"] == "all"


@pytest.mark.parametrize("options", [{"sample": 0}, {"sample": 1.5}, {"max_docs": 0}])
def test_bad_sampling_options(tmp_path, options):
    with pytest.raises(CorpusError):
        Corpus([str(write(tmp_path / "a.txt", "a\n"))], **options)


# -- bad input ------------------------------------------------------------------------

BAD_UTF8 = b"ok\nbad \xff and valid \xef\xbf\xbd\n\xe2\x82 cut\n"


@pytest.mark.parametrize("ext", ["", ".gz"])
def test_invalid_utf8_replaced_and_counted(tmp_path, ext):
    path = write(tmp_path / f"a.txt{ext}", COMPRESS[ext](BAD_UTF8))
    docs, summary, warnings = read(path)
    assert texts(docs) == ["ok", "bad \ufffd and valid \ufffd", "\ufffd cut"]
    # \xff is one bad sequence, the cut-off \xe2\x82 another; the encoded U+FFFD is text.
    assert summary["invalid_utf8"] == {str(path): 2}
    assert len(warnings) == 1 and "byte 7" in warnings[0]


def test_invalid_utf8_strict_names_file_and_offset(tmp_path):
    path = write(tmp_path / "a.txt", BAD_UTF8)
    with pytest.raises(CorpusError, match=r"a\.txt: invalid UTF-8 at byte 7$"):
        list(Corpus([str(path)], strict=True).documents())


def test_jsonl_lone_surrogate_is_invalid_text(tmp_path):
    path = write(tmp_path / "a.jsonl", '{"text": "a\\ud800b"}\n')
    docs, summary, _ = read(path)
    assert texts(docs) == ["a\ufffdb"] and summary["invalid_utf8"] == {str(path): 1}
    with pytest.raises(CorpusError, match="a.jsonl: line 1"):
        list(Corpus([str(path)], strict=True).documents())


def test_binary_files_skipped_early_and_late(tmp_path):
    write(tmp_path / "c/a.txt", "text\n")
    write(tmp_path / "c/b.txt", b"head\n\x00\x01\x02")
    write(tmp_path / "c/c.txt.gz", gzip.compress(b"x" * 9000 + b"\nlate\n\x00"))
    docs, summary, warnings = read(tmp_path / "c")
    assert texts(docs) == ["text", "x" * 9000, "late"]
    assert summary["binary_files"] == [
        {"path": str(tmp_path / "c/b.txt"), "offset": 5, "why": "NUL byte at byte 5"},
        {"path": str(tmp_path / "c/c.txt.gz"), "offset": 9006, "why": "NUL byte at byte 9006"},
    ]
    assert [f["path"] for f in summary["files"]] == [
        str(tmp_path / "c/a.txt"),
        str(tmp_path / "c/c.txt.gz"),
    ]
    assert len(warnings) == 2


def error(*paths, **options) -> str:
    with pytest.raises(CorpusError) as info:
        list(Corpus([str(p) for p in paths], on_warning=lambda m: None, **options).documents())
    message = str(info.value)
    assert "\n" not in message
    return message


def test_missing_path_and_broken_link(tmp_path):
    assert error(tmp_path / "nope.txt") == f"{tmp_path / 'nope.txt'}: no such file or directory"
    os.symlink(tmp_path / "gone.txt", tmp_path / "link.txt")
    assert "link.txt: broken symbolic link" in error(tmp_path / "link.txt")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode bits")
def test_unreadable_file_by_mode(tmp_path):
    path = write(tmp_path / "a.txt", "x\n")
    path.chmod(0)
    assert "a.txt: cannot open" in error(path)


def test_unreadable_file_permission_denied(tmp_path, monkeypatch):
    # What open() raises for a non-root user on a mode-000 file; tests here may run as root.
    path = write(tmp_path / "a.txt", "x\n")
    real_open = builtins.open

    def deny(file, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", deny)
    assert error(path) == f"{path}: cannot open (Permission denied)"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc/self/mem")
def test_read_error(tmp_path):
    os.symlink("/proc/self/mem", tmp_path / "mem.txt")  # opens, then reading fails (EIO)
    assert "mem.txt: read error" in error(tmp_path / "mem.txt")


def test_empty_corpus(tmp_path):
    write(tmp_path / "c/a.txt", "\n  \n")
    write(tmp_path / "c/b.jsonl", '{"text": ""}\n')
    assert "no documents" in error(tmp_path / "c")
    assert "kept none" in error(write(tmp_path / "one.txt", "a\n"), sample=1e-9)


@pytest.mark.parametrize("ext", [".gz", ".bz2", ".xz", ".zst"])
@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_corrupt_compressed_stream(tmp_path, ext, damage):
    good = COMPRESS[ext]("".join(f"line {i}\n" for i in range(5000)).encode())
    raw = good[: len(good) // 2] if damage == "truncated" else b"not compressed at all" * 10
    path = write(tmp_path / f"a.txt{ext}", raw)
    assert f"{path}: corrupt or truncated" in error(path)


def test_zstd_several_frames(tmp_path):
    zc = zstandard.ZstdCompressor()
    path = write(tmp_path / "a.txt.zst", zc.compress(b"one\ntw") + zc.compress(b"o\nthree\n"))
    assert texts(read(path)[0]) == ["one", "two", "three"]


def test_corrupt_parquet(tmp_path):
    good = parquet_bytes({"text": ["a", "b"]})
    assert "a.parquet: not a readable parquet" in error(write(tmp_path / "a.parquet", good[:-20]))
    assert "b.parquet: not a readable parquet" in error(write(tmp_path / "b.parquet", b"PAR1xx"))
    msg = error(write(tmp_path / "c.parquet", good), text_field="body")
    assert msg == f"{tmp_path / 'c.parquet'}: no column 'body' (columns: text)"
    ints = write(tmp_path / "d.parquet", parquet_bytes({"text": [1, 2]}))
    assert "d.parquet: column 'text' is int64, not a string" in error(ints)


@pytest.mark.parametrize(
    "line, what",
    [
        ("{not json", "line 3: not valid JSON"),
        ('["text"]', "line 3: not a JSON object"),
        ('{"body": "x"}', "line 3: no field 'text'"),
        ('{"text": 5}', "line 3: field 'text' is int, not a string"),
        ('{"text": null}', "line 3: field 'text' is null, not a string"),
    ],
)
@pytest.mark.parametrize("strict", [False, True])
def test_malformed_jsonl_line(tmp_path, line, what, strict):
    path = write(tmp_path / "a.jsonl.gz", gzip.compress(f'{{"text": "ok"}}\n\n{line}\n'.encode()))
    assert error(path, strict=strict).startswith(f"{path}: {what}")


# -- streaming ------------------------------------------------------------------------


def test_documents_arrive_before_the_file_is_read(tmp_path):
    # A 50 MB gzip cut in half: the first document comes out before the damage is reached,
    # which a reader that loads the file first could not do.
    data = gzip.compress(b"first line\n" + b"abcdefghij" * 5_000_000 + b"\n", compresslevel=1)
    path = write(tmp_path / "big.txt.gz", data[: len(data) // 2])
    docs = Corpus([str(path)], max_doc_chars=60_000_000).documents()  # a 50M-char line
    assert next(docs).text == "first line"
    with pytest.raises(CorpusError, match="truncated"):
        next(docs)


def test_memory_stays_flat(tmp_path):
    """Peak memory while reading does not grow with the file: a 4 MB and a 16 MB file peak
    alike, far below the smaller file's size (nothing holds the corpus)."""
    line = ("নমস্কার " * 12 + "\n").encode()  # ~ 200 bytes per line
    peaks = []
    for n in (20_000, 80_000):  # ~ 4 MB and ~ 16 MB
        path = write(tmp_path / f"{n}.txt", line * n)
        corpus = Corpus([str(path)])
        tracemalloc.start()
        try:
            count = sum(len(batch) for batch in corpus.batches(64))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert count == n
        peaks.append(peak)
    assert peaks[0] < 2_000_000, peaks
    assert peaks[1] < 1.25 * peaks[0], peaks


# A second way to read a .txt file, for the block reader to agree with: the whole file at
# once, lines cut by a regex, invalid UTF-8 counted and located by a codec error handler
# (Python calls it once per maximal invalid sequence).
_LINE = re.compile(rb"([^\r\n]*)(?:\r\n|\n|\r|\Z)")
_BAD: list[int] = []


def _count_bad(error: UnicodeDecodeError):
    _BAD.append(error.start)
    return "\ufffd", error.end


codecs.register_error("test-corpus-count", _count_bad)


def whole_file_reference(data: bytes, strict: bool):
    """(records, invalid count, first bad offset, how it ended) for `data` as a .txt file."""
    nul = data.find(b"\0")
    if 0 <= nul < fmt.BINARY_PROBE:  # binary from the start: nothing is given out
        return [], 0, None, ("binary", nul)
    pos = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    end = len(data) if nul < 0 else data.rfind(b"\n", 0, nul) + 1  # drop the NUL's line
    records, bad, first = [], 0, None
    number = 0
    while pos < end:
        match = _LINE.match(data, pos, end)
        raw, number = match.group(1), number + 1
        _BAD.clear()
        text = raw.decode("utf-8", "test-corpus-count")
        if _BAD:
            if strict:
                return records, bad, first, f"f.txt: invalid UTF-8 at byte {pos + _BAD[0]}"
            bad += len(_BAD)
            first = pos + _BAD[0] if first is None else first
        if text.strip():
            records.append((number, text, None))
        pos = match.end()
    return records, bad, first, "end" if nul < 0 else ("binary", nul)


def read_txt_with(data: bytes, strict: bool):
    stats, records = fmt.FileStats(), []
    try:
        for numbers, lines, langs in fmt.read_txt(io.BytesIO(data), "f.txt", strict, stats):
            assert langs is None  # a .txt line names no language
            records.extend((number, line, None) for number, line in zip(numbers, lines))
    except fmt.BinaryFile as binary:
        return records, stats.invalid_utf8, stats.first_bad_offset, ("binary", binary.offset)
    except CorpusError as e:
        return records, stats.invalid_utf8, stats.first_bad_offset, str(e)
    return records, stats.invalid_utf8, stats.first_bad_offset, "end"


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 18])
@pytest.mark.parametrize(
    "data",
    [
        b"\xef\xbb\xbfone\r\ntwo\rthree\n\n  \nfour",
        "বাংলা\r\nভাষা\n".encode() * 50 + b"tail without newline",
        b"ok\nbad \xff\xfe here\nmore\r\nbad2 \xc3\n" * 20,
        b"x" * 9000 + b"\nline\nwith\x00nul\nafter\n",
        b"x" * 9000 + b"\nbad \xff\nwith\x00nul\n",
        ("a" * 300 + "\r").encode() * 10,
        b"\r\r\n\n\r",
        b"",
    ],
)
def test_block_reader_agrees_with_whole_file_reading(monkeypatch, block, data):
    monkeypatch.setattr(fmt, "READ_BLOCK", block)
    for strict in (False, True):
        records, bad, first, ending = read_txt_with(data, strict)
        expected = whole_file_reference(data, strict)
        if strict and isinstance(expected[3], str):  # the error may come before a block's lines
            assert ending == expected[3]
        else:
            assert (records, bad, first, ending) == expected


def test_jsonl_across_read_blocks(monkeypatch):
    # Records cross the 7-byte blocks; blank lines are not records; the bad byte of line 5
    # (record 4) sits at 15 + 15 + 1 + 16 + 11 = byte 58 ({"text": "dN"} is 14 bytes).
    monkeypatch.setattr(fmt, "READ_BLOCK", 7)
    raw = b'{"text": "d1"}\n{"text": "d2"}\n\n{"text": "d3"}\r\n{"text": "d\xff"}\n{"text": "d5"}'
    stats = fmt.FileStats()
    records = list(fmt.read_jsonl(io.BytesIO(raw), "f.jsonl", "text", None, False, stats))
    assert records == [
        (1, "d1", None),
        (2, "d2", None),
        (3, "d3", None),
        (4, "d\ufffd", None),
        (5, "d5", None),
    ]
    assert (stats.invalid_utf8, stats.first_bad_offset) == (1, 58)
    with pytest.raises(CorpusError, match=r"f\.jsonl: invalid UTF-8 at byte 58$"):
        list(fmt.read_jsonl(io.BytesIO(raw), "f.jsonl", "text", None, True, fmt.FileStats()))


# -- files that change while read, lines that never end --------------------------------------


@pytest.mark.parametrize("name, pack", [("en.txt", bytes), ("en.txt.gz", gzip.compress)])
def test_a_file_is_read_to_its_size_when_the_corpus_was_made(tmp_path, name, pack):
    path = write(tmp_path / name, pack(b"one\ntwo\n"))
    size = path.stat().st_size
    warnings: list[str] = []
    corpus = Corpus([str(path)], on_warning=warnings.append)
    with open(path, "ab") as f:  # a writer appends after the corpus was opened
        f.write(pack(b"three\n"))
    assert texts(corpus.documents()) == ["one", "two"]
    assert warnings == [
        (
            f"{path}: grew while it was read; read its first {size} bytes (its "
            "size when the corpus was opened)"
        )
    ]
    # a second reader (a worker process) handed the first one's sizes reads the same bytes
    with open(path, "ab") as f:
        f.write(pack(b"four\n"))
    worker = Corpus([str(path)], sizes=corpus.sizes(), on_warning=lambda m: None)
    assert texts(worker.documents()) == ["one", "two"]


def test_a_file_that_shrinks_while_read_is_an_error(tmp_path):
    path = write(tmp_path / "en.txt", b"one\ntwo\nthree\n")
    corpus = Corpus([str(path)], on_warning=lambda m: None)
    write(path, b"one\n")
    with pytest.raises(CorpusError, match="shrank while it was read"):
        list(corpus.documents())


class Endless(io.RawIOBase):
    """A stream of 'x' that never ends and never holds a newline."""

    def readable(self):
        return True

    def readinto(self, buffer):
        buffer[:] = b"x" * len(buffer)
        return len(buffer)


@pytest.mark.parametrize("reader", ["txt", "jsonl"])
def test_a_line_that_never_ends_is_refused_in_bounded_memory(reader):
    stream = io.BufferedReader(Endless())
    limits = fmt.Limits(max_doc_chars=100_000)
    tracemalloc.start()
    with pytest.raises(CorpusError, match="longer than --max-doc-chars"):
        if reader == "txt":
            list(fmt.read_txt(stream, "f.txt", False, fmt.FileStats(), limits))
        else:
            list(fmt.read_jsonl(stream, "f.jsonl", "text", None, False, fmt.FileStats(), limits))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # what is held: at most the bytes of the limit (4x or 12x the characters) plus a block
    assert peak < 3 * (12 * 100_000 + fmt.READ_BLOCK)


def test_a_reader_given_sizes_skips_a_file_that_appeared_since(tmp_path):
    write(tmp_path / "c/a.txt", "one\n")
    first = Corpus([str(tmp_path / "c")])
    write(tmp_path / "c/b.txt", "two\n")  # created after the first reader walked the folder
    docs, summary, _ = read(tmp_path / "c", sizes=first.sizes())
    assert texts(docs) == ["one"]
    assert summary["skipped_files"] == [
        {"path": str(tmp_path / "c/b.txt"), "reason": "appeared after the corpus was opened"}
    ]
