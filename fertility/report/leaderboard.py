"""`fertility report --format leaderboard` (Markdown) and `leaderboard-csv`: one row per
tokenizer with the columns a paper prints, in the gate's order of preference
(fertility.report.summary.Verdict.rank: passing first, then fewer failed checks, then the
worst judged script furthest above its floor). Every figure is read from the report, the
gate's result or the tokenizer's card (fertility.measure.card); nothing is recounted.
"""

from __future__ import annotations

import csv
import io
import math

from fertility.gate import evaluate
from fertility.measure import card
from fertility.measure.parity import premium_table
from fertility.numbers import fmt
from fertility.policy import default_policy
from fertility.report import summary as S

# (header, key of the row dict) in the printed order
COLUMNS = (
    ("rank", "rank"),
    ("tokenizer", "tokenizer"),
    ("verdict", "verdict"),
    ("worst script", "worst_script"),
    ("chars/token (worst script)", "worst_chars_per_token"),
    ("floor", "floor"),
    ("Gini", "gini"),
    ("Gini over", "gini_basis"),
    ("Rényi eff. (α=2.5)", "renyi_efficiency"),
    ("max premium", "max_premium"),
    ("premium language", "premium_language"),
    ("round-trip failures", "roundtrip_failures"),
    ("round trips checked", "roundtrip_checked"),
)


def leaderboard_rows(report, policy=None) -> list[dict]:
    """One dict per gated tokenizer (COLUMNS' keys), best first."""
    policy = policy or report.policy or default_policy()
    result = evaluate(report, policy, findings=report.findings)
    vs = sorted(S.verdicts(report, result), key=lambda v: v.rank)
    prem = premium_table(
        report, policy.thresholds, reference=policy.reference, parallel=policy.parallel
    )
    rows = []
    for i, v in enumerate(vs, 1):
        allrow = [r for r in report.table if r["tokenizer"] == v.label and r["group"] == "all"]
        gini = card.language_gini(report, v.label, prem)
        rows.append(
            {
                "rank": i,
                "tokenizer": v.label,
                "verdict": v.verdict,
                "worst_script": v.worst.key if v.worst else None,
                "worst_chars_per_token": v.worst.value if v.worst else None,
                "floor": v.worst.threshold if v.worst else None,
                "gini": gini.get("value"),
                "gini_basis": gini.get("basis"),
                "renyi_efficiency": float(allrow[0]["renyi_efficiency"]) if allrow else None,
                "max_premium": v.premium.value if v.premium else None,
                "premium_language": v.premium.key if v.premium else None,
                "roundtrip_failures": v.rt_failures,
                "roundtrip_checked": v.rt_checked,
            }
        )
    return rows


def _null(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


_FORMATS = {
    "worst_chars_per_token": "{:.2f}",
    "floor": "{:g}",
    "gini": "{:.3f}",
    "renyi_efficiency": "{:.3f}",
    "max_premium": "{:.2f}",
}


def render_markdown(report, policy=None) -> str:
    """A GitHub Markdown table, then a line saying how it is ordered and what Gini is over."""
    rows = leaderboard_rows(report, policy)
    head = "| " + " | ".join(h for h, _ in COLUMNS) + " |"
    rule = "|" + "|".join("---:" if k in _FORMATS or k == "rank" else "---" for _, k in COLUMNS)
    lines = [head, rule + "|"]
    for r in rows:
        cells = [
            "-" if _null(r[k]) else fmt(r[k], _FORMATS[k]) if k in _FORMATS else str(r[k])
            for _, k in COLUMNS
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    lines.append(
        "Ordered as the gate prefers: passing first, then fewer failed checks, then the worst "
        "judged script furthest above its floor. Gini over `tokens_same_lines`: the tokens each "
        "language needs for the same lines of parallel files; `tokens_per_char`: no parallel "
        "files, each language's tokens per character (docs/METRICS.md)."
    )
    return "\n".join(lines) + "\n"


def render_csv(report, policy=None) -> str:
    """The same rows as CSV (full precision; empty cells for nulls)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([k for _, k in COLUMNS])
    for r in leaderboard_rows(report, policy):
        w.writerow(["" if _null(r[k]) else r[k] for _, k in COLUMNS])
    return buf.getvalue()
