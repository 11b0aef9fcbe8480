"""The rule registry: one declaration per rule id, made by the `@rule(...)` decorator on the
rule's one function in rules.py.

A declaration holds what every other part reads about a rule: its id, the severities it may
give, the Thresholds fields it compares with, the evidence its one-line summary shows (the
worst value of a group of its findings, report/summary.py) and its section in docs/GATE.md.
`diagnose` runs the registered functions, the findings are ordered by registration (the order
of rules.py), and the report's summary reads `summary`; nothing else lists the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from fertility.findings.finding import Finding
from fertility.options import Group, Severity
from fertility.policy import SEVERITIES, Thresholds

if TYPE_CHECKING:
    from fertility.measure import Report
    from fertility.measure.parity import Premiums

SEVERITY_ORDER = {s: i for i, s in enumerate(SEVERITIES)}  # "error" first


@dataclass(frozen=True)
class Summary:
    """How a group of a rule's findings reads in one line: the evidence `key` whose worst
    value is named, whether the largest (`max`) or the smallest (`min`) value is worst, and
    the `phrase` (a str.format spec; `{:d}` shows an integer) that writes it."""

    key: str
    worst: str  # "max" | "min"
    phrase: str


@dataclass(frozen=True)
class Inputs:
    """What a rule function reads: the Report, the thresholds, the premium table (parallel
    files, computed once for parity, balance and the gate) and the reference language."""

    report: Report
    t: Thresholds
    premium_table: Premiums
    reference: str
    rule: Rule

    def finding(
        self, severity: Severity, row: Mapping[str, Any], evidence: dict, cause: str, fix: str
    ) -> Finding:
        """A Finding of this rule about `row` (a row of the measurement table, Report.table,
        or any mapping with tokenizer, group and key)."""
        if severity not in self.rule.severities:
            raise ValueError(f"rule {self.rule.id} declares no severity {severity!r}")
        return Finding(
            self.rule.id,
            severity,
            str(row["tokenizer"]),
            cast(Group, str(row["group"])),  # a table row's: "all", "language" or "script"
            str(row["key"]),
            evidence,
            cause,
            fix,
        )


RuleFunction = Callable[[Inputs], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    id: str
    severities: tuple[Severity, ...]  # the severities its findings may have
    thresholds: tuple[str, ...]  # the Thresholds fields it compares with
    summary: Summary
    doc: str  # its section of docs/GATE.md ("docs/GATE.md#<id>")
    function: RuleFunction = field(compare=False, repr=False)

    def run(self, report: Report, t: Thresholds, premium_table: Premiums, reference: str):
        return self.function(Inputs(report, t, premium_table, reference, self))


REGISTRY: dict[str, Rule] = {}  # rule id -> declaration, in diagnose's order


def rule(
    id: str,
    *,
    severities: tuple[Severity, ...],
    thresholds: tuple[str, ...],
    summary: Summary,
    doc: str | None = None,
) -> Callable[[RuleFunction], RuleFunction]:
    """Declare the rule `id` and register the decorated function as its one function."""
    bad: list[str] = [s for s in severities if s not in SEVERITY_ORDER]
    bad += [k for k in thresholds if k not in Thresholds.__dataclass_fields__]
    if bad:
        raise ValueError(f"rule {id}: no severity or Thresholds field named {', '.join(bad)}")

    def register(fn: RuleFunction) -> RuleFunction:
        if id in REGISTRY:
            raise ValueError(f"rule {id} is declared twice")
        REGISTRY[id] = Rule(
            id, tuple(severities), tuple(thresholds), summary, doc or f"docs/GATE.md#{id}", fn
        )
        return fn

    return register
