"""The rule registry: every rule id is declared once, has one function that emits it and
nothing else, reads only the thresholds it declares, and has its section in docs/GATE.md;
every finding diagnose gives is a declared rule's, at a declared severity.

The frames are test_diagnose's builders; between them they make every rule give every
severity it declares."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from tokenizers import normalizers, pre_tokenizers

from fertility.findings import REGISTRY, RULES, diagnose, premiums
from fertility.findings.registry import Summary, rule
from fertility.policy import Thresholds
from fertility.report.summary import group_findings
from tests.findings.test_diagnose import (
    AWARE_CONFIG,
    GPT2_CONFIG,
    hf_config,
    make_report,
    parallel_docs,
    row,
)

ROOT = Path(__file__).resolve().parents[2]
FLOORS = {"script_floors", "language_floors", "default_floor", "exempt_scripts"}


def scenarios():
    """Reports that between them make every rule give every severity it declares."""
    yield make_report(
        [row("t", "heb_Hebr", group="language"), row("t", "Latn")],
        running_langs={("t", "Latn"): {"heb_Hebr": 1000}},
    )
    o200k = {"pattern": r"\p{L}+"}
    nfkc = hf_config(pre_tokenizers.Whitespace(), normalizers.NFKC())
    lower = hf_config(pre_tokenizers.Whitespace(), normalizers.Lowercase())
    rng = np.random.default_rng(1)
    en = rng.integers(10, 20, size=40)
    yield make_report(
        [
            row("naive", "Beng", mark=600, pretokens=4138, pre_mark=1760, cut=1056, gsplit=600),
            row("naive", "Latn", nbytes=6000, fallback=300, unk=40),
            row("gpt2", "Beng", kind="pretokenizer", tokens=4138, pretokens=4138, pre_mark=1760),
        ],
        configs={"naive": GPT2_CONFIG},
        byte_fallback_chars={("naive", "Latn"): {"\u00e9": 300}},
        unk_chars={("naive", "Latn"): {"\u00e9": 40}},
    )
    yield make_report(
        [
            row("t", "Beng", pretokens=100, pre_mark=3),  # the interval cannot tell
            row("t", "Telu", pretokens=1000, pre_zwnj=28),  # ZWNJ: info
            row("t", "Mlym", pretokens=2100),  # ceiling within the headroom
        ],
        configs={"t": o200k},
    )
    yield make_report(
        [
            row("aware", "Beng", mark=700, pretokens=0),  # no pre-tokens checked
            row("o", "Beng", mark=700, pretokens=1250, pre_mark=1),  # the vocabulary's
            row("gpt2ish", "Beng", tokens=16000),  # about a byte per token
        ],
        configs={"aware": AWARE_CONFIG},
    )
    yield make_report(
        [row("t", "Beng")],
        configs={"t": nfkc},
        normalization={
            "t": {"changed_docs": 3, "examples": [{"before": "\u09dc", "after": "x", "at": 0}]}
        },
    )
    yield make_report(
        [
            row("t", "en", group="language", rt_fail=4, rt_checked=50),
            row("t", "Latn"),
        ],
        configs={"t": lower},
        normalization={"t": {"changed_docs": 0, "examples": []}},
        roundtrip={("t", "en"): {"lost": Counter({"T": 4}), "causes": Counter({"lowercase": 4})}},
    )
    yield make_report(
        [
            row("t", "bn", group="language", chars=18000, tokens=1000),
            row("t", "en", group="language", tokens=3000),
            row("t", "Beng"),
        ],
        docs=parallel_docs("t", en, en * 3 + rng.integers(0, 3, size=40)),
    )


class Recording:
    """Thresholds that note every field read (floor_for reads the floors)."""

    def __init__(self, t: Thresholds):
        self.t, self.read = t, set()

    def __getattr__(self, name):
        self.read |= FLOORS if name == "floor_for" else {name}
        return getattr(self.t, name)


@pytest.fixture(scope="module")
def emitted():
    """(rule, findings, thresholds read) for every rule on every scenario, each rule's
    function run on its own."""
    out = []
    for rep in scenarios():
        t = Thresholds()
        table = premiums(rep, t, parallel=True)
        for r in REGISTRY.values():
            rec = Recording(t)
            out.append((r, list(r.run(rep, rec, table, "en")), rec.read))
    return out


def test_every_rule_function_emits_its_own_rule_only_at_declared_severities(emitted):
    for r, found, _ in emitted:
        assert {f.rule for f in found} <= {r.id}, r.function.__name__
        assert {f.severity for f in found} <= set(r.severities), r.id
    assert len({r.function for r in REGISTRY.values()}) == len(REGISTRY)


def test_every_declared_severity_is_given_somewhere(emitted):
    given = {(f.rule, f.severity) for _, found, _ in emitted for f in found}
    declared = {(r.id, s) for r in REGISTRY.values() for s in r.severities}
    assert given == declared


def test_rules_read_only_the_thresholds_they_declare(emitted):
    for r, _, read in emitted:
        assert read <= set(r.thresholds), (r.id, read - set(r.thresholds))
    # and every threshold is some rule's
    fields = {f.name for f in dataclasses.fields(Thresholds)}
    assert set().union(*(r.thresholds for r in REGISTRY.values())) == fields


def test_every_finding_of_diagnose_is_a_declared_rule_in_registry_order():
    for rep in scenarios():
        found = diagnose(rep, parallel=True)
        assert found and all(f.rule in REGISTRY for f in found)
        assert all(f.severity in REGISTRY[f.rule].severities for f in found)
    assert RULES == tuple(REGISTRY)


def test_each_rules_summary_names_its_worst_value(emitted):
    for r in REGISTRY.values():
        found = [f for q, fs, _ in emitted if q is r for f in fs]
        assert any(isinstance(f.evidence.get(r.summary.key), (int, float)) for f in found), r.id
        assert any(g.worst for g in group_findings(found)), r.id


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_rule_has_its_section_in_gate_md_naming_its_thresholds():
    doc = (ROOT / "docs" / "GATE.md").read_text(encoding="utf-8")
    heads = list(re.finditer(r"^(#+) (.+)$", doc, re.M))
    sections = {}
    for i, h in enumerate(heads):
        end = next(
            (g.start() for g in heads[i + 1 :] if len(g.group(1)) <= len(h.group(1))), len(doc)
        )
        sections[f"docs/GATE.md#{_slug(h.group(2))}"] = doc[h.end() : end]
    for r in REGISTRY.values():
        assert r.doc in sections, r.doc
        text = sections[r.doc]
        for name in r.thresholds:
            if name not in FLOORS:
                assert f"`{name}`" in text, (r.id, name)


def test_a_rule_is_declared_once_with_known_fields():
    summary = Summary("x", "max", "{}")
    with pytest.raises(ValueError, match="declared twice"):
        rule("mark-split", severities=("error",), thresholds=(), summary=summary)(lambda x: [])
    with pytest.raises(ValueError, match="no_such_threshold"):
        rule("new-rule", severities=("error",), thresholds=("no_such_threshold",), summary=summary)
    with pytest.raises(ValueError, match="fatal"):
        rule("new-rule", severities=("fatal",), thresholds=(), summary=summary)
    assert "new-rule" not in REGISTRY
