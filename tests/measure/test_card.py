"""The token-distribution metrics (fertility.measure.card, the registry's DISTRIBUTIONS), the
vocabulary's scripts, the languages' Gini and overlap, the report JSON's verdict and the
leaderboard, each against a second computation: the tokenizer's own library (tiktoken,
sentencepiece, tokenizers) on real parallel text, plain Python arithmetic, scipy, and
`fertility gate --format json`."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import regex
import sentencepiece
import tiktoken
import tiktoken.load
import tokenizers
from scipy.spatial.distance import jensenshannon

from fertility import unicode as U
from fertility.gate import verdicts
from fertility.measure import analyze, card
from fertility.measure.metrics import DISTRIBUTIONS
from fertility.measure.parity import Premiums
from fertility.policy import default_policy
from fertility.report import leaderboard
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)
from tests.realworld.test_counts import openai_pattern

pytestmark = pytest.mark.realworld

LANGS = ("en", "hi", "ru", "zh")  # four scripts: Latin, Devanagari, Cyrillic, Han
LINES = 40  # of each parallel file: enough aligned lines for the premium table (10)
TOKS = {
    "cl100k": "cl100k_base.tiktoken",
    "mistral": "mistral/tokenizer.model.v1",
    "gpt2": "bpe-gpt2/tokenizer.json",
}


@pytest.fixture(scope="module")
def texts(rw, tmp_path_factory):  # noqa: F811
    corpus = tmp_path_factory.mktemp("card") / "parallel"
    corpus.mkdir()
    out = {}
    for lang in LANGS:
        lines = (rw / "parallel" / f"{lang}.txt").read_text("utf-8").splitlines()[:LINES]
        assert all(x.strip() for x in lines)  # every line a document: aligned by number
        (corpus / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        out[lang] = lines
    return corpus, out


@pytest.fixture(scope="module")
def libraries(rw, monkeypatch_module):  # noqa: F811
    """label -> (encode one text to ids, vocabulary size), from each library itself."""
    path = rw / "tokenizers"
    ranks = tiktoken.load.load_tiktoken_bpe(str(path / TOKS["cl100k"]))
    pat = openai_pattern("cl100k_base", ranks, monkeypatch_module)
    enc = tiktoken.Encoding("cl100k", pat_str=pat, mergeable_ranks=ranks, special_tokens={})
    sp = sentencepiece.SentencePieceProcessor(model_file=str(path / TOKS["mistral"]))
    hf = tokenizers.Tokenizer.from_file(str(path / TOKS["gpt2"]))
    return {
        "cl100k": (enc.encode_ordinary, enc.n_vocab),
        "mistral": (sp.encode, sp.get_piece_size()),
        "gpt2": (
            lambda t: hf.encode(t, add_special_tokens=False).ids,
            hf.get_vocab_size(with_added_tokens=True),
        ),
    }


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def report(rw, texts):  # noqa: F811
    specs = [f"{label}={rw / 'tokenizers' / name}" for label, name in TOKS.items()]
    rep = analyze([texts[0]], specs, workers=1)
    # the files are GTK messages translated line by line: declared so (--parallel)
    rep.policy = dataclasses.replace(default_policy(), parallel=True)
    # the JSON's verdicts are the judging side's to set, as `fertility report` does
    rep.verdicts = verdicts(rep, rep.policy)
    return rep


@pytest.fixture(scope="module")
def out(report):
    """The report JSON's object (its card: scripts, Gini, overlap, verdict per tokenizer)."""
    return report.to_dict()


def _reference(counts: Counter, vocab: int) -> dict:
    """The five metrics from a Counter of ids, in plain Python floats."""
    n = sum(counts.values())
    ps = [c / n for c in counts.values()]
    return {
        "renyi_efficiency": math.log2(math.fsum(p**2.5 for p in ps)) / (1 - 2.5) / math.log2(vocab),
        "shannon_efficiency": -math.fsum(p * math.log2(p) for p in ps) / math.log2(vocab),
        "unique_tokens": len(counts),
        "vocab_utilisation": len(counts) / vocab,
        "avg_token_rank": sum(i * c for i, c in counts.items()) / n,
    }


@pytest.mark.parametrize("label", list(TOKS))
def test_distribution_metrics_equal_the_librarys_ids(report, texts, libraries, label):
    encode, vocab = libraries[label]
    info = next(t for t in report.tokenizers if t.label == label)
    assert info.vocab_size == vocab
    f = report.frame
    every: Counter = Counter()
    for lang, lines in texts[1].items():
        ids = Counter(i for line in lines for i in encode(line))
        every += ids
        row = f[(f.tokenizer == label) & (f.group == "language") & (f.key == lang)].iloc[0]
        want = _reference(ids, vocab)
        assert row.unique_tokens == want["unique_tokens"]  # exactly
        for name in ("renyi_efficiency", "shannon_efficiency", "vocab_utilisation"):
            # float64 sums of at most a few thousand terms, each within 1 ulp: relative error
            # well under 1e-12; 1e-9 leaves room and still catches any change of formula
            assert row[name] == pytest.approx(want[name], rel=1e-9), (lang, name)
        assert row.avg_token_rank == pytest.approx(want["avg_token_rank"], rel=1e-12)
    allrow = f[(f.tokenizer == label) & (f.group == "all")].iloc[0]
    want = _reference(every, vocab)
    assert allrow.unique_tokens == want["unique_tokens"]
    assert allrow.renyi_efficiency == pytest.approx(want["renyi_efficiency"], rel=1e-9)
    # every script row has the metrics too; its tokens are the language's (one script each)
    scripts = f[(f.tokenizer == label) & (f.group == "script")]
    assert scripts.renyi_efficiency.notna().all() and (scripts.unique_tokens > 0).all()


def test_the_registry_declares_every_distribution_card_computes():
    assert [m.name for m in DISTRIBUTIONS] == list(card.FUNCTIONS)
    assert all(m.needs_vocab and not m.numerator for m in DISTRIBUTIONS)


def test_tokenization_scorer_formula_on_a_hand_histogram():
    # Zouhar et al.'s formula as tokenization-scorer 1.1.8 writes it (metrics.py,
    # _renyi_efficiency with vocab= given): scale * log2(sum p^power) / log2(vocab)
    h = np.zeros(50, np.int64)
    h[[0, 3, 7, 49]] = [5, 1, 1, 3]
    p = np.array([5, 1, 1, 3]) / 10
    want = (1 / (1 - 2.5)) * np.log2(np.sum(p**2.5)) / np.log2(50)
    used = card.Histogram.of(h)
    assert used.ids.tolist() == [0, 3, 7, 49] and used.counts.tolist() == [5, 1, 1, 3]
    assert card.renyi_efficiency(used, 50) == pytest.approx(want, rel=1e-15)
    assert card.avg_token_rank(used, 50) == (3 + 7 + 3 * 49) / 10


_SCRIPT = regex.compile("|".join(f"(?P<{c}>\\p{{Script={c}}})" for c in U.SCRIPTS[3:]))


def _classify(text: str | None) -> str:
    """A token's class from its decoded text, one character at a time."""
    if text is None:
        return card.BYTES
    if not text:
        return card.SPECIAL
    found = {m.lastgroup for m in _SCRIPT.finditer(text)}  # Common, Inherited: no group
    return card.MIXED if len(found) > 1 else found.pop() if found else card.COMMON


def _shares(classes: list[str]) -> dict[str, float]:
    return {k: n / len(classes) for k, n in Counter(classes).items()}


def test_vocabulary_scripts_equal_a_decode_of_every_token(report, rw):  # noqa: F811
    sp = sentencepiece.SentencePieceProcessor(model_file=str(rw / "tokenizers" / TOKS["mistral"]))
    classes = []
    for i in range(sp.get_piece_size()):
        if sp.is_byte(i):
            classes.append(card.BYTES)
        elif sp.is_control(i) or sp.is_unknown(i):
            classes.append(card.SPECIAL)
        else:
            classes.append(_classify(sp.id_to_piece(i).replace("\u2581", " ")))
    info = next(t for t in report.tokenizers if t.label == "mistral")
    got = card.vocabulary_scripts(info.tokenizer)
    assert got == pytest.approx(_shares(classes), rel=1e-15)
    assert got["bytes"] == 256 / 32000 and list(got)[0] == "Latn"


def test_vocabulary_scripts_of_a_rank_file_equal_tiktoken(report, rw):  # noqa: F811
    ranks = tiktoken.load.load_tiktoken_bpe(str(rw / "tokenizers" / TOKS["cl100k"]))
    enc = tiktoken.Encoding("x", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    classes = []
    # every 7th id (14,000 tokens, a second of decoding), each id's class compared
    ids = range(0, enc.n_vocab, 7)
    for i in ids:
        data = enc.decode_single_token_bytes(i)
        try:
            classes.append(_classify(data.decode("utf-8")))
        except UnicodeDecodeError:
            classes.append(_classify(None))
    info = next(t for t in report.tokenizers if t.label == "cl100k")
    got = card.token_classes(info.tokenizer)
    assert [got[i] for i in ids] == classes


def test_gini_and_overlap_against_a_direct_computation(out, texts, libraries):
    for label, (encode, _) in libraries.items():
        entry = next(t for t in out["tokenizers"] if t["label"] == label)
        # the tokens each language needs for the same 40 lines, Gini by its double sum
        x = [sum(len(encode(line)) for line in texts[1][lang]) for lang in LANGS]
        mean = sum(x) / len(x)
        want = sum(abs(a - b) for a in x for b in x) / (2 * len(x) ** 2 * mean)
        assert entry["gini"]["basis"] == "tokens_same_lines"
        assert sorted(entry["gini"]["languages"]) == sorted(LANGS)
        # from premiums (ratios of integer sums), each within an ulp: 1e-12 is ample
        assert entry["gini"]["value"] == pytest.approx(want, rel=1e-12)
        ov = entry["overlap"]
        assert ov["languages"] == sorted(LANGS)
        for i, a in enumerate(ov["languages"]):
            for j, b in enumerate(ov["languages"]):
                ca = Counter(t for line in texts[1][a] for t in encode(line))
                cb = Counter(t for line in texts[1][b] for t in encode(line))
                ids = sorted(set(ca) | set(cb))
                js = jensenshannon([ca[t] for t in ids], [cb[t] for t in ids], base=2) ** 2
                # the JSON rounds to 6 decimals
                assert ov["matrix"][i][j] == pytest.approx(1 - js, abs=1e-6), (a, b)


def test_the_overlap_is_worked_out_only_when_read(rw, texts):  # noqa: F811
    """The table, the gate's verdicts and the frame never read the languages' overlap (a
    divergence per pair of languages); the JSON's card does,
    and gets the matrix of the histograms the report holds."""
    rep = analyze([texts[0]], [f"gpt2={rw / 'tokenizers' / TOKS['gpt2']}"], workers=1)
    verdicts(rep, default_policy())
    assert len(rep.frame) and "overlap" not in vars(rep)
    entry = rep.to_dict()["tokenizers"][0]["overlap"]
    assert "overlap" in vars(rep)
    assert entry == json.loads(json.dumps(card.overlap(rep.language_histograms["gpt2"])))


def test_gini_without_parallel_files_is_over_tokens_per_character(report):
    f = report.frame
    rows = f[(f.tokenizer == "gpt2") & (f.group == "language")]
    x = (rows.tokens / rows.chars).tolist()
    want = sum(abs(a - b) for a in x for b in x) / (2 * len(x) ** 2 * (sum(x) / len(x)))
    no_parallel = Premiums()  # an empty premium table
    got = card.language_gini(report, "gpt2", no_parallel)
    assert got["basis"] == "tokens_per_char" and got["value"] == pytest.approx(want, rel=1e-12)


def test_the_json_verdict_is_the_gates(out, texts, rw, run):  # noqa: F811
    for t in out["tokenizers"]:
        spec = f"{t['label']}={rw / 'tokenizers' / TOKS[t['label']]}"
        code, stdout, _ = run("gate", texts[0], "-t", spec, "--parallel", "--format", "json", "-q")
        gate = json.loads(stdout)
        fails = [c for c in gate["checks"] if c["verdict"] == "fail" or c["verdict"] == "uncertain"]
        v = t["verdict"]
        assert (
            (v["passed"], v["exit_code"])
            == (gate["passed"], gate["exit_code"])
            == (
                code == 0,
                code,
            )
        )
        # The default policy fails an uncertain check. Every field is equal, the premium's
        # bootstrap bounds too: each (tokenizer, language) draws from its own generator
        # (fertility.measure.parity.pair_rng), so the tokenizers beside it change nothing.
        assert v["failed_checks"] == fails
        assert v["blocking_findings"] == gate["blocking_findings"]


def test_the_leaderboard_is_the_reports_in_the_gates_order(report, out):
    md = leaderboard.render_markdown(report, report.policy)
    rows = list(csv.DictReader(io.StringIO(leaderboard.render_csv(report, report.policy))))
    entries = {t["label"]: t for t in out["tokenizers"]}
    assert [r["rank"] for r in rows] == ["1", "2", "3"] and {r["tokenizer"] for r in rows} == set(
        TOKS
    )
    for r in rows:
        entry, f = entries[r["tokenizer"]], report.frame
        allrow = f[(f.tokenizer == r["tokenizer"]) & (f.group == "all")].iloc[0]
        assert float(r["renyi_efficiency"]) == allrow.renyi_efficiency
        assert float(r["gini"]) == entry["gini"]["value"]
        assert (r["verdict"] == "FAIL") == (not entry["verdict"]["passed"])
        assert f"| {r['tokenizer']} |" in md
    # the gate's order: a passing tokenizer never below a failing one
    order = [r["verdict"] != "FAIL" for r in rows]
    assert order == sorted(order, reverse=True)


DOC = Path(__file__).resolve().parents[2] / "docs" / "METRICS.md"


def test_the_doc_defines_exactly_the_distributions():
    text = DOC.read_text("utf-8")
    m = re.search(r"(?ms)^## Token distributions\n(.*?)(?=^## )", text + "\n## ")
    assert m, "docs/METRICS.md has no 'Token distributions' section"
    section = m.group(1)
    assert re.findall(r"(?m)^### (\S+)", section) == [x.name for x in DISTRIBUTIONS]
    for x in DISTRIBUTIONS:
        body = re.search(rf"(?ms)^### {x.name}\n(.*?)(?=^### |\Z)", section).group(1)
        body = " ".join(body.split())
        assert x.formula in body and x.unit.value in body, x.name


def test_verdicts_are_each_tokenizer_evaluated_alone(report):
    """gate.verdicts evaluates every tokenizer once and splits the result
    (GateResult.only); a second method: each tokenizer evaluated alone, as before."""
    from fertility.gate import evaluate

    assert set(report.verdicts) == set(TOKS)
    for label, got in report.verdicts.items():
        alone = evaluate(report, report.policy, label=label, findings=report.findings or None)
        assert got == {
            "passed": alone.passed,
            "exit_code": alone.exit_code,
            "failed_checks": [c.to_dict() for c in alone.failing],
            "blocking_findings": [f.to_dict() for f in alone.blocking],
        }, label
    # not a comparison of empty lists: the tokenizers fail checks (each its own)
    failed = [{c["tokenizer"] for c in v["failed_checks"]} for v in report.verdicts.values()]
    assert failed == [{label} for label in report.verdicts]


def test_the_overlap_over_the_used_ids_is_the_one_over_the_whole_vocabulary():
    """overlap works each pair out over the ids some language uses; each entry is the very
    float js_divergence gives over the full histograms (the ids neither uses add nothing),
    a language without tokens is left out, and one language is its own 1. Exact equality is
    sound on any CPU: both sides divide, log and sum the same values in arrays of the same
    length on the same machine, so every operation gives the same float."""
    rng = np.random.default_rng(7)
    vocab = 200_000
    hists = {}
    for lang, n in (("a", 3000), ("b", 500), ("c", 40), ("d", 1)):
        h = np.zeros(vocab, np.int64)
        np.add.at(h, rng.integers(0, vocab, n) // 3, rng.integers(1, 50, n))
        hists[lang] = h
    hists["empty"] = np.zeros(vocab, np.int64)
    got = card.overlap(hists)
    langs = ["a", "b", "c", "d"]
    assert got["languages"] == langs
    for i, a in enumerate(langs):
        for j, b in enumerate(langs):
            js = card.js_divergence(hists[a], hists[b])  # the JSON's 6 decimals, as numpy rounds
            want = 1.0 if i == j else float(np.round(1.0 - js, 6))
            assert got["matrix"][i][j] == want, (a, b)
    assert card.overlap({"a": hists["a"]}) == {"languages": ["a"], "matrix": [[1.0]]}
    assert card.overlap({"empty": hists["empty"]}) == {"languages": [], "matrix": []}
