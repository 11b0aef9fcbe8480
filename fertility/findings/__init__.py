"""Findings: why a script collapses under a tokenizer, and what to change.

Every rule reads the measurement table of a Report (Report.table, a dict per row; for
parity, also its per-document table); nothing recounts the corpus. A rule yields Findings: a
rule id, a severity, the row it is about (tokenizer, group, key), the measured evidence, one
plain sentence of cause and one of fix. Thresholds holds every number a rule compares with;
docs/GATE.md gives the reasons, and a policy's `[rules]` table overrides them.

Each rule id has one declaration and one function: `@rule(...)` on its function in rules.py
(registry.py: severities, thresholds read, one-line summary, GATE.md section). `diagnose`
runs REGISTRY; RULES (the order of the findings) and the report's summary derive from it.

Severities: "error" only for what no amount of training can repair and the corpus shows
happening (a pre-tokenizer that cuts words at vowel signs, a ceiling below the floor);
"warning" for measured problems; "info" for what a tokenizer *would* do (pre-tokenizer
family rows) or configuration that did not change this corpus.

diagnose, diagnose_under and not_judged are fertility/findings/diagnosis.py.
"""

from fertility.findings.diagnosis import RULES, diagnose, diagnose_under, not_judged, premiums
from fertility.findings.finding import Finding
from fertility.findings.registry import REGISTRY, SEVERITY_ORDER, Rule
from fertility.measure import parity  # noqa: F401  (fertility.findings.parity: its old name)

__all__ = [
    "RULES",
    "REGISTRY",
    "SEVERITY_ORDER",
    "Finding",
    "Rule",
    "diagnose",
    "diagnose_under",
    "not_judged",
    "premiums",
]
