"""`fertility gate --format json` (fertility.gate/1, fertility.gate.GateResult.to_dict), which
fix, extend, tokenize and the trainer's gate embed."""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict

from msgspec import Meta
from typing_extensions import NotRequired

from fertility.options import Severity, Uncertain
from fertility.schemas.verdicts import Check, Finding


class NotJudged(TypedDict):
    """Why a script is reported, not judged (fertility.findings.not_judged, docs/GATE.md
    "Running text"): its running text's share of the corpus (`share` with fragments), the
    language it is the largest share of and that share, its size."""

    running_share: float
    share: float
    language: str | None
    language_share: float
    chars: NotRequired[int]
    documents: NotRequired[int]
    reason: str


class Skipped(NotJudged):
    """A script reported, not judged: its running text is under min_share."""

    tokenizer: str
    group: str
    key: str


class GateSubset(TypedDict):
    """What was read when not the whole corpus."""

    method: str | None
    statement: str
    documents: int | None
    documents_seen: int | None
    sample: NotRequired[float]
    max_docs: NotRequired[int]
    precision: NotRequired[float]
    more: Annotated[str | None, Meta(description="the option change that reads more")]


class Rules(TypedDict):
    """The thresholds the rules compare with (fertility.policy.Thresholds)."""

    min_tokens: int | None
    mark_initial_rate: float | None
    mark_initial_token_rate: float | None
    ceiling_headroom: float | None
    starvation_bytes_per_token: float | None
    starvation_graphemes_per_token: float | None
    starvation_ceiling_share: float | None
    byte_fallback_rate: float | None
    unk_rate: float | None
    top_chars: int | None
    grapheme_split_rate: float | None
    overrepresentation: float | None
    flip_margin: float | None
    premium: float | None
    parity_min_lines: int | None
    parity_min_overlap: float | None
    bootstrap: int | None
    seed: int | None
    label_script_share: float | None


class PolicyTable(TypedDict):
    """The policy applied (fertility.policy.Policy.to_dict)."""

    script_floors: dict[str, float | None]
    language_floors: dict[str, float | None]
    default_floor: float | None
    exempt_scripts: list[str]
    byte_fallback_rate: float | None
    unk_rate: float | None
    premium: float | None
    fail_on: list[Severity]
    uncertain: Uncertain
    baseline_margin: float | None
    min_documents: int | None
    min_chars: int | None
    min_share: float | None
    reference: str
    parallel: bool
    allow_lossy: bool
    rules: Rules
    source: Annotated[str, Meta(description='the file it came from, or "built-in"')]


class Gate(TypedDict):
    """The gate's verdict: a policy applied to a report's measurements."""

    schema: Annotated[
        Literal["fertility.gate/1"], Meta(description="This document's format and version.")
    ]
    passed: bool
    exit_code: Annotated[int | None, Meta(description="0 when passed, 1 when not")]
    checks: list[Check]
    blocking_findings: Annotated[
        list[Finding], Meta(description="the findings whose severity is in fail_on")
    ]
    findings: list[Finding]
    skipped: list[Skipped]
    premium_note: str | None
    subset: Annotated[GateSubset | None, Meta(description="null: all of the corpus was read")]
    policy: PolicyTable
