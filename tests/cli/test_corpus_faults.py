"""`fertility report` on hostile or faulty corpus input: every fault is either read as
documented or one line `error: <file>: <what>` with exit 2, never a traceback, never exit 1.
docs/RELIABILITY.md ("Corpus input") lists each promise with the test below that checks it."""

import bz2
import gzip
import json
import lzma
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

LINES = [f"line number {i} of the good part" for i in range(40)]
GOOD = "".join(line + "\n" for line in LINES).encode()


def report(run, *args):
    code, out, err = run("report", *map(str, args), "-q", "--workers", "1", "--format", "json")
    return code, (json.loads(out) if code == 0 else None), err


def one_line_error(code, err, path, what):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"error: {path}: ") and what in lines[0], lines[0]


# -- names, nesting, JSON that the parser cannot take ---------------------------------------


def test_file_name_that_is_not_utf8_is_read_and_printed_escaped(run, tmp_path):
    folder = os.fsencode(tmp_path)
    with open(os.path.join(folder, b"caf\xe9.txt"), "wb") as f:
        f.write(GOOD)
    code, rep, _ = report(run, tmp_path)
    assert code == 0 and rep["corpus"]["documents"] == len(LINES)
    assert rep["corpus"]["files"][0]["path"] == f"{tmp_path}/caf\\xe9.txt"


def test_folder_nested_1100_deep_is_walked(run, tmp_path):
    # No --workers: choosing the number of processes walks the tree too.
    path = str(tmp_path)
    for _ in range(1100):
        path = os.path.join(path, "d")
        os.mkdir(path)
    try:
        with open(os.path.join(path, "en.txt"), "wb") as f:
            f.write(GOOD)
        code, out, err = run("report", tmp_path, "-q", "--format", "json")
        assert code == 0, err
        assert json.loads(out)["corpus"]["documents"] == len(LINES)
    finally:  # shutil.rmtree (pytest's clean-up) recurses: take it down from the bottom
        while path != str(tmp_path):
            for name in os.listdir(path):
                os.unlink(os.path.join(path, name))
            os.rmdir(path)
            path = os.path.dirname(path)


@pytest.mark.parametrize(
    "value, what",
    [
        ("[" * 100_000 + "]" * 100_000, "line 2: JSON nested too deeply"),
        ("9" * 5000, "line 2: JSON number with too many digits"),
    ],
)
def test_jsonl_the_parser_cannot_take_is_one_line(run, tmp_path, value, what):
    path = tmp_path / "en.jsonl"
    path.write_text('{"text": "fine"}\n{"text": "x", "meta": ' + value + "}\n")
    code, _, err = report(run, path)
    one_line_error(code, err, path, what)


# -- compressed streams ------------------------------------------------------------------


COMPRESS = {
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zst": zstandard.ZstdCompressor().compress,
}


@pytest.mark.parametrize("ext", COMPRESS)
def test_every_stream_of_a_multi_stream_file_is_read(run, tmp_path, ext):
    path = tmp_path / f"en.txt.{ext}"
    path.write_bytes(COMPRESS[ext](GOOD) + COMPRESS[ext](GOOD))
    code, rep, _ = report(run, path)
    assert code == 0 and rep["corpus"]["documents"] == 2 * len(LINES)


@pytest.mark.parametrize("ext", COMPRESS)
@pytest.mark.parametrize("tail", ["corrupt second stream", "trailing garbage"])
def test_damage_after_a_good_stream_is_an_error(run, tmp_path, ext, tail):
    good = COMPRESS[ext](GOOD)
    extra = COMPRESS[ext](GOOD * 3)[:60] if tail == "corrupt second stream" else b"garbage!"
    path = tmp_path / f"en.txt.{ext}"
    path.write_bytes(good + extra)
    code, _, err = report(run, path)
    one_line_error(code, err, path, "corrupt or truncated")


# -- encodings and binary ------------------------------------------------------------------


@pytest.mark.parametrize(
    "codec, name",
    [
        ("utf-16-le", "UTF-16LE"),
        ("utf-16-be", "UTF-16BE"),
        ("utf-32-le", "UTF-32LE"),
        ("utf-32-be", "UTF-32BE"),
    ],
)
def test_utf16_and_utf32_with_a_byte_order_mark_are_refused(run, tmp_path, codec, name):
    path = tmp_path / "bn.txt"
    path.write_bytes(("\ufeff" + "নমস্কার বিশ্ব\n" * 500).encode(codec))
    code, _, err = report(run, path)
    one_line_error(code, err, path, f"{name} text")


def blob(n=20_000):
    rng = random.Random(7)
    return bytes(rng.randrange(1, 256) for _ in range(n))  # no NUL byte


def test_binary_without_nul_is_skipped_unless_asked(run, tmp_path):
    (tmp_path / "en.txt").write_bytes(GOOD)
    (tmp_path / "zz.txt").write_bytes(blob())
    code, rep, err = report(run, tmp_path)
    assert code == 0 and rep["corpus"]["documents"] == len(LINES)
    assert [b["path"] for b in rep["corpus"]["binary_files"]] == [str(tmp_path / "zz.txt")]
    assert f"warning: {tmp_path / 'zz.txt'}: skipped (binary: " in err
    # asked: read as text, its lines (a lone \r ends one too) become documents
    code, rep, _ = report(run, tmp_path, "--max-invalid-utf8", "1")
    texts = blob().replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    real = sum(1 for t in texts if t.decode("utf-8", "replace").strip())
    assert code == 0 and rep["corpus"]["documents"] == len(LINES) + real


def test_latin1_text_is_still_read_with_its_bad_bytes_counted(run, tmp_path):
    text = "Le café où l'élève étudie près de la forêt, à côté du théâtre.\n" * 40
    path = tmp_path / "fr.txt"
    path.write_bytes(text.encode("latin-1"))
    code, rep, _ = report(run, path)
    # every non-ASCII letter is one Latin-1 byte, one invalid UTF-8 sequence
    assert code == 0 and rep["corpus"]["invalid_utf8"] == {
        str(path): sum(ord(c) > 127 for c in text)
    }


# -- parquet -------------------------------------------------------------------------------


def test_dictionary_encoded_parquet_columns_are_read_as_strings(run, tmp_path):
    texts = ["Rain fell.", "Rivers rose!", "Rain fell."] * 5
    langs = ["en", "fr", "en"] * 5
    path = tmp_path / "data.parquet"
    pq.write_table(
        pa.table(
            {
                "text": pa.array(texts).dictionary_encode(),
                "lang": pa.array(langs).dictionary_encode(),
            }
        ),
        path,
    )
    assert pa.types.is_dictionary(pq.read_schema(path).field("text").type)
    code, rep, _ = report(run, path, "--lang-field", "lang")
    assert code == 0 and rep["corpus"]["documents"] == len(texts)
    assert rep["corpus"]["chars"] == sum(map(len, texts))
    assert rep["corpus"]["files"][0]["langs"] == {"en": 10, "fr": 5}


# -- long documents ------------------------------------------------------------------------


def write_parquet(path, texts):
    pq.write_table(pa.table({"text": texts}), path)


@pytest.mark.parametrize(
    "name, write, where",
    [
        ("en.txt", lambda p, t: p.write_text(f"short\n{t}\n"), "line 2"),
        (
            "en.jsonl",
            lambda p, t: p.write_text(f'{{"text": "short"}}\n{json.dumps({"text": t})}\n'),
            "line 2",
        ),
        ("en.parquet", lambda p, t: write_parquet(p, ["short", t]), "row 2"),
    ],
)
def test_a_document_over_max_doc_chars_is_refused(run, tmp_path, name, write, where):
    path = tmp_path / name
    write(path, "ক" * 100)  # 100 characters, 300 bytes
    code, rep, _ = report(run, path, "--max-doc-chars", 100)
    assert code == 0 and rep["corpus"]["chars"] == 105  # at the limit: read
    write(path, "ক" * 101)
    code, _, err = report(run, path, "--max-doc-chars", 100)
    one_line_error(code, err, path, f"{where} is longer than --max-doc-chars (100 characters)")


def test_a_whole_file_over_max_doc_chars_is_refused(run, tmp_path):
    path = tmp_path / "en.txt"
    path.write_text("a" * 50 + "\n" + "b" * 50 + "\n")  # 101 characters without its last \n
    code, _, err = report(run, path, "--whole-files", "--max-doc-chars", 100)
    one_line_error(code, err, path, "the file (--whole-files) is longer than --max-doc-chars")
    code, rep, _ = report(run, path, "--whole-files", "--max-doc-chars", 101)
    assert code == 0 and rep["corpus"]["chars"] == 101


def test_a_huge_line_is_refused_before_it_is_held(run, tmp_path):
    # 9 MB on one line against a limit of 1,000 characters: refused after about 4 KB is held
    path = tmp_path / "en.txt.gz"
    path.write_bytes(gzip.compress(b"x" * 9_000_000))
    code, _, err = report(run, path, "--max-doc-chars", 1000)
    one_line_error(code, err, path, "the line at byte 0 is longer than --max-doc-chars")


def test_lines_ended_by_a_lone_cr_are_not_one_long_line(run, tmp_path):
    path = tmp_path / "en.txt"
    path.write_bytes(b"".join(b"old mac line %d\r" % i for i in range(2000)))
    code, rep, _ = report(run, path, "--max-doc-chars", 100)
    assert code == 0 and rep["corpus"]["documents"] == 2000


def test_a_file_that_grows_gives_every_worker_the_same_bytes(run, tmp_path, monkeypatch):
    # The file grows right after the parent fixed the sizes, before the two workers open
    # it: the corpus object and the rows the workers measured must both count the first part.
    from fertility.corpus import Corpus

    path = tmp_path / "en.txt"
    path.write_bytes(GOOD)
    sizes = Corpus.sizes

    def sizes_then_grow(self):
        fixed = sizes(self)
        with open(path, "ab") as f:
            f.write(GOOD * 50)
        return fixed

    monkeypatch.setattr(Corpus, "sizes", sizes_then_grow)
    code, out, err = run("report", path, "-q", "--workers", "2", "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["corpus"]["documents"] == len(LINES)
    for tok in rep["tokenizers"]:
        (en,) = [r for r in tok["rows"] if r["group"] == "language" and r["key"] == "en"]
        assert en["documents"] == len(LINES)
    assert f"warning: {path}: grew while it was read" in err
