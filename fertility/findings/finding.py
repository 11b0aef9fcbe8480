"""One finding: a rule id, a severity, the row it is about, the evidence, a cause and a fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Finding:
    rule: str
    severity: str  # "error" | "warning" | "info"
    tokenizer: str
    group: str  # "script" | "language" | "all"
    key: str  # ISO 15924 code, language label, or "*"
    evidence: dict
    cause: str
    fix: str

    def to_dict(self) -> dict:
        return asdict(self)
