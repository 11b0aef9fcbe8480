"""The pass's encoding threads (fertility.measure.passes._encoded, fertility.threads
.encoding_threads): batches come back in order whatever thread encoded them, no more than
workers + 1 ahead of the measuring thread, an error or an early stop leaves no thread
behind, and a report is the same on one encoding thread as on three, on real text with
real tokenizers of three libraries."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

import pytest

from fertility import threads
from fertility.measure import analyze
from fertility.measure.passes import _encoded
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)


def _encoders_alive() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("fertility-encode")]


def _source(n: int, pulled: list[int]):
    for i in range(n):
        pulled.append(i)
        yield i


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_batches_come_back_in_order_and_at_most_workers_plus_one_ahead(workers):
    rng = random.Random(workers)
    delays = [rng.random() * 0.004 for _ in range(40)]  # later batches often finish first
    pulled: list[int] = []

    def encode(i):
        time.sleep(delays[i])
        return i * i

    got = []
    for i, enc in _encoded(_source(40, pulled), encode, workers):
        got.append((i, enc))
        # what was taken from the source: this batch, and at most workers + 1 after it
        assert len(pulled) <= i + 1 + workers + 1
    assert got == [(i, i * i) for i in range(40)]
    assert not _encoders_alive()


def test_batches_another_process_owns_are_passed_on_unencoded():
    seen: list[int] = []

    def encode(i):
        seen.append(i)
        return -i

    got = list(_encoded(_source(10, []), encode, 2, owned=lambda i: i % 3 == 0))
    assert got == [(i, -i if i % 3 == 0 else None) for i in range(10)]
    assert sorted(seen) == [0, 3, 6, 9]


def test_an_error_in_encode_is_raised_to_the_consumer_and_no_thread_is_left():
    def encode(i):
        if i == 5:
            raise ValueError("bad batch 5")
        time.sleep(0.001)
        return i

    got = []
    with pytest.raises(ValueError, match="bad batch 5"):
        for i, _ in _encoded(_source(50, []), encode, 2):
            got.append(i)
    assert got == [0, 1, 2, 3, 4]
    assert not _encoders_alive()


def test_stopping_early_cancels_what_has_not_started_and_waits_for_what_has():
    started: list[int] = []
    finished: list[int] = []

    def encode(i):
        started.append(i)
        time.sleep(0.05)
        finished.append(i)
        return i

    gen = _encoded(_source(100, []), encode, 2)
    assert next(gen) == (0, 0)
    gen.close()  # what run_pass's `closing` does on an error while measuring, or Ctrl-C
    assert not _encoders_alive()
    assert sorted(started) == sorted(finished)  # none cut off half way
    assert len(started) <= 1 + 2 + 1  # the one consumed, and at most workers + 1 ahead


def test_encoding_threads_take_the_libraries_threading_over_and_give_it_back(monkeypatch):
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "usable_cores", lambda: 3)
    split: list[int] = []

    def chunks(part):
        split.append(len(part))
        return list(part)

    with threads.encoding_threads() as n:
        assert n == 3
        assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
        assert threads.library_threads() == 1
        assert threads.by_chunks(chunks, list(range(9))) == list(range(9))
        assert split == [9]  # on the calling thread, whole
        with threads.encoding_threads() as inner:  # nested: one, nothing changed
            assert inner == 1
    assert "TOKENIZERS_PARALLELISM" not in os.environ
    assert threads.library_threads() == -1
    split.clear()
    threads.by_chunks(chunks, list(range(9)))
    assert split == [3, 3, 3]

    monkeypatch.setenv("RAYON_NUM_THREADS", "2")  # a task process's share of the cores
    with threads.encoding_threads() as n:
        assert n == 2
    monkeypatch.delenv("RAYON_NUM_THREADS")
    monkeypatch.setattr(threads, "usable_cores", lambda: 64)  # what one thread can measure
    with threads.encoding_threads() as n:
        assert n == threads.MAX_ENCODING_THREADS == 4
    for users in ("true", "false"):  # the user's choice of the libraries' threading is kept
        monkeypatch.setenv("TOKENIZERS_PARALLELISM", users)
        with threads.encoding_threads() as n:
            assert n == 1
            assert os.environ["TOKENIZERS_PARALLELISM"] == users
            assert threads.library_threads() == -1


@pytest.fixture(scope="module")
def corpus(rw, tmp_path_factory) -> Path:  # noqa: F811
    root = tmp_path_factory.mktemp("passes")
    for lang in ("en", "ru", "bn", "hi", "ja"):
        lines = (rw / "text" / f"{lang}.txt").read_text(encoding="utf-8").splitlines()[:150]
        (root / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.mark.realworld
def test_a_report_is_the_same_on_one_encoding_thread_as_on_three(rw, corpus, monkeypatch):  # noqa: F811
    """HF tokenizers, tiktoken and SentencePiece, 40 documents a batch (about 19 batches):
    the rows and the per-document table do not depend on which thread encoded a batch; with
    three, encodes ran on more than one thread, each with the libraries' threads off."""
    pytest.importorskip("tiktoken")
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    toks = [
        str(rw / "tokenizers" / "bpe-gpt2"),
        str(rw / "tokenizers" / "o200k_base.tiktoken"),
        str(rw / "tokenizers" / "mistral" / "tokenizer.model.v1"),
    ]
    from fertility.tokenizers import load_tokenizer_arg

    loaded = [load_tokenizer_arg(t) for t in toks]
    names: set[str] = set()
    env: set[str | None] = set()
    for tok in loaded:
        encode = tok.encode_flat

        def spy(texts, encode=encode):
            names.add(threading.current_thread().name)
            env.add(os.environ.get("TOKENIZERS_PARALLELISM"))
            return encode(texts)

        monkeypatch.setattr(tok, "encode_flat", spy)

    def report(cores: int):
        monkeypatch.setattr(threads, "usable_cores", lambda: cores)
        names.clear()
        rep = analyze([corpus], loaded, batch_size=40, workers=1)
        return rep, set(names)

    one, one_names = report(1)
    three, three_names = report(3)
    assert len(one_names) == 1 and len(three_names) > 1
    assert env == {"false"}
    assert json.dumps(one.table) == json.dumps(three.table)  # (NaN where no value: as text)
    assert one.frame.equals(three.frame)
    assert one.docs.equals(three.docs)


@pytest.fixture
def long_corpus(rw, tmp_path):  # noqa: F811
    """Real lines of six languages, 12 to a document, 600 lines a language."""
    root = tmp_path / "long"
    root.mkdir()
    for lang in ("en", "ru", "bn", "hi", "ja", "te"):
        lines = (rw / "text" / f"{lang}.txt").read_text(encoding="utf-8").splitlines()[:600]
        docs = [" ".join(lines[i : i + 12]) for i in range(0, len(lines), 12)]
        (root / f"{lang}.txt").write_text("\n".join(docs) + "\n", encoding="utf-8")
    return root


@pytest.mark.realworld
def test_pre_tokens_read_off_the_encode_give_the_report_pre_tokenize_gives(
    rw,  # noqa: F811
    long_corpus,
    monkeypatch,
):
    """The detail documents are planned as the batches are read (DetailPlan), and the HF
    tokenizers' pre-tokens read off their encode and their texts decoded on the encoding
    threads: the plan is measure_batch's own choice, batch by batch, every checked document
    of MiniLM and the byte-level BPE got its pre-tokens and decoded text that way, and the
    report is the one where the measuring thread calls pre_tokenize and decode for every
    tokenizer (the second method), with --detail at its default and at 10 documents."""
    from fertility.measure import batch as B
    from fertility.measure import passes
    from fertility.measure.batch import PlanState
    from fertility.tokenizers import load_tokenizer_arg

    toks = [
        load_tokenizer_arg(str(rw / "tokenizers" / name))
        for name in ("minilm/tokenizer.json", "bpe-o200k/tokenizer.json", "o200k_base.tiktoken")
    ]
    decodes: dict[str, int] = {}  # the measuring thread's decodes of a document (not one id)
    for tok in toks:

        def decode(ids, tok=tok, plain=tok.decode):
            if len(ids) > 1:
                decodes[tok.label] = decodes.get(tok.label, 0) + 1
            return plain(ids)

        monkeypatch.setattr(tok, "decode", decode)
    masks: dict[str, list] = {"plan": [], "measure": []}
    came: dict[str, list[int]] = {}
    mask_of, spans_of = B._detail_mask, B._pre_token_spans

    def mask_spy(texts, doc_lang, batch_langs, state):
        got = mask_of(texts, doc_lang, batch_langs, state)
        masks["plan" if isinstance(state, PlanState) else "measure"].append(got.tolist())
        return got

    def spans_spy(tok, texts, docs, pre):
        had = set() if pre is None else set(pre.docs.tolist())
        tally = came.setdefault(tok.label, [0, 0])
        for i in docs.tolist():
            tally[0 if i in had else 1] += 1
        return spans_of(tok, texts, docs, pre)

    monkeypatch.setattr(B, "_detail_mask", mask_spy)
    monkeypatch.setattr(B, "_pre_token_spans", spans_spy)
    for detail in (200, 10):
        masks["plan"].clear(), masks["measure"].clear(), came.clear(), decodes.clear()
        ours = analyze([long_corpus], toks, batch_size=7, workers=1, detail_docs=detail)
        assert masks["plan"] == masks["measure"] and len(masks["plan"]) > 20
        assert came["minilm"][1] == came["bpe-o200k"][1] == 0 < came["minilm"][0]
        assert came["o200k_base"][0] == 0  # a rank file: pre_tokenize
        assert "minilm" not in decodes and "bpe-o200k" not in decodes and decodes["o200k_base"]
        with monkeypatch.context() as m:
            m.setattr(
                passes, "encode_checked", lambda tok, texts, checked: (tok.encode_flat(texts), None)
            )
            theirs = analyze([long_corpus], toks, batch_size=7, workers=1, detail_docs=detail)
        assert came["minilm"][1] > 0 and decodes["minilm"]  # the second run: pre_tokenize, decode
        assert json.dumps(ours.table) == json.dumps(theirs.table)
        assert ours.frame.equals(theirs.frame)


@pytest.mark.realworld
def test_a_plan_that_misses_checked_documents_changes_no_count(rw, long_corpus, monkeypatch):  # noqa: F811
    """measure_batch decides which documents are checked; what the encoding threads bring
    for documents it does not check is not read, and a checked document they brought nothing
    for gets pre_tokenize and decode on the measuring thread (a plan that misses: a batch the
    pass skips, --precision). A plan with every other document flipped gives the report of
    one with no plan at all."""
    import numpy as np

    from fertility.measure import batch as B
    from fertility.measure import passes

    toks = [
        str(rw / "tokenizers" / "minilm" / "tokenizer.json"),
        str(rw / "tokenizers" / "bpe-o200k" / "tokenizer.json"),
    ]
    with monkeypatch.context() as m:
        m.setattr(
            passes, "encode_checked", lambda tok, texts, checked: (tok.encode_flat(texts), None)
        )
        plain = analyze([long_corpus], toks, batch_size=7, workers=1)

    class Flipped(B.DetailPlan):
        def __call__(self, batch):
            mask = super().__call__(batch)
            return mask ^ (np.arange(len(mask)) % 2 == 0)

    monkeypatch.setattr(passes, "DetailPlan", Flipped)
    flipped = analyze([long_corpus], toks, batch_size=7, workers=1)
    assert json.dumps(plain.table) == json.dumps(flipped.table)
    assert plain.frame.equals(flipped.frame)
