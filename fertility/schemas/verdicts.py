"""The gate's checks and the findings: what `fertility gate` and `fertility report` write per
check and per finding (fertility.gate.Check, fertility.findings.Finding)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from msgspec import Meta

from fertility.options import Group, Severity


class Check(TypedDict):
    """One check of the gate: a measured value, its 95% interval and the threshold."""

    name: Annotated[
        str,
        Meta(
            description="chars_per_token, byte_fallback_rate, unk_rate, roundtrip, premium, "
            "vs_baseline, or corpus when no script had enough text"
        ),
    ]
    tokenizer: str
    group: str
    key: str
    value: float | None
    lo: float | None
    hi: float | None
    threshold: float | None
    direction: Annotated[
        str, Meta(description='">=": the value must reach the threshold; "<=": stay under it')
    ]
    verdict: Literal["pass", "fail", "uncertain"]
    note: str


# An evidence value: which keys a rule writes, and what each holds, is the rule's own (`tokens`
# is a count in mark-split's evidence, a {language: share} map in a flip's), so the record is a
# map of the kinds of value the rules write: numbers (with `lo` and `hi` where the rule has an
# interval), words, a {key: number} map, and lists: characters with their counts ({char, code,
# name, count}), normalizer names, normalization examples. (One list type: msgspec refuses a
# union of two.)
EvidenceValue = float | str | bool | None | dict[str, float | None] | list[str | dict[str, Any]]
Evidence = dict[str, EvidenceValue]


class Finding(TypedDict):
    """One finding: a rule, its severity, the row it is about, the evidence, a cause, a fix."""

    rule: str
    severity: Severity
    tokenizer: str
    group: Group
    key: Annotated[str, Meta(description='"*" for the whole tokenizer, "bn/en" for a pair')]
    evidence: Annotated[Evidence, Meta(description="the measured numbers behind it")]
    cause: str
    fix: str


class Verdict(TypedDict):
    """A tokenizer's gate verdict in the report (`report --gate`)."""

    passed: bool
    exit_code: int | None
    failed_checks: list[Check]
    blocking_findings: list[Finding]
