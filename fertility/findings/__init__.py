"""Findings: why a script collapses under a tokenizer, and what to change.

Every rule reads the measurement frame of a Report (and, for parity, its per-document table);
nothing recounts the corpus. A rule yields Findings: a rule id, a severity, the row it is
about (tokenizer, group, key), the measured evidence, one plain sentence of cause and one of
fix. Thresholds holds every number a rule compares with; docs/GATE.md gives the reasons, and
a policy's `[rules]` table overrides them.

Each rule id has one declaration and one function: `@rule(...)` on its function in rules.py
(registry.py: severities, thresholds read, one-line summary, GATE.md section). `diagnose`
runs REGISTRY; RULES (the order of the findings) and the report's summary derive from it.

Severities: "error" only for what no amount of training can repair and the corpus shows
happening (a pre-tokenizer that cuts words at vowel signs, a ceiling below the floor);
"warning" for measured problems; "info" for what a tokenizer *would* do (pre-tokenizer
family rows) or configuration that did not change this corpus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

# rules: imported for its @rule declarations, which fill REGISTRY
from fertility.findings import parity, rules  # noqa: F401
from fertility.findings.finding import Finding
from fertility.findings.registry import REGISTRY, SEVERITY_ORDER, Rule
from fertility.measure.frame import running_shares
from fertility.numbers import pct
from fertility.policy import Policy, Thresholds
from fertility.tokenizers.pretokenizer import PRETOKENIZER

if TYPE_CHECKING:
    from fertility.measure import Report

RULES = tuple(REGISTRY)  # every rule id, in the order findings are listed
__all__ = ["RULES", "REGISTRY", "SEVERITY_ORDER", "Finding", "Rule", "diagnose", "premiums"]


def diagnose(
    report: Report,
    thresholds: Thresholds | None = None,
    *,
    reference: str = "en",
    premium_table: pd.DataFrame | None = None,
    min_share: float | None = None,
) -> list[Finding]:
    """All findings for a Report, most severe first: every registered rule's, ordered by
    severity, tokenizer, rule (RULES), then row.

    A finding about a script whose running text is under `min_share` of the characters
    (default: the built-in policy's) is "info", whatever its rule says: fragments are
    reported, never judged (docs/GATE.md, "Running text"); its evidence says so.

    premium_table: `premiums(report, thresholds, reference=reference)` when the caller has
    already computed it (the gate checks the same table), so the bootstrap runs once.
    """
    t = thresholds if thresholds is not None else Thresholds()
    if premium_table is None:
        premium_table = premiums(report, t, reference=reference)
    found: list[Finding] = []
    for rule in REGISTRY.values():
        found.extend(rule.run(report, t, premium_table, reference))
    _fragments_are_info(found, report, Policy.min_share if min_share is None else min_share)
    found.sort(
        key=lambda f: (SEVERITY_ORDER[f.severity], f.tokenizer, RULES.index(f.rule), f.group, f.key)
    )
    return found


def _fragments_are_info(found: list[Finding], report: Report, min_share: float) -> None:
    shares = running_shares(report.frame)
    for f in found:
        if f.group != "script" or (f.tokenizer, f.key) not in shares:
            continue
        running, share = shares[(f.tokenizer, f.key)]
        if running < min_share and f.severity != "info":
            f.evidence["running_share"] = round(running, 6)
            f.evidence["not_judged"] = (
                f"{f.key} is {pct(share)} of the characters but its running text only "
                f"{pct(running)}, under the policy's min_share of {pct(min_share)}: "
                f"fragments, reported, not judged (the rule says {f.severity})"
            )
            f.severity = "info"


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
        seed=t.seed,
    )
