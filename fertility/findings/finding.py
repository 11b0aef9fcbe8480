"""One finding: a rule id, a severity, the row it is about, the evidence, a cause and a fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, cast

from fertility.options import Group, Severity

if TYPE_CHECKING:  # the JSON record (fertility/schemas/verdicts.py), for mypy only
    from fertility.schemas import verdicts as verdicts_json


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

    def to_dict(self) -> verdicts_json.Finding:
        return cast("verdicts_json.Finding", asdict(self))  # its fields (tests/test_schemas.py)
