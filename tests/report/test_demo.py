"""`make demo` tells the README's story: the naive GPT-2-split tokenizer fails the gate on
Bengali (and Hindi and Tamil), cut at every vowel sign, and the mark-aware one, trained the
same way, passes. The demo's own tokenizers (examples/make_tokenizers.py) on its own corpus,
gated by the built-in policy, as `make demo` prints them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fertility.findings import diagnose
from fertility.gate import evaluate
from fertility.measure import analyze
from fertility.policy import default_policy
from fertility.report.text import render_table

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_fails_the_naive_tokenizer_on_bengali_and_passes_the_mark_aware_one(
    tmp_path, monkeypatch
):
    spec = importlib.util.spec_from_file_location(
        "make_tokenizers", ROOT / "examples/make_tokenizers.py"
    )
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    monkeypatch.setattr("sys.argv", ["make_tokenizers.py", str(tmp_path)])
    demo.main()
    rep = analyze(
        [ROOT / "examples/corpus"],
        [
            f"naive={tmp_path / 'naive-gpt2/tokenizer.json'}",
            f"mark_aware={tmp_path / 'mark-aware/tokenizer.json'}",
        ],
    )
    rep.findings = diagnose(rep)
    result = evaluate(rep, default_policy(), findings=rep.findings)
    failed = {(c.tokenizer, c.name, c.key) for c in result.checks if c.verdict == "fail"}
    # the naive one: Bengali under its floor, its split cutting Bengali at the marks
    assert ("naive", "chars_per_token", "Beng") in failed
    assert {("naive", "chars_per_token", k) for k in ("Deva", "Taml")} <= failed
    assert any(
        f.tokenizer == "naive" and f.rule == "mark-split" and f.key == "Beng"
        for f in result.blocking
    )
    # the mark-aware one passes every check, with no blocking finding
    mine = [c for c in result.checks if c.tokenizer == "mark_aware"]
    assert mine and all(c.verdict == "pass" for c in mine), [
        (c.name, c.key, c.verdict) for c in mine if c.verdict != "pass"
    ]
    assert not [f for f in result.blocking if f.tokenizer == "mark_aware"]
    # and the report says so first, in 80 columns
    lines = render_table(rep, width=80).splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("verdict "))
    rows = {x.split()[1]: x.split()[0] for x in lines[at + 2 : at + 4]}
    assert rows == {"naive": "FAIL", "mark_aware": "PASS"}
    assert any(x.startswith("prefer mark_aware: PASS against FAIL") for x in lines)
