"""A command resolves each corpus path it is given once: it makes one Corpus and hands it down.
The progress line's total, the measuring pass (--precision and --workers included) and the
second pass of fix over a corpus too big to keep all read that Corpus's files; the paths are
never walked again. Counted where a named path is resolved (corpus.walk.Walk.resolve), with
the progress lines on (a terminal: tests/report/test_progress.py's Tty)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fertility.cli import cli
from fertility.corpus import CorpusOptions, sampling
from fertility.corpus import walk as walk_module
from fertility.extend import extend
from fertility.fix import fix
from fertility.fix.config import FixConfig
from fertility.gate import gate_run
from fertility.measure import analyze
from fertility.progress import Stages
from tests.bpe import byte_level_bpe
from tests.fix.test_fix import write_corpus
from tests.report.test_progress import Tty


@pytest.fixture
def resolved(monkeypatch) -> list[str]:
    """The paths Walk.resolve is called with, in this process, in order."""
    calls: list[str] = []
    real = walk_module.Walk.resolve

    def counted(self, path: str) -> None:
        calls.append(str(path))
        real(self, path)

    monkeypatch.setattr(walk_module.Walk, "resolve", counted)
    return calls


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("once") / "corpus", lines=60, words=40)


@pytest.fixture(scope="module")
def tokenizer(corpus, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    texts = [t for f in sorted(corpus.glob("*.txt")) for t in f.read_text("utf-8").splitlines()]
    byte_level_bpe(texts, 400, path=path)
    return path


def test_report_resolves_the_corpus_once(corpus, resolved):
    result = CliRunner().invoke(cli, ["report", str(corpus), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert resolved == [str(corpus)]


def test_gate_resolves_the_corpus_once_and_its_progress_has_the_total(
    corpus, tokenizer, resolved, monkeypatch
):
    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    gate_run([corpus], str(tokenizer), quiet=False)
    assert resolved == [str(corpus)]
    size = sum(f.stat().st_size for f in corpus.glob("*.txt"))  # a second way to the total
    assert f" of {size / 1e6:,.1f} MB" in err.getvalue()


@pytest.mark.parametrize(
    "options, workers",
    [(CorpusOptions(precision=0.5), None), (CorpusOptions(), 2), (CorpusOptions(), None)],
)
def test_analyze_resolves_the_corpus_once_in_this_process(corpus, resolved, options, workers):
    seen = []
    analyze([corpus], pretokenizers=["gpt2"], corpus_options=options, workers=workers,
            on_corpus=seen.append)  # fmt: skip
    assert resolved == [str(corpus)]
    assert [c.paths for c in seen] == [[str(corpus)]]


@pytest.mark.parametrize("keep_chars", [None, 0])  # 0: read twice, not kept in memory
def test_fix_resolves_the_corpus_once(corpus, resolved, tmp_path, monkeypatch, keep_chars):
    if keep_chars is not None:
        monkeypatch.setattr(sampling, "KEEP_CHARS", keep_chars)
    out = tmp_path / "out"
    fix([str(corpus)], out, FixConfig(vocab_size=400), progress=Stages(stream=Tty()))
    # the corpus once; then the held-out files, which fix measures as a corpus of their own
    heldout = sorted(str(p) for p in (out / "heldout").glob("*.jsonl"))
    assert resolved == [str(corpus), *heldout]


def test_extend_resolves_the_corpus_once(corpus, tokenizer, resolved, tmp_path):
    out = tmp_path / "out"
    extend(str(tokenizer), [str(corpus)], out, 10, langs=["bn"], progress=Stages(stream=Tty()))
    assert resolved[0] == str(corpus) and str(corpus) not in resolved[1:]
    assert all(Path(p).parent == out / "heldout" for p in resolved[1:])


@pytest.mark.parametrize("injected", [False, True])
def test_pretrain_resolves_the_corpus_once(corpus, tokenizer, resolved, tmp_path, injected):
    """The gate measures the corpus and tokenizing reads the same Corpus; with a gate of its
    own (injected: it reads no corpus) tokenizing makes the one Corpus itself."""
    from fertility.trainer.options import PretrainOptions
    from fertility.trainer.run import pretrain
    from tests.trainer.tokfixture import PassingGate

    settings = {"seq_len": 32, "micro_batch": 2, "warmup_steps": 1, "tokenize_workers": 1,
                "heldout_fraction": 0.2, "checkpoint_every": 1000}  # fmt: skip
    options = PretrainOptions([str(corpus)], str(tokenizer), tmp_path / "run", preset="tiny",
                              steps=1, device="cpu", quiet=True, force=True, settings=settings)  # fmt: skip
    pretrain(options, gate=(lambda p, t: PassingGate()) if injected else None)
    assert resolved == [str(corpus)]
    assert (tmp_path / "run/data/index.json").is_file()  # the corpus was tokenized
