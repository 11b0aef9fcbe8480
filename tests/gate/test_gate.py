"""The gate: policy loading, the statistics rule, exit semantics, JUnit XML, baseline margin,
and the published case end to end (a GPT-2-style byte-level BPE fails on Bengali, the same
training with a mark-aware split passes)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fertility.errors import FertilityError, PolicyError
from fertility.gate import NEED_MORE, evaluate
from fertility.policy import Thresholds, default_policy, load_policy
from fertility.report.gate import gate_junit, gate_text
from fertility.stats import wilson
from tests.findings.test_diagnose import GPT2_CONFIG, make_report, parallel_docs, row

ROOT = Path(__file__).resolve().parents[2]


def dominant_docs(label: str, script: str, n: int, tokens=10) -> pd.DataFrame:
    """Per-document rows (for the baseline's paired bootstrap): n documents in `script`."""
    return pd.DataFrame(
        [
            dict(
                tokenizer=label,
                lang="xx",
                source=f"c/{script}.txt",
                line=i + 1,
                script=script,
                chars=40,
                graphemes=30,
                bytes=100,
                tokens=tokens,
            )
            for i in range(n)
        ]
    )


def gate(rows, policy=None, docs=None, **kw):
    rep = make_report(rows, docs=docs, configs=kw.pop("configs", None))
    return evaluate(rep, policy or default_policy(), **kw)


def beng(cpt, lo, hi, **kw):
    """A Bengali row with the given chars per token and interval (6000 chars)."""
    r = row("t", "Beng", tokens=round(6000 / cpt), **kw)
    r.update(chars_per_token=cpt, chars_per_token_lo=lo, chars_per_token_hi=hi)
    return r


# ---------------------------------------------------------------- policy


def test_default_policy_numbers():
    p = default_policy()
    assert p.floor_for("script", "Beng") == 2.5 and p.floor_for("script", "Latn") == 3.0
    assert p.floor_for("script", "Hani") == 0.9
    assert p.floor_for("script", "Xyzw") == 2.0  # the default floor
    assert p.floor_for("script", "Zyyy") is None  # exempt
    assert p.floor_for("language", "bn") is None  # languages only when named
    assert (p.byte_fallback_rate, p.unk_rate, p.premium) == (0.05, 0.005, 2.0)
    assert p.fail_on == ("error",) and p.uncertain == "fail" and p.allow_lossy is False


def test_policy_file_merges_over_the_default(tmp_path):
    f = tmp_path / "gate.toml"
    f.write_text(
        'uncertain = "pass"\n[floors.script]\nBeng = 3.2\nLatn = false\n'
        "[floors.language]\nbn = 3.0\n[ceilings]\npremium = false\n"
        "[rules]\ngrapheme_split_rate = 0.3\n"
    )
    p = load_policy(f)
    assert p.floor_for("script", "Beng") == 3.2 and p.floor_for("script", "Deva") == 2.5
    assert p.floor_for("script", "Latn") is None  # switched off, not the default floor
    assert p.floor_for("language", "bn") == 3.0
    assert p.premium is None and p.uncertain == "pass"
    assert p.thresholds.grapheme_split_rate == 0.3
    assert p.thresholds.script_floors["Beng"] == 3.2  # floors reach the ceiling rule too


def test_policy_from_pyproject_and_fertility_toml(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.fertility.gate]\nmin_documents = 3\n")
    assert load_policy(None, cwd=tmp_path).min_documents == 3
    (tmp_path / "fertility.toml").write_text("[gate]\nmin_documents = 4\n")
    assert load_policy(None, cwd=tmp_path).min_documents == 4
    empty = tmp_path / "empty"
    empty.mkdir()
    assert load_policy(None, cwd=empty) == default_policy()
    assert load_policy(tmp_path / "pyproject.toml").min_documents == 3


@pytest.mark.parametrize(
    "text, key",
    [
        ("flors = 1\n", "flors"),
        ("[floors.script]\nBeng = 'high'\n", "floors.script.Beng"),
        ("[ceilings]\nunk_rate = 2\n", "ceilings.unk_rate"),
        ("fail_on = ['fatal']\n", "fail_on"),
        ("uncertain = 'maybe'\n", "uncertain"),
        ("allow_lossy = 1\n", "allow_lossy"),
        ("[rules]\nmark_initial_rat = 0.1\n", "rules.mark_initial_rat"),
        ("[rules]\ntop_chars = 2.5\n", "rules.top_chars"),
        ("min_documents = [\n", "not valid TOML"),
    ],
)
def test_policy_errors_name_the_file_and_key(tmp_path, text, key):
    f = tmp_path / "p.toml"
    f.write_text(text)
    with pytest.raises(PolicyError) as e:
        load_policy(f)
    msg = str(e.value)
    assert str(f) in msg and key in msg and "\n" not in msg
    assert isinstance(e.value, FertilityError)


def test_missing_policy_file_is_an_error(tmp_path):
    with pytest.raises(PolicyError, match="no such policy file"):
        load_policy(tmp_path / "nope.toml")


# ---------------------------------------------------------------- the statistics rule


def test_interval_wholly_below_the_floor_fails():
    res = gate([beng(1.4, 1.35, 1.45)])
    (c,) = [c for c in res.checks if c.name == "chars_per_token"]
    assert (c.verdict, c.value, c.lo, c.hi, c.threshold) == ("fail", 1.4, 1.35, 1.45, 2.5)
    assert not res.passed and res.exit_code == 1


def test_interval_wholly_above_the_floor_passes():
    res = gate([beng(3.0, 2.8, 3.2)])
    assert [c.verdict for c in res.checks] == ["pass"] * len(res.checks)
    assert res.passed and res.exit_code == 0


def test_straddling_interval_is_uncertain_and_fails_unless_the_policy_says_pass():
    rows = [beng(2.5, 2.3, 2.7)]
    res = gate(rows)
    (c,) = [c for c in res.checks if c.name == "chars_per_token"]
    assert c.verdict == "uncertain" and res.exit_code == 1
    assert NEED_MORE in gate_text(res)
    lenient = dataclasses.replace(default_policy(), uncertain="pass")
    assert gate(rows, lenient).exit_code == 0


def test_too_few_documents_is_uncertain_and_a_stray_script_is_skipped():
    few = gate([beng(3.0, 2.8, 3.2, documents=4)])
    assert {c.verdict for c in few.checks} == {"uncertain"} and few.exit_code == 1
    assert "4 documents" in few.checks[0].note
    # Greek: 40 characters (0.7%) in a 6000-character Bengali corpus
    stray = gate([beng(3.0, 2.8, 3.2), row("t", "Grek", chars=40, tokens=30, nbytes=80)])
    assert stray.passed and [s["key"] for s in stray.skipped] == ["Grek"]


def wilson_by_bisection(k, n, z=1.959964):
    """The score interval as the two roots of |p_hat - p| = z sqrt(p(1-p)/n), numerically."""
    p_hat = k / n
    g = lambda p: abs(p_hat - p) - z * math.sqrt(p * (1 - p) / n)  # noqa: E731

    def root(a, b):  # g(a) and g(b) of opposite signs
        for _ in range(200):
            m = (a + b) / 2
            a, b = (m, b) if (g(a) > 0) == (g(m) > 0) else (a, m)
        return (a + b) / 2

    lo = 0.0 if k == 0 else root(0.0, p_hat)
    hi = 1.0 if k == n else root(p_hat, 1.0)
    return lo, hi


@pytest.mark.parametrize("k, n", [(50, 1000), (0, 2000), (3, 40), (900, 1000)])
def test_wilson_interval_matches_a_second_method(k, n):
    # Both in float64: the closed form rounds a dozen operations (~1e-16), the bisection
    # converges to the last bit; what is left is the bisection's z, 1.959964 against Z95 =
    # 1.95996398454, 1.5e-8 apart, which moves a bound by 1.5e-8 x sqrt(p(1-p)/n) <= 1.3e-9
    # (measured: 1.3e-9 at (3, 40)). abs=1e-7 leaves 80x; a Wald interval instead of Wilson
    # is off by 1e-3 and more, and z rounded to 1.96 by up to 3e-6 (at (3, 40)).
    assert wilson(k, n) == pytest.approx(wilson_by_bisection(k, n), abs=1e-7)


def test_byte_fallback_ceiling_uses_the_wilson_interval():
    # 8% of 2000 tokens: Wilson [0.069, 0.093], wholly above 5%
    bad = gate([beng(3.0, 2.8, 3.2, fallback=160)])
    (c,) = [c for c in bad.checks if c.name == "byte_fallback_rate"]
    # As in the test above: only the bisection's 1.5e-8 shorter z differs, 1.2e-9 relative
    # here (measured); approx's default rel=1e-6 leaves 800x, and a Wald interval is 1e-2 off.
    assert c.verdict == "fail" and (c.lo, c.hi) == pytest.approx(wilson_by_bisection(160, 2000))
    # 5.5%: the interval straddles 5%
    near = gate([beng(3.0, 2.8, 3.2, fallback=110)])
    assert [c.verdict for c in near.checks if c.name == "byte_fallback_rate"] == ["uncertain"]


def test_premium_ceiling_on_parallel_files(monkeypatch):
    from fertility.findings import parity

    calls = []
    real = parity.premiums
    monkeypatch.setattr(parity, "premiums", lambda *a, **k: calls.append(1) or real(*a, **k))
    en = np.full(40, 10)
    docs = parallel_docs("t", en, en * 3)
    declared = dataclasses.replace(default_policy(), parallel=True)
    rows = [beng(3.0, 2.8, 3.2, documents=40), row("t", "Latn", nbytes=6000)]
    res = gate(rows, declared, docs=docs)
    (c,) = [c for c in res.checks if c.name == "premium"]
    assert (c.key, c.value, c.verdict) == ("bn", 3.0, "fail")
    # the parity finding reads the same table: one bootstrap, not two
    (f,) = [f for f in res.findings if f.rule == "parity"]
    assert (f.evidence["premium"], f.evidence["lo"]) == (3.0, c.lo) and len(calls) == 1
    # the same files, not declared parallel: no premium, and the gate says why in one line
    res = gate(rows, docs=docs)
    assert not [c for c in res.checks if c.name == "premium"]
    assert "not declared parallel" in res.premium_note and "c/bn.txt / c/en.txt" in res.premium_note
    assert res.to_dict()["premium_note"] == res.premium_note


def test_a_row_over_the_unk_ceiling_cannot_pass_chars_per_token():
    # 3.0 [2.8, 3.2] characters per token clears the 2.5 floor, but 100 of the 2000 tokens
    # are UNK: 5%, Wilson [4.1%, 6.1%], wholly over the 0.5% ceiling
    res = gate([beng(3.0, 2.8, 3.2, unk=100)])
    (unk,) = [c for c in res.checks if c.name == "unk_rate"]
    assert unk.verdict == "fail"
    # the bisection's z is 1.5e-8 short of Z95: 1.5e-9 relative here, under approx's 1e-6
    assert (unk.lo, unk.hi) == pytest.approx(wilson_by_bisection(100, 2000))
    (cpt,) = [c for c in res.checks if c.name == "chars_per_token"]
    assert cpt.verdict == "fail" and "UNK" in cpt.note
    clean = gate([beng(3.0, 2.8, 3.2, unk=1)])  # 0.05%, Wilson hi 0.28%: under the ceiling
    assert [c.verdict for c in clean.checks if c.name == "chars_per_token"] == ["pass"]


def test_round_trip_fails_the_gate_unless_the_policy_allows_a_lossy_tokenizer():
    rows = [beng(3.0, 2.8, 3.2), row("t", "bn", group="language", rt_fail=3, rt_checked=50)]
    res = gate(rows)
    (rt,) = [c for c in res.checks if c.name == "roundtrip"]
    assert (rt.key, rt.value, rt.verdict) == ("bn", 3 / 50, "fail") and res.exit_code == 1
    assert "3 of 50" in rt.note
    # the text output explains the failure with the roundtrip finding (a warning)
    assert "roundtrip language=bn: decode(encode(text)) differs" in gate_text(res)
    lossy = gate(rows, dataclasses.replace(default_policy(), allow_lossy=True))
    (rt,) = [c for c in lossy.checks if c.name == "roundtrip"]
    assert rt.verdict == "pass" and "allow_lossy" in rt.note and lossy.exit_code == 0
    exact = gate([beng(3.0, 2.8, 3.2), row("t", "bn", group="language", rt_checked=50)])
    assert [c.verdict for c in exact.checks if c.name == "roundtrip"] == ["pass"]


def test_allow_lossy_from_a_policy_file(tmp_path):
    f = tmp_path / "gate.toml"
    f.write_text("allow_lossy = true\n")
    assert load_policy(f).allow_lossy is True
    assert load_policy(f).to_dict()["allow_lossy"] is True


# ---------------------------------------------------------------- findings, baseline


def test_blocking_findings_fail_the_gate_only_when_their_severity_is_listed():
    # 500 of the 1250 pre-tokens begin with a vowel sign: the error is measured
    rows = [beng(3.0, 2.8, 3.2, mark=600, pre_mark=500)]
    res = gate(rows, configs={"t": GPT2_CONFIG})
    assert all(c.verdict == "pass" for c in res.checks)
    assert [f.rule for f in res.blocking] == ["mark-split"] and res.exit_code == 1
    relaxed = dataclasses.replace(default_policy(), fail_on=())
    ok = gate(rows, relaxed, configs={"t": GPT2_CONFIG})
    assert ok.exit_code == 0 and ok.findings  # still reported, no longer blocking


def baseline_case(cand_tokens: int):
    docs = pd.concat(
        [dominant_docs("cand", "Beng", 50, cand_tokens), dominant_docs("base", "Beng", 50, 100)]
    )
    rows = [
        row("cand", "Beng", tokens=50 * cand_tokens, chars=2000),
        row("base", "Beng", tokens=5000, chars=2000),
    ]
    return evaluate(
        make_report(rows, docs=docs), default_policy(), label="cand", baseline_label="base"
    )


def test_baseline_margin():
    worse = baseline_case(110)  # 1/1.1 = 0.909 of the baseline's chars per token
    (c,) = [c for c in worse.checks if c.name == "vs_baseline"]
    # (2000 / 5500) / (2000 / 5000) against 100 / 110: three float64 divisions against one,
    # a few ulps; approx's default rel=1e-6 is only that rounding (a wrong ratio is 1e-2 off)
    assert c.value == pytest.approx(100 / 110) and c.threshold == 0.95 and c.verdict == "fail"
    close = baseline_case(103)  # 0.971: within the 5% margin
    assert [c.verdict for c in close.checks if c.name == "vs_baseline"] == ["pass"]
    with pytest.raises(FertilityError, match="nope"):
        evaluate(make_report([row("cand", "Beng")]), default_policy(), label="nope")
    with pytest.raises(FertilityError, match="nothing to gate"):
        evaluate(make_report([row("gpt2", "Beng", kind="pretokenizer")]), default_policy())


def test_baseline_without_shared_documents_uses_the_frame_intervals():
    # no per-document rows: candidate 3.0 [2.85, 3.15], baseline 4.0 [3.8, 4.2] chars per token
    rows = [row("cand", "Beng", tokens=2000), row("base", "Beng", tokens=1500)]
    res = evaluate(make_report(rows), default_policy(), label="cand", baseline_label="base")
    (c,) = [c for c in res.checks if c.name == "vs_baseline"]
    # float64 quotients of the frame's bounds computed again here: a few ulps (measured: 1 ulp
    # on lo and hi); approx's default rel=1e-6 is only rounding, and pairing lo with lo
    # instead of with hi would move the bounds by 0.07 or more.
    assert (c.value, c.lo, c.hi) == pytest.approx((0.75, 2.85 / 4.2, 3.15 / 3.8))
    assert c.verdict == "fail"  # 0.83 at best, under 1 - 0.05


# ---------------------------------------------------------------- outputs


def test_junit_xml_has_a_testcase_per_check_and_marks_failures():
    rows = [
        beng(1.4, 1.35, 1.45, mark=600, pre_mark=500),
        row("t", "Latn", nbytes=6000, tokens=1500),
    ]
    res = gate(rows, configs={"t": GPT2_CONFIG})
    root = ET.fromstring(gate_junit(res))
    cases = root.findall(".//testcase")
    assert len(cases) == len(res.checks) + len(res.blocking)
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert "chars_per_token[script=Beng]" in failed
    assert "chars_per_token[script=Latn]" not in failed
    assert any(n.startswith("mark-split[") for n in failed)
    assert int(root.get("failures")) == len(failed)


def test_text_and_json_show_value_interval_threshold_verdict():
    res = gate([beng(1.4, 1.35, 1.45)])
    text = gate_text(res)
    assert re.search(
        r"FAIL\s+t\s+chars_per_token\s+script=Beng\s+1\.400\s+\[1\.350, 1\.450\]"
        r"\s+>= 2\.5",
        text,
    )
    assert text.splitlines()[-1].startswith("verdict: FAIL")
    d = json.loads(json.dumps(res.to_dict()))
    assert d["passed"] is False and d["exit_code"] == 1
    assert d["checks"][0]["verdict"] == "fail" and d["policy"]["source"] == "built-in"


def test_gate_doc_lists_every_default():
    doc = (ROOT / "docs" / "GATE.md").read_text(encoding="utf-8")
    p = default_policy()
    floors = ("script_floors", "language_floors", "default_floor", "exempt_scripts")
    for f in dataclasses.fields(Thresholds):  # every [rules] key in the thresholds table
        value = getattr(Thresholds(), f.name)
        if f.name not in floors:
            assert re.search(rf"`{f.name}`\s*\|\s*{value:g}\b", doc), f.name
    for script, floor in p.thresholds.script_floors.items():
        assert re.search(rf"^\|\s*{script}\s*\|\s*{floor:g}\b", doc, re.M), script
    assert re.search(rf"`floors\.default` = {p.thresholds.default_floor:g}\b", doc)
    for key in ("byte_fallback_rate", "unk_rate", "premium"):
        assert re.search(rf"`ceilings\.{key}`\s*\|\s*{getattr(p, key):g}\b", doc), key
    for key in ("min_documents", "min_chars", "min_share", "baseline_margin"):
        assert re.search(rf"`{key}`\s*\|\s*{getattr(p, key):g}\b", doc), key


# ---------------------------------------------------------------- the published case, end to end

CORPUS = ROOT / "examples" / "corpus"


def train_bpe(pre_tokenizer, path: Path, vocab_size: int = 4000) -> Path:
    """A byte-level BPE trained on Bangla-weighted text (Bengali 3x, English 1x)."""
    from tests.bpe import byte_level_bpe

    lines = (CORPUS / "bn.txt").read_text(encoding="utf-8").splitlines() * 3 + (
        CORPUS / "en.txt"
    ).read_text(encoding="utf-8").splitlines()
    byte_level_bpe(lines, vocab_size, pre_tokenizer=pre_tokenizer, path=path)
    return path


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """naive: the GPT-2 pre-tokenizer (ByteLevel use_regex=true), as in the published run;
    aware: the same trainer with fertility's mark-aware Split before ByteLevel(use_regex=false).

    Measured on the text they were trained on, on purpose: with a few KB of Bengali no
    vocabulary generalises to unseen text, and in-sample the vocabulary is no limit, so what
    remains is the pre-tokenizer. The naive one fails even on text it has memorised."""
    from tokenizers import Regex, pre_tokenizers

    from fertility.measure import analyze
    from fertility.tokenizers import load_tokenizer
    from fertility.tokenizers.patterns import FAMILIES

    tmp = tmp_path_factory.mktemp("published")
    naive = train_bpe(
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), tmp / "naive.json"
    )
    aware = train_bpe(
        pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(FAMILIES["mark_aware"]), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        ),
        tmp / "aware.json",
    )
    toks = [load_tokenizer(str(naive), label="naive"), load_tokenizer(str(aware), label="aware")]
    rep = analyze([CORPUS / "bn.txt", CORPUS / "en.txt"], toks)
    return rep, naive, aware


def test_published_case_gpt2_pretokenizer_gets_mark_split_and_fails(published):
    rep = published[0]
    res = evaluate(rep, default_policy(), label="naive")
    assert res.exit_code == 1
    assert ("mark-split", "error", "Beng") in {(f.rule, f.severity, f.key) for f in res.blocking}
    (cpt,) = [c for c in res.checks if c.name == "chars_per_token" and c.key == "Beng"]
    # the GPT-2 split caps Bengali near 1.4 characters per pre-token, far under the floor
    assert cpt.verdict == "fail" and cpt.hi < 1.6


def test_published_case_mark_aware_gets_neither_and_passes(published):
    rep = published[0]
    res = evaluate(rep, default_policy(), label="aware")
    assert not [f for f in res.findings if f.rule == "mark-split"]
    assert res.passed and res.exit_code == 0, gate_text(res)
    (cpt,) = [c for c in res.checks if c.name == "chars_per_token" and c.key == "Beng"]
    assert cpt.lo >= 2.5


def test_gate_corpus_with_a_baseline(published):
    from fertility.gate import gate_corpus

    _, naive, aware = published
    paths = [CORPUS / "bn.txt", CORPUS / "en.txt"]
    better = gate_corpus(paths, f"aware={aware}", baseline=f"naive={naive}")
    assert better.passed
    assert [c.verdict for c in better.checks if c.name == "vs_baseline"] == ["pass", "pass"]
    worse = gate_corpus(paths, f"naive={naive}", baseline=f"aware={aware}")
    (beng,) = [c for c in worse.checks if c.name == "vs_baseline" and c.key == "Beng"]
    assert beng.verdict == "fail" and beng.value < 0.5  # 1.45 vs 4.8 chars per token


def test_the_gate_says_what_it_read_and_to_read_more_first():
    # 100 of 400 documents read (--max-docs 100): an uncertain check asks to read the rest
    corpus = {
        "max_docs": 100,
        "sample": None,
        "precision": None,
        "documents": 100,
        "documents_seen": 400,
        "subset": {"method": "stratified", "statement": "max_docs=100 (seed 1): a sample"},
    }
    rows = [beng(3.0, 2.4, 3.6)]  # straddles the 2.5 floor: uncertain
    res = evaluate(make_report(rows, corpus=corpus), default_policy())
    assert res.subset == {
        "method": "stratified",
        "statement": "max_docs=100 (seed 1): a sample",
        "documents": 100,
        "documents_seen": 400,
        "max_docs": 100,
        "more": "drop --max-docs to read every document",
    }
    text = gate_text(res)
    assert "read: max_docs=100 (seed 1): a sample" in text
    assert "read more: drop --max-docs to read every document" in text
    assert "add documents" not in text and res.to_dict()["subset"] == res.subset
    # the whole corpus read (no option): no subset, and more documents are what is needed
    whole = evaluate(make_report(rows), default_policy())
    assert whole.subset is None and "add documents in those scripts" in gate_text(whole)
