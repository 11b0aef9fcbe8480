"""Corpus.doc_batches: the same documents and summary as documents(), in batches cut by the
rule the measuring path relies on; and the block reader stopping where a one-at-a-time
reader would (errors, binary files), max_docs reading every record.

The cut rule's expected batches come from a plain loop over documents() (the rule as the
measuring path used to apply it) and from lengths worked out by hand."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fertility.corpus import Corpus, DocBatch, Document
from fertility.corpus import formats as fmt
from fertility.errors import CorpusError
from tests.corpus.test_corpus import (
    COMPRESS,
    hash_key,
    parquet_bytes,
    whole_file_reference,
    write,
)
from tests.realworld.conftest import rw  # noqa: F401 (fixture)

EXCERPT = Path(__file__).resolve().parents[1] / "realworld" / "excerpt"  # 13 languages


def _crlf(root):
    write(root / "a.txt", b"one\r\ntwo\rthree\n\n \t \r\n  four  \n\r\nlast")
    write(root / "b.txt", "x\n \t\n\u3000\ny\n")  # whitespace lines, no empty one


def _bad_utf8(root):
    write(root / "a.txt", b"ok\nbad \xff and valid \xef\xbf\xbd\n\xe2\x82 cut\n")
    write(root / "b.txt.gz", gzip.compress(b"\xc3 x\n\n \nfine\n"))


def _jsonl_lang_field(root):
    records = [{"text": "a", "lang": "bn"}, {"text": "b", "lang": "hi"}, {"text": "  "}]
    records += [{"text": "c"}, {"text": "d", "lang": ""}, {"text": "e", "lang": 7}]
    raw = "".join(json.dumps(r) + "\n" for r in records) + "\n" + '{"text": "a\\ud800b"}\n'
    write(root / "data.jsonl", raw)
    write(root / "sw.jsonl.zst", COMPRESS[".zst"](raw.encode()))


def _parquet(root):
    write(
        root / "a.parquet",
        parquet_bytes({"text": ["x", None, "", "y", "z"], "lang": list("uuvvw")}),
    )
    write(root / "b.parquet.gz", gzip.compress(parquet_bytes({"text": ["p", "q"]})))


def _compressed(root):
    for i, ext in enumerate(COMPRESS):
        write(
            root / f"f{i}.txt{ext}",
            COMPRESS[ext]("".join(f"l{i} {n}\n" for n in range(40)).encode()),
        )


def _languages(root):
    for lang in ["bn", "hi", "ta"]:
        write(root / lang / "part-1.txt", "".join(f"{lang} {n}\n" for n in range(30)))
        write(root / lang / "2024/part-2.txt", f"{lang} late\n")
    write(root / "misc/x.txt", "und here\n")


def _thousand(root):
    write(root / "a.txt", "".join(f"doc {i}\n" for i in range(1, 1001)))
    write(root / "b.txt", "".join(f"more {i}\n" for i in range(1, 301)))


def _binary(root):
    write(root / "a.txt", "text\n")
    write(root / "b.txt", b"head\n\x00\x01\x02")
    write(root / "c.txt.gz", gzip.compress(b"x" * 9000 + b"\nlate\n\x00"))
    write(root / "d.jsonl", b'{"text": "kept"}\n' * 600 + b'{"text": "\x00"}\n')


CASES = {
    "crlf": (_crlf, {}),
    "bad-utf8": (_bad_utf8, {}),
    "jsonl-lang-field": (_jsonl_lang_field, {"lang_field": "lang"}),
    "parquet": (_parquet, {"lang_field": "lang"}),
    "compressed": (_compressed, {}),
    "languages": (_languages, {}),
    "whole-files": (_languages, {"whole_files": True}),
    "sample": (_thousand, {"sample": 0.3, "seed": 7}),
    "max-docs": (_thousand, {"max_docs": 1100}),
    "sample-max-docs": (_thousand, {"sample": 0.5, "seed": 3, "max_docs": 400}),
    "jsonl-max-docs": (_jsonl_lang_field, {"max_docs": 6}),
    "binary": (_binary, {}),
}
# (size, max_chars): one document each, by count only, by characters only, both, tiny
SHAPES = [(1, 10**9), (7, 10**9), (10**9, 20), (3, 5), (4096, 1 << 18), (5, 1)]


def passes(paths, shapes=SHAPES, **options):
    """(documents, summary, warnings) of documents() and the same of doc_batches() for each
    shape, each from its own Corpus."""

    def one(read):
        warnings: list[str] = []
        corpus = Corpus([str(p) for p in paths], on_warning=warnings.append, **options)
        return read(corpus), corpus.summary(), warnings

    docs = one(lambda c: list(c.documents()))
    batches = {shape: one(lambda c: list(c.doc_batches(*shape))) for shape in shapes}
    return docs, batches


def reference_cut(docs: list[Document], size: int, max_chars: int) -> list[list[Document]]:
    """The rule one document at a time: a batch ends after `size` documents or once its
    characters reach `max_chars`."""
    batches, batch, chars = [], [], 0
    for doc in docs:
        batch.append(doc)
        chars += len(doc.text)
        if len(batch) >= size or chars >= max_chars:
            batches.append(batch)
            batch, chars = [], 0
    return batches + [batch] if batch else batches


def assert_same_pass(paths, shapes=SHAPES, **options):
    (docs, summary, warnings), batched = passes(paths, shapes, **options)
    assert docs and summary["complete"]
    for (size, max_chars), (batches, batch_summary, batch_warnings) in batched.items():
        assert all(isinstance(b, DocBatch) and len(b) for b in batches)
        assert [b.documents() for b in batches] == reference_cut(docs, size, max_chars)
        assert batch_summary == summary
        assert batch_warnings == warnings
    return docs, summary


@pytest.mark.parametrize("case", CASES)
def test_doc_batches_give_what_documents_gives(tmp_path, case):
    build, options = CASES[case]
    build(tmp_path / "c")
    assert_same_pass([tmp_path / "c"], **options)


def test_summary_counts_of_the_cases_by_hand(tmp_path):
    # A few of the cases' counts, worked out from the bytes written, so the shared pass is
    # checked against something besides itself.
    _crlf(tmp_path / "crlf")
    _, summary = assert_same_pass([tmp_path / "crlf"])
    # a.txt: one two three "  four  " last; b.txt: x y
    assert (summary["documents"], summary["chars"], summary["bytes"]) == (7, 25, 25)
    _jsonl_lang_field(tmp_path / "j")
    docs, summary = assert_same_pass([tmp_path / "j"], lang_field="lang", max_docs=6)
    # data.jsonl: records 1 (bn), 2 (hi), 4-7 (und; record 3 is blank text); sw.jsonl.zst
    # is named Swahili: its 6 records are sw. Of 12, max_docs=6 is half of each language:
    # und 2 and sw 3 (the smallest keys), and bn and hi half a document each: the one left
    # goes to one of them.
    und = [("data.jsonl", n) for n in (4, 5, 6, 7)]
    sw = [("sw.jsonl.zst", n) for n in (1, 2, 4, 5, 6, 7)]
    got = {
        g: sorted((d.source.split("/")[-1], d.line) for d in docs if d.lang == g)
        for g in ("bn", "hi", "und", "sw")
    }
    assert got["und"] == sorted(sorted(und, key=lambda d: hash_key(0, *d))[:2])
    assert got["sw"] == sorted(sorted(sw, key=lambda d: hash_key(0, *d))[:3])
    assert got["bn"] + got["hi"] in ([("data.jsonl", 1)], [("data.jsonl", 2)])
    assert summary["empty_records"] == 2 and summary["documents_seen"] == 12
    assert summary["stopped_at"] is None
    _thousand(tmp_path / "t")
    _, summary = assert_same_pass([tmp_path / "t"], max_docs=1100)
    places = [("a.txt", n) for n in range(1, 1001)] + [("b.txt", n) for n in range(1, 301)]
    kept = sorted(places, key=lambda d: hash_key(0, *d))[:1100]
    assert [f["documents"] for f in summary["files"]] == [
        sum(f == "a.txt" for f, _ in kept),
        sum(f == "b.txt" for f, _ in kept),
    ]


def test_batches_across_small_read_blocks(tmp_path, monkeypatch):
    # 7-byte reads: every block holds a line or two, so batches span many blocks and files
    monkeypatch.setattr(fmt, "READ_BLOCK", 7)
    _languages(tmp_path / "c")
    _jsonl_lang_field(tmp_path / "c/j")
    assert_same_pass([tmp_path / "c"], lang_field="lang")


def test_cut_rule_by_hand(tmp_path):
    write(tmp_path / "a.txt", "aaaa\nb\ncc\n\nddd\n")
    write(tmp_path / "b.txt", "e\n")  # lengths 4, 1, 2, 3 | 1

    def cut(size, max_chars):
        corpus = Corpus([str(tmp_path)])
        return [b.texts for b in corpus.doc_batches(size, max_chars)]

    assert cut(10, 4) == [["aaaa"], ["b", "cc", "ddd"], ["e"]]  # 4 >= 4; 1 + 2 + 3 >= 4
    assert cut(2, 100) == [["aaaa", "b"], ["cc", "ddd"], ["e"]]
    assert cut(2, 3) == [["aaaa"], ["b", "cc"], ["ddd"], ["e"]]
    assert cut(10, 100) == [["aaaa", "b", "cc", "ddd", "e"]]  # across the two files
    batch = next(Corpus([str(tmp_path)]).doc_batches(2, 100))
    assert batch == DocBatch(["aaaa", "b"], ["und"] * 2, [str(tmp_path / "a.txt")] * 2, [1, 2])
    assert [b.lines for b in Corpus([str(tmp_path)]).doc_batches(10, 4)][1] == [2, 3, 5]
    with pytest.raises(CorpusError, match="batch size 0"):
        next(Corpus([str(tmp_path)]).doc_batches(0, 100))


# -- max_docs reads every record ------------------------------------------------------------


def test_max_docs_reads_every_jsonl_record(tmp_path):
    # max_docs draws across the whole file, so a bad record past the quota's count is met
    # (by the key pass, before any document is given out), and every empty one is counted.
    records = '{"text": "1"}\n{"text": ""}\n{"text": "2"}\n{"text": "3"}\n{"text": "4"}\n'
    path = write(tmp_path / "a.jsonl", records + '{"text": " "}\n')
    for read in (lambda c: list(c.documents()), lambda c: list(c.doc_batches(4096, 1 << 18))):
        corpus = Corpus([str(path)], max_docs=3)
        read(corpus)
        summary = corpus.summary()
        assert (summary["documents"], summary["documents_seen"], summary["empty_records"]) == (
            3,
            4,
            2,
        )
    write(path, records + "{not json\n")
    docs = Corpus([str(path)], max_docs=3).documents()
    with pytest.raises(CorpusError, match="line 6: not valid JSON"):
        next(docs)


def test_a_too_long_line_is_met_by_max_docs(tmp_path):
    # Without max_docs the lines before it are given out first; max_docs's key pass reads the
    # whole file before the first document, so the error comes first.
    path = write(tmp_path / "a.txt", "short\nstop\n" + "x" * 50 + "\nafter\n")
    docs = Corpus([str(path)], max_doc_chars=20).documents()
    assert [next(docs).text, next(docs).text] == ["short", "stop"]
    with pytest.raises(CorpusError, match="a.txt: line 3 is longer than --max-doc-chars"):
        next(docs)
    with pytest.raises(CorpusError, match="a.txt: line 3 is longer than --max-doc-chars"):
        next(Corpus([str(path)], max_doc_chars=20, max_docs=1).documents())


def test_records_before_an_error_are_given_out_first(tmp_path):
    path = write(tmp_path / "a.jsonl", '{"text": "one"}\n{"text": "two"}\n[1]\n')
    docs = Corpus([str(path)]).documents()
    assert [next(docs).text, next(docs).text] == ["one", "two"]
    with pytest.raises(CorpusError, match="line 3: not a JSON object"):
        next(docs)


def test_a_late_nul_in_jsonl_keeps_the_records_before_it(tmp_path):
    _binary(tmp_path / "c")
    docs, summary = assert_same_pass([tmp_path / "c"])
    assert [d.text for d in docs] == ["text", "x" * 9000, "late"] + ["kept"] * 600
    nul = 600 * len(b'{"text": "kept"}\n') + len(b'{"text": "')
    assert summary["binary_files"][-1] == {
        "path": str(tmp_path / "c/d.jsonl"),
        "offset": nul,
        "why": f"NUL byte at byte {nul}",
    }


# -- real text -----------------------------------------------------------------------------


def assert_real_text(folder: Path, shapes=SHAPES):
    docs, summary = assert_same_pass([folder], shapes)
    # each file's documents as a second reader sees them: whole file, lines cut by a regex
    for path in sorted(folder.glob("*.txt")):
        records, *_ = whole_file_reference(path.read_bytes(), strict=False)
        assert [(d.line, d.text) for d in docs if d.source == str(path)] == [
            (number, text) for number, text, _ in records
        ]
    assert summary["documents"] == len(docs) and len(summary["files"]) == 13


def test_the_committed_real_text_excerpt():
    assert_real_text(EXCERPT)


@pytest.mark.realworld
@pytest.mark.parametrize("folder", ["text", "parallel"])
def test_the_real_world_fixture_text(rw, folder):  # noqa: F811
    # 10 MB: the measuring path's shape and one of small batches, not all six
    assert_real_text(rw / folder, [(4096, 1 << 18), (100, 2000)])
