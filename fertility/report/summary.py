"""What a reader needs first: one verdict per tokenizer with the figures that decide it, and
the findings grouped one line per (rule, tokenizer), each rule's line as its declaration says
(fertility.findings.registry). The terminal report, the gate's text (gate_lines: the one text
of a GateResult) and the HTML page all start from these; the full findings stay in -v, JSON
and the HTML details.

Verdicts are the gate's (fertility.gate.evaluate with the same policy), never a second rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fertility.findings import REGISTRY, RULES, SEVERITY_ORDER
from fertility.gate import NEED_MORE, GateResult
from fertility.numbers import fmt
from fertility.options import Severity
from fertility.report.table import grid


@dataclass
class Verdict:
    label: str
    verdict: str  # "PASS" | "PASS, LOSSY" | "FAIL" | "UNCERTAIN"
    failed: int  # failed checks
    uncertain: int
    passed: int
    worst: Any  # the chars_per_token script check furthest under its floor
    below: int  # scripts whose interval lies under their floor
    floored: int  # scripts checked against a floor
    premium: Any  # the premium check with the highest premium, or None
    rt_failures: int
    rt_checked: int
    errors: int
    warnings: int

    @property
    def rank(self) -> tuple:
        """Smaller is better: passing first, then fewer failed checks, then the worst
        script closest to (or furthest above) its floor."""
        order = {"PASS": 0, "PASS, LOSSY": 1, "UNCERTAIN": 2, "FAIL": 3}[self.verdict]
        margin = self.worst.value / self.worst.threshold if self.worst else 0.0
        return (order, self.failed, -margin)


def verdicts(report: Any, result: Any) -> list[Verdict]:
    """One Verdict per gated tokenizer of a GateResult (in the report's order)."""
    policy = result.policy
    labels = list(dict.fromkeys(c.tokenizer for c in result.checks))
    order = [d.label for d in report.tokenizers if d.label in labels]
    out = []
    frame = report.frame
    for lab in order:
        checks = [c for c in result.checks if c.tokenizer == lab]
        n = {v: sum(c.verdict == v for c in checks) for v in ("fail", "uncertain", "pass")}
        blocking = [f for f in result.blocking if f.tokenizer == lab]
        cpt = [
            c
            for c in checks
            if c.name == "chars_per_token"
            and c.group == "script"
            and c.value is not None
            and c.threshold
        ]
        worst = min(cpt, key=lambda c: c.value / c.threshold, default=None)
        prem = [c for c in checks if c.name == "premium" and c.value is not None]
        top = max(prem, key=lambda c: c.value, default=None)
        # the documents the gate's round-trip checks count: every language's checked ones
        langs = frame[(frame["tokenizer"] == lab) & (frame["group"] == "language")]
        rt_f, rt_n = int(langs["roundtrip_failures"].sum()), int(langs["roundtrip_checked"].sum())
        if n["fail"] or blocking:
            word = "FAIL"
        elif n["uncertain"] and policy.uncertain == "fail":
            word = "UNCERTAIN"
        else:  # a tokenizer that changes text passes only where the policy allows it
            word = "PASS, LOSSY" if rt_f else "PASS"
        mine = [f for f in result.findings if f.tokenizer == lab]
        out.append(
            Verdict(
                label=lab,
                verdict=word,
                failed=n["fail"],
                uncertain=n["uncertain"],
                passed=n["pass"],
                worst=worst,
                below=sum(c.verdict == "fail" for c in cpt),
                floored=len(cpt),
                premium=top,
                rt_failures=rt_f,
                rt_checked=rt_n,
                errors=sum(f.severity == "error" for f in mine),
                warnings=sum(f.severity == "warning" for f in mine),
            )
        )
    return out


def verdict_cells(v: Verdict) -> list[str]:
    """The summary row of one tokenizer, as the cells of `SUMMARY_HEADERS`."""
    if v.worst is not None:
        w = v.worst
        rel = ">=" if w.value >= w.threshold else "<"
        worst = f"{w.key} {w.value:.2f} {rel} {w.threshold:g}"
        below = f"{v.below} of {v.floored} scripts"
    else:
        worst, below = "-", "-"
    if v.premium is not None:
        p = v.premium
        rel = "<=" if p.value <= p.threshold else ">"
        prem = f"{p.key} {p.value:.2f}x {rel} {p.threshold:g}"
    else:
        prem = "-"
    rt = f"{v.rt_failures:,} of {v.rt_checked:,}" if v.rt_checked else "-"
    found = f"{v.failed} failed, {v.errors} errors"
    return [v.verdict, v.label, worst, below, prem, rt, found]


SUMMARY_HEADERS = [
    "verdict",
    "tokenizer",
    "worst script vs floor",
    "under floor",
    "max premium",
    "round trip fails",
    "gate",
]


def verdict_table(vs: list[Verdict], width: int) -> list[str]:
    """The summary rows as a terminal table; the last column (counts) goes if it is too wide."""

    table = grid(SUMMARY_HEADERS, [verdict_cells(v) for v in vs])
    if max(len(x) for x in table) > width:
        table = grid(SUMMARY_HEADERS[:-1], [verdict_cells(v)[:-1] for v in vs])
    return table


def preference(vs: list[Verdict]) -> str | None:
    """One sentence naming the tokenizer to prefer, with the figures behind it."""
    if len(vs) < 2:
        return None
    ranked = sorted(vs, key=lambda v: v.rank)
    best, nxt = ranked[0], ranked[1]
    if best.rank == nxt.rank:
        return "no tokenizer is ahead on the gate's checks"
    why = []
    if best.verdict != nxt.verdict:
        why.append(f"{best.verdict} against {nxt.verdict}")
    if best.failed != nxt.failed:
        why.append(f"{best.failed} failed checks against {nxt.failed}")
    if best.worst is not None and nxt.worst is not None:
        why.append(
            f"worst script {best.worst.key} {best.worst.value:.2f} chars/token against "
            f"{nxt.worst.key} {nxt.worst.value:.2f}"
        )
    return f"prefer {best.label}: " + "; ".join(why)


# ---------------------------------------------------------------- findings, grouped


@dataclass
class Group:
    severity: Severity
    rule: str
    tokenizer: str
    keys: list[str]
    worst_key: str | None
    worst: str | None  # the worst value, as a phrase


def group_findings(findings: list, labels: list[str] | None = None) -> list[Group]:
    """One Group per (severity, rule, tokenizer), errors first, then the tokenizers in
    report order, then the rules in diagnose's order."""
    groups: dict[tuple, list] = {}
    for f in findings:
        groups.setdefault((f.severity, f.rule, f.tokenizer), []).append(f)
    tok_order = {lab: i for i, lab in enumerate(labels or [])}
    out = []
    for (sev, rule, tok), fs in groups.items():
        summary = REGISTRY[rule].summary if rule in REGISTRY else None
        key = summary.key if summary else None
        scored = [
            (f.evidence.get(key), f)
            for f in fs
            if key and isinstance(f.evidence.get(key), (int, float))
        ]
        worst_key = worst = None
        if scored and summary is not None:  # (scored is empty without a summary)
            val, f = (max if summary.worst == "max" else min)(scored, key=lambda p: p[0])
            worst_key = f.key
            phrase = summary.phrase
            worst = phrase.format(int(val) if "{:d}" in phrase else val)
        out.append(Group(sev, rule, tok, [f.key for f in fs], worst_key, worst))
    out.sort(
        key=lambda g: (
            SEVERITY_ORDER.get(g.severity, 9),
            tok_order.get(g.tokenizer, 99),
            RULES.index(g.rule) if g.rule in RULES else 99,
        )
    )
    return out


def group_line(g: Group, width: int, tok_width: int = 0) -> str:
    """`severity rule tokenizer  N rows: KEYS (worst KEY: value)`, the key list shortened to
    the width with "+N more" (a name left out, never a number cut)."""
    n = len(g.keys)
    head = f"{g.severity:<7} {g.rule:<20} {g.tokenizer:<{tok_width}}  {n}: "
    tail = f"  (worst {g.worst_key}: {g.worst})" if g.worst else ""
    room = width - len(head) - len(tail)
    shown: list[str] = []
    for i, k in enumerate(g.keys):
        more = f" +{n - i - 1} more" if i < n - 1 else ""
        if shown and len(" ".join(shown + [k]) + more) > room:
            return head + " ".join(shown) + f" +{n - i} more" + tail
        shown.append(k)
    return head + " ".join(shown) + tail


# ---------------------------------------------------------------- the gate's text

_VERDICT_ORDER = {"fail": 0, "uncertain": 1, "pass": 2}


def gate_lines(
    report: Any,
    result: GateResult,
    width: int,
    verbose: bool = False,
    *,
    tokenizers: bool | None = None,
) -> list[str]:
    """The one text of a GateResult. What `fertility gate` prints: the verdict and the
    deciding figures first, then every check (failed first), then the blocking findings one
    line per rule (-v: in full), and the verdict again last (scripts read the last line).
    Without a report (report/gate.py's gate_text) there is no verdict table.
    tokenizers: a tokenizer column in the checks (None: when there are several)."""

    head = "PASS" if result.passed else "FAIL"
    vs = verdicts(report, result) if report is not None else []
    if report is not None:
        if result.passed and any(v.verdict == "PASS, LOSSY" for v in vs):
            head = "PASS, LOSSY"
        labels = ", ".join(v.label for v in vs) or "no tokenizer"
    else:
        labels = ", ".join(dict.fromkeys(c.tokenizer for c in result.checks)) or "no tokenizer"
    lines = [f"fertility gate: {head} ({labels}; policy: {result.policy.source})"]
    if report is not None:
        lines += verdict_table(vs, width)
    many = len({c.tokenizer for c in result.checks}) > 1 if tokenizers is None else tokenizers
    rows = []
    for c in sorted(result.checks, key=lambda c: _VERDICT_ORDER.get(c.verdict, 3)):
        rows.append(
            [c.verdict.upper()]
            + ([c.tokenizer] if many else [])
            + [
                c.name,
                f"{c.group}={c.key}",
                fmt(c.value, "{:.3f}", "n/a"),
                "" if c.lo is None else f"[{c.lo:.3f}, {c.hi:.3f}]",
                "" if c.threshold is None else f"{c.direction} {c.threshold:g}",
                c.note,
            ]
        )
    headers = (
        ["verdict"]
        + (["tokenizer"] if many else [])
        + ["check", "row", "value", "95% interval", "threshold", "note"]
    )
    checks = grid(headers, rows)
    if not verbose and max(len(x) for x in checks) > width:  # notes are words, not numbers
        checks = grid(headers[:-1], [r[:-1] for r in rows])
    lines += ["", f"checks ({len(result.checks)}):"] + checks
    lines += [
        f"skipped {s['tokenizer']} {s['group']}={s['key']}: {s['reason']}" for s in result.skipped
    ]
    # a failed round trip is explained by its finding (which code points change, why)
    lossy = {
        (c.tokenizer, c.key) for c in result.checks if c.name == "roundtrip" and c.verdict == "fail"
    }
    explain = [
        f
        for f in result.findings
        if f.rule == "roundtrip" and (f.tokenizer, f.key) in lossy and f not in result.blocking
    ]
    if result.blocking and not verbose:
        lines += [
            "",
            (
                f"blocking findings ({len(result.blocking)}): one line per rule "
                "(-v: each with its cause and fix)"
            ),
        ]
        lines += [group_line(g, width) for g in group_findings(result.blocking)]
    for f in (result.blocking if verbose else []) + explain:
        lines.append(
            f"{f.severity.upper()} {f.tokenizer} {f.rule} {f.group}={f.key}: {f.cause} Fix: {f.fix}"
        )
    lines.append(verdict_line(result, head))
    if result.uncertain:
        lines.append(f"{NEED_MORE}: {len(result.uncertain)} checks straddle their threshold;")
        lines.append(
            "add documents in those scripts to decide (policy: uncertain = "
            f'"{result.policy.uncertain}").'
        )
    return lines


def verdict_line(result: GateResult, head: str | None = None) -> str:
    """`verdict: PASS|FAIL (N failed, N uncertain, N passed, N blocking findings)`, read from
    the result (head: the word when the caller knows more, "PASS, LOSSY")."""
    head = head or ("PASS" if result.passed else "FAIL")
    n = {v: sum(c.verdict == v for c in result.checks) for v in ("fail", "uncertain", "pass")}
    return (
        f"verdict: {head} ({n['fail']} failed, {n['uncertain']} uncertain, "
        f"{n['pass']} passed, {len(result.blocking)} blocking findings)"
    )
