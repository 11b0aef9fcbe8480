"""The progress lines of gate, fix and extend on real text and real tokenizers: a percentage
and an ETA for their passes over the corpus and for feeding fix's trainer, the time so far
(and why no percentage) while a trainer works, and nothing when quiet or off a terminal.

A terminal is a StringIO whose isatty() says yes (tests/report/test_progress.py's Tty):
fertility.progress asks the stream only that."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from fertility.corpus import Corpus
from fertility.corpus.sampling import scan_corpus
from fertility.extend import extend
from fertility.fix import fix
from fertility.fix.config import FixConfig
from fertility.gate import gate_run
from fertility.progress import Progress, Stages, reading
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)
from tests.report.test_progress import Tty, lines

pytestmark = pytest.mark.realworld

LINES = 150  # per language: enough for a held-out split, small enough for a fast training
GPT2 = "tokenizers/bpe-gpt2/tokenizer.json"
PERCENT = r"\d{1,2}%, ETA \d+:\d\d"


@pytest.fixture(scope="module")
def corpus(rw, tmp_path_factory) -> Path:  # noqa: F811
    folder = tmp_path_factory.mktemp("corpus")
    for lang in ("bn", "en"):
        keep = (rw / "text" / f"{lang}.txt").read_text(encoding="utf-8").splitlines()[:LINES]
        (folder / f"{lang}.txt").write_text("\n".join(keep) + "\n", encoding="utf-8")
    return folder


def test_reading_counts_the_corpus_bytes(corpus):
    # second method: a line-per-document file is its documents' UTF-8 bytes plus one
    # newline per line (no \r in these files: checked)
    files = sorted(corpus.glob("*.txt"))
    raw = [f.read_bytes() for f in files]
    assert not any(b"\r" in r for r in raw)
    expected = sum(len(r) - r.count(b"\n") for r in raw)
    prog = Progress("reading", total_bytes=sum(map(len, raw)), stream=Tty())
    scan_corpus(Corpus([str(corpus)]), False, inspect=reading(prog))
    assert (prog.docs, prog.bytes) == (2 * LINES, expected)
    assert reading(Progress("x", stream=Tty(), quiet=True)) is None  # no cost when silent


def test_gate_shows_its_share_of_the_corpus(rw, corpus, monkeypatch):  # noqa: F811
    for quiet in (False, True):
        err = Tty()
        monkeypatch.setattr(sys, "stderr", err)
        gate_run([corpus], str(rw / GPT2), quiet=quiet)
        shown = lines(err)
        if quiet:
            assert shown == []
        else:
            assert re.match(rf"measuring: {PERCENT}, ", shown[0]), shown
            assert shown[-1].startswith(f"measuring: {2 * LINES} documents")


def test_gate_off_a_terminal_prints_no_progress(rw, corpus, run):  # noqa: F811
    code, out, err = run("gate", corpus, "-t", rw / GPT2)
    assert code in (0, 1) and out  # a verdict either way: the gate's exit codes
    assert "measuring" not in err and "ETA" not in err


def test_fix_shows_reading_and_feeding_with_eta_then_the_trainer_time(corpus, tmp_path):
    err = Tty()
    fix([str(corpus)], tmp_path / "out", FixConfig(vocab_size=400), progress=Stages(stream=err))
    shown = lines(err)
    assert any(re.match(rf"fix: reading: {PERCENT}, ", x) for x in shown), shown
    assert any(re.match(rf"fix: feeding the trainer: {PERCENT} \(", x) for x in shown), shown
    trainer = [x for x in shown if x.startswith("fix: training: ")]
    assert re.fullmatch(
        r"fix: training: \d+:\d\d so far \(no percentage: the trainer reports no progress\)",
        trainer[0],
    )
    assert re.fullmatch(r"fix: training: done in \d+:\d\d", trainer[-1])


def test_extend_shows_reading_with_eta_then_the_learning_time(rw, corpus, tmp_path):  # noqa: F811
    err = Tty()
    extend(
        str(rw / GPT2),
        [str(corpus)],
        tmp_path / "out",
        20,
        langs=["bn"],
        progress=Stages(stream=err),
    )
    shown = lines(err)
    assert any(re.match(rf"extend: reading: {PERCENT}, ", x) for x in shown), shown
    learning = [x for x in shown if x.startswith("extend: learning: ")]
    assert learning[0].endswith("so far (no percentage: the trainer reports no progress)")
    assert re.fullmatch(r"extend: learning: done in \d+:\d\d", learning[-1])
