"""diagnose: every registered rule's findings for a Report (REGISTRY, filled by the
`@rule` declarations of fertility/findings/rules.py), in RULES' order, with fragments of a
script reported as "info" (not_judged); diagnose_under: the same with what a policy sets."""

from __future__ import annotations

from typing import TYPE_CHECKING

# rules: imported for its @rule declarations, which fill REGISTRY
from fertility.findings import rules  # noqa: F401
from fertility.findings.finding import Finding
from fertility.findings.registry import REGISTRY, SEVERITY_ORDER
from fertility.measure.frame import language_shares, running_shares

# the premium table is measured (fertility.measure.parity); the parity rule and the gate judge it
from fertility.measure.parity import Premiums
from fertility.measure.parity import premium_table as premiums
from fertility.numbers import pct
from fertility.policy import Policy, Thresholds, judges_running

if TYPE_CHECKING:
    from fertility.measure import Report
    from fertility.schemas.gate import NotJudged

RULES = tuple(REGISTRY)  # every rule id, in the order findings are listed


def diagnose(
    report: Report,
    thresholds: Thresholds | None = None,
    *,
    reference: str = "en",
    premium_table: Premiums | None = None,
    min_share: float | None = None,
    parallel: bool = False,
    min_size: tuple[int, int] | None = None,
) -> list[Finding]:
    """All findings for a Report, most severe first: every registered rule's, ordered by
    severity, tokenizer, rule (RULES), then row.

    A finding about a script whose running text is under `min_share` (default: the
    built-in policy's) of every language's characters and of the corpus's (`not_judged`)
    is "info", whatever its rule says: fragments are reported, never judged (docs/GATE.md,
    "Running text"); its evidence says so. min_size: the policy's (min_chars,
    min_documents) (default: the built-in policy's).

    premium_table: `premiums(report, thresholds, reference=reference, parallel=parallel)`
    when the caller has already computed it (the gate checks the same table), so the
    bootstrap runs once. parallel: the user declares the files parallel (`--parallel`).
    """
    t = thresholds if thresholds is not None else Thresholds()
    if premium_table is None:
        premium_table = premiums(report, t, reference=reference, parallel=parallel)
    found: list[Finding] = []
    for rule in REGISTRY.values():
        found.extend(rule.run(report, t, premium_table, reference))
    _fragments_are_info(
        found,
        report,
        Policy.min_share if min_share is None else min_share,
        min_size or (Policy.min_chars, Policy.min_documents),
    )
    found.sort(
        key=lambda f: (SEVERITY_ORDER[f.severity], f.tokenizer, RULES.index(f.rule), f.group, f.key)
    )
    return found


def diagnose_under(
    report: Report, policy: Policy, premium_table: Premiums | None = None
) -> list[Finding]:
    """diagnose() with everything `policy` sets (thresholds, reference, min_share, parallel,
    the minimum size of a judged script): what report, gate, fix, extend and the library run."""
    return diagnose(
        report,
        policy.thresholds,
        reference=policy.reference,
        premium_table=premium_table,
        min_share=policy.min_share,
        parallel=policy.parallel,
        min_size=(policy.min_chars, policy.min_documents),
    )


def _fragments_are_info(
    found: list[Finding], report: Report, min_share: float, min_size: tuple[int, int]
) -> None:
    small = not_judged(report, min_share, *min_size)
    for f in found:
        if f.group != "script" or (f.tokenizer, f.key) not in small:
            continue
        if f.severity != "info":
            why = small[(f.tokenizer, f.key)]
            f.evidence["running_share"] = round(why["running_share"], 6)
            f.evidence["language_share"] = round(why["language_share"], 6)
            f.evidence["not_judged"] = f"{why['reason']} (the rule says {f.severity})"
            f.severity = "info"


def not_judged(
    report: Report,
    min_share: float,
    min_chars: int = Policy.min_chars,
    min_documents: int = Policy.min_documents,
) -> dict[tuple[str, str], NotJudged]:
    """(tokenizer, script) -> why the script is reported, not judged (docs/GATE.md,
    "Running text"). A script is judged when its running text is `min_share` of the
    corpus's characters, or when it is `min_share` of some language's own characters and
    large enough on its own for an interval (`min_chars` characters in `min_documents`
    documents): a language's prose stays judged whatever unrelated text the corpus adds
    elsewhere. Each entry: running_share, share (with fragments), language (the one it is
    the largest share of), language_share, chars, documents (of the running text), reason.
    All of it read from the measurement table (Report.table), not its DataFrame: the report
    and the gate run this, and building the frame would import pandas for them."""
    shares = running_shares(report.table)
    by_lang = language_shares(report.table, getattr(report, "running_langs", None) or {})
    size = {
        (str(r["tokenizer"]), str(r["key"])): (int(r["chars"]), int(r["documents"]))
        for r in report.table
        if r["group"] == "running"
    }
    out: dict[tuple[str, str], NotJudged] = {}
    for key, (running, share) in shares.items():
        lang, own = by_lang.get(key, ("", 0.0))
        chars, docs = size.get(key, (0, 0))
        if judges_running(running, own, chars, docs, min_share, min_chars, min_documents):
            continue
        at_most = f" and at most {pct(own)} of a language's ({lang})" if lang else ""
        why = (
            f"{chars:,} characters in {docs:,} documents, under the policy's "
            f"{min_chars:,} / {min_documents:,}"
            if own >= min_share
            else f"under the policy's min_share of {pct(min_share)}"
        )
        out[key] = {
            "running_share": running,
            "share": share,
            "language": lang or None,
            "language_share": own,
            "chars": chars,
            "documents": docs,
            "reason": (
                f"running text is {pct(running)} of the corpus's characters ({pct(share)} "
                f"with fragments){at_most}: {why}: reported, not judged"
            ),
        }
    return out
