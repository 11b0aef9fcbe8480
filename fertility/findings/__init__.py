"""Findings: why a script collapses under a tokenizer, and what to change.

Every rule reads the measurement frame of a Report (and, for parity, its per-document table);
nothing recounts the corpus. A rule yields Findings: a rule id, a severity, the row it is
about (tokenizer, group, key), the measured evidence, one plain sentence of cause and one of
fix. Thresholds holds every number a rule compares with; docs/GATE.md gives the reasons, and
a policy's `[rules]` table overrides them.

Severities: "error" only for what no amount of training can repair and the corpus shows
happening (a pre-tokenizer that cuts words at vowel signs, a ceiling below the floor);
"warning" for measured problems; "info" for what a tokenizer *would* do (pre-tokenizer
family rows) or configuration that did not change this corpus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fertility.findings import parity, rules
from fertility.findings.finding import Finding
from fertility.policy import Thresholds
from fertility.tokenizers.pretokenizer import PRETOKENIZER

if TYPE_CHECKING:
    from fertility.measure import Report

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
RULES = (
    "mark-split",
    "pretokenizer-ceiling",
    "merge-starvation",
    "byte-fallback",
    "unk",
    "normalization",
    "roundtrip",
    "grapheme-split",
    "balance-inversion",
    "parity",
)


def diagnose(
    report: Report,
    thresholds: Thresholds | None = None,
    *,
    reference: str = "en",
    premium_table: pd.DataFrame | None = None,
) -> list[Finding]:
    """All findings for a Report, most severe first.

    premium_table: `premiums(report, thresholds, reference=reference)` when the caller has
    already computed it (the gate checks the same table), so the bootstrap runs once.
    """
    t = thresholds if thresholds is not None else Thresholds()
    found: list[Finding] = []
    if premium_table is None:
        premium_table = premiums(report, t, reference=reference)
    for rule in (
        rules.mark_split,
        rules.ceiling,
        rules.starvation,
        rules.fallback_unk,
        rules.normalization,
        rules.roundtrip,
        rules.grapheme_split,
    ):
        found.extend(rule(report, t))
    found.extend(rules.balance(report, t, premium_table))
    found.extend(rules.parity_rule(premium_table, t, reference))
    found.sort(
        key=lambda f: (SEVERITY_ORDER[f.severity], f.tokenizer, RULES.index(f.rule), f.group, f.key)
    )
    return found


def premiums(report: Report, t: Thresholds | None = None, *, reference: str = "en") -> pd.DataFrame:
    """Token premium per (tokenizer, language) against `reference` on parallel files.

    Columns: tokenizer, lang, reference, lines, premium, lo, hi. Empty without parallel files.
    """
    t = t or Thresholds()
    families = [d.label for d in report.tokenizers if d.kind == PRETOKENIZER]
    docs = report.docs[~report.docs["tokenizer"].isin(families)]
    return parity.premiums(
        docs,
        reference,
        min_lines=t.parity_min_lines,
        min_overlap=t.parity_min_overlap,
        reps=t.bootstrap,
        rng=np.random.default_rng(t.seed),
    )
