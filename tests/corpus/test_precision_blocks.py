"""fertility.corpus.precision: a corpus read in random blocks gives every document exactly
once (a line crossing a block's end belongs to the block it starts in), in an order the seed
draws, on real text."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from fertility.corpus import Corpus
from fertility.corpus import precision as block_order
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)

pytestmark = pytest.mark.realworld


@pytest.fixture
def corpus_dir(rw, tmp_path, monkeypatch):  # noqa: F811
    # 1,000-byte blocks: real lines of 20-600 bytes cross block ends often
    monkeypatch.setattr(block_order, "BLOCK_BYTES", 1000)
    lines = (rw / "text" / "ru.txt").read_text("utf-8").splitlines()[:400]
    lines[7] = lines[7] * 20  # a line several blocks long
    lines[8] = "   "  # whitespace only: no document
    # CRLF endings in one half: \r stays out of the text, as the sequential reader keeps it
    text = "\n".join(lines[:200]) + "\n" + "\r\n".join(lines[200:]) + "\r\n"
    (tmp_path / "ru.txt").write_bytes(text.encode("utf-8"))
    records = "".join(json.dumps({"text": x}, ensure_ascii=False) + "\n" for x in lines[:150])
    (tmp_path / "bn.jsonl").write_text(records, "utf-8")
    return tmp_path


def _read(path, seed: int) -> list[tuple[str, str]]:
    order = block_order.BlockOrder(Corpus([path]), seed)
    return [(lang, t) for b in order.doc_batches(64, 1 << 18) for t, lang in zip(b.texts, b.langs)]


def test_every_document_once_in_a_seeded_order(corpus_dir, monkeypatch):
    data = (corpus_dir / "ru.txt").read_bytes()
    # a block size that puts a block's start exactly on a line's first byte (line 31's)
    exact = [i + 1 for i, b in enumerate(data) if b == 0x0A][30]
    for size in (1000, exact):
        monkeypatch.setattr(block_order, "BLOCK_BYTES", size)
        _check(corpus_dir)


def _check(corpus_dir):
    sequential = [(d.lang, d.text) for d in Corpus([corpus_dir]).documents()]
    first = _read(corpus_dir, 1)
    assert Counter(first) == Counter(sequential)  # each once, none lost, none added
    assert _read(corpus_dir, 1) == first  # the seed fixes the order
    second = _read(corpus_dir, 2)
    assert second != first and Counter(second) == Counter(first)
    # never a prefix: the first document read is not the first of a file for most seeds
    starts = {sequential[0], next(d for d in sequential if d[0] == "ru")}
    assert sum(_read(corpus_dir, s)[0] in starts for s in range(10)) <= 3


def test_a_block_is_one_batch(rw, tmp_path):  # noqa: F811
    """A text block of the real size (BLOCK_BYTES) is read as one batch of its documents,
    not as the file reader's 8 KB head and the rest: each batch costs the measuring a fixed
    amount, and --precision reads hundreds of blocks."""
    lines = (rw / "text" / "ru.txt").read_text("utf-8").splitlines()
    (tmp_path / "ru.txt").write_text("\n".join(lines[:1500]) + "\n", "utf-8")
    assert (tmp_path / "ru.txt").stat().st_size > 3 * block_order.BLOCK_BYTES
    order = block_order.BlockOrder(Corpus([tmp_path]), 0)
    batches = list(order.doc_batches(4096, 1 << 18))
    assert len(order) >= 4 and len(batches) == len(order)


def test_the_order_of_a_large_corpus_is_three_small_arrays(tmp_path):
    """10 GB of text is 610,352 blocks: the order holds 16 bytes a block (a file number, a
    block number and a stratum), each block once, and a block's byte range is its number's
    (the last one shorter). The file is sparse: nothing is written or read."""
    big = tmp_path / "en.txt"
    with open(big, "wb") as f:
        f.truncate(10**10)
    order = block_order.BlockOrder(Corpus([tmp_path]), 0)
    n = -(-(10**10) // block_order.BLOCK_BYTES)
    assert len(order) == n == 610_352
    assert order.file.nbytes + order.part.nbytes + order.stratum.nbytes == 16 * n
    assert np.array_equal(np.sort(order.part), np.arange(n))
    assert order.strata == ["en"] and order.units_in.tolist() == [n]  # one file, one stratum
    k = int(np.flatnonzero(order.part == n - 1)[0])
    assert order.unit(k) == block_order.Unit(0, (n - 1) * block_order.BLOCK_BYTES, 10**10)


def test_languages_are_dealt_in_turn_each_in_its_own_random_order(corpus_dir, tmp_path):
    """Files naming two languages (ru.txt, bn.jsonl: 1,000-byte blocks, so ru has more):
    the order deals them in turn (after any prefix, the two have had as many blocks, or one
    more, until the smaller one runs out), each language's blocks are all there once in a
    seeded random order, and a language in `done` gives no more batches."""
    order = block_order.BlockOrder(Corpus([corpus_dir]), 5)
    assert order.strata == ["bn", "ru"]
    sizes = [corpus_dir.joinpath(n).stat().st_size for n in ("bn.jsonl", "ru.txt")]
    units = [-(-size // block_order.BLOCK_BYTES) for size in sizes]
    assert order.units_in.tolist() == units and units[0] < units[1]
    seen = np.zeros(2, np.int64)
    for h in order.stratum.tolist():
        seen[h] += 1
        if seen[0] < units[0]:
            assert abs(seen[0] - seen[1]) <= 1
    for h, name in enumerate(order.strata):
        mine = order.stratum == h
        assert {order.corpus.files[i].lang for i in order.file[mine]} == {name}
        assert sorted(order.part[mine].tolist()) == list(range(units[h]))
    again = block_order.BlockOrder(Corpus([corpus_dir]), 5)
    assert np.array_equal(again.part, order.part) and np.array_equal(again.file, order.file)
    other = block_order.BlockOrder(Corpus([corpus_dir]), 6)
    assert not np.array_equal(other.part[other.stratum == 1], order.part[order.stratum == 1])
    # ru closed before reading: only bn's documents, and only bn's blocks drawn
    order.done.add(1)
    langs = {lang for b in order.doc_batches(64, 1 << 18) for lang in b.langs}
    assert langs == {"bn"} and set(order.stratum[order.drawn].tolist()) == {0}
    assert len(order.drawn) == units[0] and order.batch_last[-1]


def test_one_language_keeps_the_plain_permutation(tmp_path):
    """One language (or labels read from records) is one stratum: the order is numpy's
    permutation of the seed, as before the strata."""
    (tmp_path / "en.txt").write_bytes(b"x\n" * 50_000)
    order = block_order.BlockOrder(Corpus([tmp_path]), 3)
    n = -(-100_000 // block_order.BLOCK_BYTES)
    assert order.part.tolist() == np.random.default_rng(3).permutation(n).tolist()


def test_a_units_last_batch_is_marked(corpus_dir):
    """`batch_last` marks the batch a unit ends with, and only it (batches of 2 documents:
    units span several), so the stopper closes a block when its last batch is measured."""
    order = block_order.BlockOrder(Corpus([corpus_dir]), 5)
    n = sum(1 for _ in order.doc_batches(2, 1 << 18))
    units = order.batch_unit
    assert n == len(units) == len(order.batch_last) and len(set(units)) < n
    for i, k in enumerate(units):
        assert order.batch_last[i] == (i + 1 == n or units[i + 1] != k), i
