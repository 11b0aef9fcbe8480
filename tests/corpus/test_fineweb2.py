"""FineWeb-2's layout, end to end through `fertility report`: a folder per language named
`lang_Script` holding parquet files with a `text` column, written from real text."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)

pytestmark = pytest.mark.realworld

FOLDERS = {"bn": "ben_Beng", "en": "eng_Latn", "ru": "rus_Cyrl"}
LINES = 300  # per language: enough for intervals, small enough to measure in a second


@pytest.fixture(scope="module")
def fineweb(rw, tmp_path_factory):  # noqa: F811
    """data/LANG_Script/train/000_00000.parquet as FineWeb-2 ships them (its `id` and other
    columns beside `text`), row groups of 50 rows; and the texts written, per folder."""
    root = tmp_path_factory.mktemp("fineweb2") / "data"
    texts = {}
    for lang, folder in FOLDERS.items():
        lines = (rw / "text" / f"{lang}.txt").read_text("utf-8").splitlines()
        lines = [x for x in lines if x.strip()][:LINES]
        out = root / folder / "train"
        out.mkdir(parents=True)
        table = pa.table({"text": lines, "id": [f"<urn:{i}>" for i in range(len(lines))]})
        pq.write_table(table, out / "000_00000.parquet", row_group_size=50)
        texts[folder] = lines
    return root, texts


def _rows(report: dict) -> dict:
    return {(r["group"], r["key"]): r for r in report["tokenizers"][0]["rows"]}


def test_report_labels_by_folder_and_reads_the_text_column(run, fineweb, rw):  # noqa: F811
    root, texts = fineweb
    tok = rw / "tokenizers" / "bpe-gpt2"
    code, out, err = run("report", root, "-t", tok, "-q", "--workers", "1", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    rows = _rows(report)
    for folder, lines in texts.items():
        row = rows[("language", folder)]
        # second method: the lines as Python counts them
        assert row["documents"] == len(lines)
        assert row["chars"] == sum(map(len, lines))
    assert {k for g, k in rows if g == "language"} == set(texts)  # no `und`
    assert {"Beng", "Latn", "Cyrl"} <= {k for g, k in rows if g == "running"}


def test_precision_reads_row_groups_of_the_layout(run, fineweb, rw):  # noqa: F811
    root, texts = fineweb
    tok = rw / "tokenizers" / "bpe-gpt2"
    args = ("report", root, "-t", tok, "-q", "--format", "json", "--precision", "0.5")
    code, out, err = run(*args, "--seed", "3")
    assert code == 0, err
    p = json.loads(out)["corpus"]["precision"]
    # 6 row groups of 50 rows per file: fewer than MIN_CLUSTERS batches, so every language is
    # read to its end and says so; read whole, its interval is its documents' (no 30-block
    # minimum), within 50% at 300 documents
    assert p["blocks"] == 3 * LINES // 50 and p["blocks_read"] == p["blocks"]
    assert set(p["languages"]) == set(texts)
    for folder, lines in texts.items():
        g = p["languages"][folder]
        assert g["documents"] == len(lines) and g["exhausted"] and g["interval"] == "documents"
        assert g["reached"] == (g["half_width"] <= 0.5) and g["reached"]
    assert not set(texts) & set(p["not_reached"])
