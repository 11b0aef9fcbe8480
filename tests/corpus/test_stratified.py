"""--max-docs draws a stratified sample across every file and language (fertility/corpus/
stratify.py), on real text: slices of the 13 real-world text files, of very different sizes,
some split over several files under a language folder.

Expected values come from a second method: the documents are counted here from the files'
bytes (lines that are not blank), their keys computed here from the documented definition
(tests.corpus.test_corpus.hash_key), and the exact shares from those counts.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from fertility.corpus import Corpus, stratify
from tests.corpus.test_corpus import hash_key
from tests.realworld.conftest import rw  # noqa: F401 (fixture)

# Lines taken from each language's file: from 1,200 to 5, so shares run from 24% to 0.1%.
SIZES = [1200, 1000, 800, 600, 450, 350, 250, 150, 100, 60, 30, 12, 5]
SPLIT = {"bn", "hi"}  # written as <lang>/part-1.txt and <lang>/part-2.txt: a folder's label


@pytest.fixture(scope="module")
def folder(rw, tmp_path_factory):  # noqa: F811 (the rw fixture)
    """The folder, and {language: [(path relative to it, line), ...]} counted directly."""
    root = tmp_path_factory.mktemp("strat")
    places: dict[str, list[tuple[str, int]]] = {}
    for lang_file, n in zip(sorted((rw / "text").glob("*.txt")), SIZES):
        lang = lang_file.stem
        lines = lang_file.read_bytes().split(b"\n")[:n]
        parts = [lines[: n // 3], lines[n // 3 :]] if lang in SPLIT else [lines]
        for i, part in enumerate(parts, 1):
            rel = f"{lang}/part-{i}.txt" if lang in SPLIT else f"{lang}.txt"
            (root / rel).parent.mkdir(exist_ok=True)
            (root / rel).write_bytes(b"\n".join(part) + b"\n")
            # the documented rule: lines end at \n, \r\n or \r; a blank line is no document
            text = (root / rel).read_text("utf-8")
            numbered = enumerate(re.split(r"\r\n|\r|\n", text.removesuffix("\n")), 1)
            places.setdefault(lang, []).extend((rel, k) for k, t in numbered if t.strip())
    return root, places


def drawn(root, **options) -> tuple[dict[str, list[tuple[str, int]]], dict]:
    """The documents a Corpus gives out, per language, as (relative path, line); summary."""
    corpus = Corpus([str(root)], **options)
    got: dict[str, list[tuple[str, int]]] = {}
    for doc in corpus.documents():
        rel = doc.source[len(str(root)) + 1 :]
        got.setdefault(doc.lang, []).append((rel, doc.line))
    return got, corpus.summary()


def expected(places, wanted: int, seed: int, sample: float | None = None):
    """Per language: the exact share of `wanted` and the smallest keys among the documents
    --sample keeps (all without it)."""
    if sample is not None:
        cut = int(sample * 2**64)
        places = {g: [p for p in ps if hash_key(seed, *p) < cut] for g, ps in places.items()}
    total = sum(map(len, places.values()))
    shares = {g: wanted * len(ps) / total for g, ps in places.items()}
    ranked = {g: sorted(ps, key=lambda p: hash_key(seed, *p)) for g, ps in places.items()}
    return shares, ranked


@pytest.mark.parametrize("wanted, seed", [(300, 0), (1000, 7)])
def test_each_language_gets_its_share_within_one_document(folder, wanted, seed):
    root, places = folder
    got, summary = drawn(root, max_docs=wanted, seed=seed)
    shares, ranked = expected(places, wanted, seed)
    assert len(places) == 13 and sum(len(v) for v in got.values()) == wanted
    for g, share in shares.items():
        kept = got.get(g, [])
        # largest remainder: the floor or the ceiling of the exact share
        assert abs(len(kept) - share) < 1, (g, len(kept), share)
        assert kept, g  # even the 5-line language (0.1%: 0.3 and 1 document)
        assert sorted(kept) == sorted(ranked[g][: len(kept)]), g  # its smallest keys
    subset = summary["subset"]
    assert subset["method"] == "stratified" and str(wanted) in subset["statement"]
    assert {g: v["seen"] for g, v in subset["languages"].items()} == {
        g: len(ps) for g, ps in places.items()
    }
    assert {g: v["kept"] for g, v in subset["languages"].items()} == {
        g: len(v) for g, v in got.items()
    }
    assert all(v["target"] == pytest.approx(shares[g]) for g, v in subset["languages"].items())
    assert summary["documents_seen"] == sum(map(len, places.values()))


def test_same_seed_same_sample_other_seed_other_sample(folder):
    root, places = folder
    first, _ = drawn(root, max_docs=300, seed=0)
    assert drawn(root, max_docs=300, seed=0)[0] == first
    other, _ = drawn(root, max_docs=300, seed=1)
    assert other != first
    assert {g: len(v) for g, v in other.items()} == {g: len(v) for g, v in first.items()}


def test_sample_and_max_docs_is_stratified_within_the_sample(folder):
    root, places = folder
    got, summary = drawn(root, max_docs=300, seed=3, sample=0.4)
    shares, ranked = expected(places, 300, 3, sample=0.4)
    for g, share in shares.items():
        kept = got.get(g, [])
        assert abs(len(kept) - share) < 1 and kept, (g, len(kept), share)
        assert sorted(kept) == sorted(ranked[g][: len(kept)]), g  # among the sampled
    subset = summary["subset"]["languages"]
    assert {g: v["sampled"] for g, v in subset.items()} == {g: len(ranked[g]) for g in places}


def test_the_selection_does_not_depend_on_the_memory_bound(folder, monkeypatch):
    # A floor of 1 key per language and a pool of N/4 keys leave languages short after the
    # key pass: the second pass draws them, and the documents are the same.
    root, _ = folder
    want, _ = drawn(root, max_docs=500, seed=2)
    monkeypatch.setattr(stratify, "FLOOR", 1)
    monkeypatch.setattr(stratify, "SPARE", 0.25)
    corpus = Corpus([str(root)], max_docs=500, seed=2)
    got: dict[str, list] = {}
    for doc in corpus.documents():
        got.setdefault(doc.lang, []).append((doc.source[len(str(root)) + 1 :], doc.line))
    assert got == want
    assert corpus.summary()["subset"]["key_passes"] == 2


def test_allocate_by_hand():
    # 10 of {a: 97, b: 2, c: 1}: exact 9.7, 0.2, 0.1; floors 9, 0, 0 and one seat left,
    # which goes to a language that has none (b, the larger remainder of those), not to a
    assert stratify.allocate({"a": 97, "b": 2, "c": 1}, 10, 0) == {"a": 9, "b": 1, "c": 0}
    # 6 of {a: 4, b: 4, c: 4}: exactly 2 each, nothing left to round
    assert stratify.allocate({"a": 4, "b": 4, "c": 4}, 6, 0) == {"a": 2, "b": 2, "c": 2}
    # 5 of {a: 5, b: 3, c: 2}: exact 2.5, 1.5, 1; one seat for a or b, by the seed
    for seed in range(4):
        got = stratify.allocate({"a": 5, "b": 3, "c": 2}, 5, seed)
        assert got in ({"a": 3, "b": 1, "c": 1}, {"a": 2, "b": 2, "c": 1})
    assert stratify.allocate({"a": 5, "b": 3}, 8, 0) == {"a": 5, "b": 3}


def test_report_max_docs_end_to_end(folder, run):
    root, places = folder
    code, out, err = run(
        "report",
        root,
        "--max-docs",
        200,
        "--pretokenizers",
        "whitespace",
        "--no-diagnose",
        "--format",
        "json",
        "-q",
    )
    assert code == 0, err
    corpus = json.loads(out)["corpus"]
    total = sum(map(len, places.values()))
    kept = Counter({g: v["kept"] for g, v in corpus["subset"]["languages"].items()})
    assert corpus["documents"] == sum(kept.values()) == 200 and len(+kept) == 13
    assert all(abs(kept[g] - 200 * len(ps) / total) < 1 for g, ps in places.items())
