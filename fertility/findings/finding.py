"""One finding: a rule id, a severity, the row it is about, the evidence, a cause and a fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fertility.options import Group, Severity


@dataclass
class Finding:
    rule: str
    severity: Severity
    tokenizer: str
    group: Group
    key: str  # ISO 15924 code, language label, or "*"
    evidence: dict
    cause: str
    fix: str

    def to_dict(self) -> dict:
        return asdict(self)
