"""What a reader needs first: one verdict per tokenizer with the figures that decide it, and
the findings grouped one line per (rule, tokenizer), each rule's line as its declaration says
(fertility.findings.registry). The terminal report, the gate's text (gate_lines: the one text
of a GateResult) and the HTML page all start from these; the full findings stay in -v, JSON
and the HTML details.

Verdicts are the gate's (fertility.gate.evaluate with the same policy), never a second rule.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from fertility.findings import REGISTRY, RULES, SEVERITY_ORDER
from fertility.gate import NEED_MORE, GateResult
from fertility.numbers import fmt
from fertility.options import Severity
from fertility.report.table import cells, fit_grid, ljust


@dataclass
class Verdict:
    label: str
    verdict: str  # "PASS" | "PASS, LOSSY" | "FAIL" | "UNCERTAIN"
    failed: int  # failed checks
    uncertain: int
    passed: int
    worst: Any  # the chars_per_token script check furthest under its floor
    below: int  # scripts whose interval lies under their floor
    unsure: int  # scripts whose interval straddles their floor
    floored: int  # scripts checked against a floor
    premium: Any  # the premium check with the highest premium, or None
    rt_failures: int
    rt_checked: int
    blocking: int  # findings of a severity the policy fails on (`fail_on`)
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
        langs = [r for r in report.table if r["tokenizer"] == lab and r["group"] == "language"]
        rt_f = int(sum(r["roundtrip_failures"] for r in langs))
        rt_n = int(sum(r["roundtrip_checked"] for r in langs))
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
                unsure=sum(c.verdict == "uncertain" for c in cpt),
                floored=len(cpt),
                premium=top,
                rt_failures=rt_f,
                rt_checked=rt_n,
                blocking=len(blocking),
                warnings=sum(f.severity == "warning" for f in mine),
            )
        )
    return out


def verdict_cells(v: Verdict) -> list[str]:
    """The summary row of one tokenizer, as the cells of `SUMMARY_HEADERS`."""
    if v.worst is not None:
        w = v.worst
        rel = ">=" if w.value >= w.threshold else "<"
        # an interval across the floor decides nothing yet: said, not counted as under it
        unsure = ", uncertain" if w.verdict == "uncertain" else ""
        worst = f"{w.key} {w.value:.2f} {rel} {w.threshold:g}{unsure}"
        below = f"{v.below} of {v.floored}" + (f", {v.unsure} uncertain" if v.unsure else "")
    else:
        worst, below = "-", "-"
    if v.premium is not None:
        p = v.premium
        rel = "<=" if p.value <= p.threshold else ">"
        prem = f"{p.key} {p.value:.2f}x {rel} {p.threshold:g}"
    else:
        prem = "-"
    rt = f"{v.rt_failures:,} of {v.rt_checked:,}" if v.rt_checked else "-"
    return [
        v.verdict,
        v.label,
        worst,
        below,
        f"{v.failed:,} of {v.failed + v.uncertain + v.passed:,}",
        f"{v.blocking:,}",
        rt,
        prem,
    ]


# most useful first: a narrow terminal loses the last ones (with a line saying so)
SUMMARY_HEADERS = [
    "verdict",
    "tokenizer",
    "worst script: chars/token vs floor",
    "scripts under floor",
    "checks failed",
    "blocking findings",
    "round trips failed (docs)",
    "max premium vs reference",
]


def verdict_table(vs: list[Verdict], width: int, verbose: bool = False) -> list[str]:
    """The summary rows as a terminal table within `width` (fertility.report.table.fit_grid:
    headers wrapped, then the last columns left out with a line naming them; -v: all)."""
    return fit_grid(
        SUMMARY_HEADERS, [verdict_cells(v) for v in vs], width, left=2, keep=4, verbose=verbose
    )


def verdict_legend(fail_on: tuple) -> str:
    """What the table's counts are, in words: a check is one policy threshold on one row; a
    blocking finding is a rule's diagnosis of a severity the policy fails on."""
    sev = " or ".join(fail_on) or "none"
    return (
        "checks failed: thresholds a row's interval misses; blocking findings: findings "
        f"of severity {sev}, each failing the gate"
    )


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
    keys: list[str]  # each script or language once, worst first (those without a value last)
    values: dict[str, str]  # key -> its worst value, formatted with its unit ("74.9%")
    unit: str | None  # what the values are: the rule's summary phrase ("N% byte pieces")
    worst_key: str | None
    worst: str | None  # the worst value, as a phrase


def _value_format(phrase: str) -> tuple[str, str]:
    """The summary phrase split into the value's own format (the `{...}` field and a unit
    sign right after it: `%` is in the spec, `x` follows it) and the phrase naming the unit
    with N for the value: "{:.1f}x the tokens of the rest" -> ("{:.1f}x", "Nx the tokens
    of the rest")."""
    start, end = phrase.index("{"), phrase.index("}") + 1
    if phrase[end : end + 1] == "x":
        end += 1
    spec = phrase[start:end]
    sign = "%" if "%" in spec else ("x" if spec.endswith("x") else "")
    return spec, phrase[:start] + "N" + sign + phrase[end:]


def group_findings(
    findings: list, labels: list[str] | None = None, table: list[dict] | None = None
) -> list[Group]:
    """One Group per (severity, rule, tokenizer), errors first, then the rules in diagnose's
    order, then the tokenizers in report order. Within a group each key (script, language)
    comes once, with the worst value its findings give (a rule may find one script twice:
    merge-starvation's mark test and its length test), worst first. table: the report's
    table (Report.table), which gives the value of a finding whose evidence lacks the
    summary's key when that key is a metric of the row the finding is about."""
    groups: dict[tuple, list] = {}
    for f in findings:
        groups.setdefault((f.severity, f.rule, f.tokenizer), []).append(f)
    tok_order = {lab: i for i, lab in enumerate(labels or [])}
    out = []
    for (sev, rule, tok), fs in groups.items():
        summary = REGISTRY[rule].summary if rule in REGISTRY else None
        sign = -1 if summary and summary.worst == "max" else 1  # sign * value: lower is worse
        best: dict[str, float | None] = {}
        for f in fs:
            v = f.evidence.get(summary.key) if summary else None
            if v is None and summary is not None:
                v = _table_value(table, f, summary.key)
            v = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
            old = best.setdefault(f.key, v)
            if v is not None and (old is None or sign * v < sign * old):
                best[f.key] = v
        got = {k: v for k, v in best.items() if v is not None}
        valued = sorted(got, key=lambda k: sign * got[k])
        keys = valued + [k for k in best if best[k] is None]
        values: dict[str, str] = {}
        unit = worst = None
        if summary is not None:
            spec, unit = _value_format(summary.phrase)
        if summary is not None and valued:
            whole = "{:d}" in spec
            values = {k: spec.format(int(got[k]) if whole else got[k]) for k in valued}
            worst = summary.phrase.format(int(got[valued[0]]) if whole else got[valued[0]])
        out.append(Group(sev, rule, tok, keys, values, unit, valued[0] if valued else None, worst))
    out.sort(
        key=lambda g: (
            SEVERITY_ORDER.get(g.severity, 9),
            RULES.index(g.rule) if g.rule in RULES else 99,
            tok_order.get(g.tokenizer, 99),
        )
    )
    return out


def _table_value(table: list[dict] | None, f, column: str):
    """The table's `column` on the row a finding is about, or None."""
    if not table or column not in table[0]:  # every row has the same columns
        return None
    rows = [
        r
        for r in table
        if r["tokenizer"] == f.tokenizer and r["group"] == f.group and r["key"] == f.key
    ]
    if len(rows) != 1:
        return None
    v = rows[0][column]
    return None if v is None or v != v else v  # NaN: no value


def group_line(g: Group, width: int, tok_width: int = 0, *, indent: str = "  ") -> str:
    """`  tokenizer  N: KEY value, KEY value`, worst first, each key once; the list is
    shortened to the width with "+N more" (the least bad ones left out, never a number cut)."""
    n = len(g.keys)
    head = f"{indent}{ljust(g.tokenizer, tok_width)}  {n}: "
    items = [f"{k} {g.values[k]}" if k in g.values else k for k in g.keys]
    room = width - cells(head) if width > 0 else float("inf")
    for i in range(n, 0, -1):
        more = f" +{n - i} more" if i < n else ""
        text = ", ".join(items[:i]) + more
        if cells(text) <= room or i == 1:
            return head + text
    return head  # (no keys: not a group diagnose makes)


def rule_heading(g: Group) -> str:
    """`severity rule: what the values are` over the rule's lines."""
    return f"{g.severity} {g.rule}" + (f" ({g.unit})" if g.unit else "")


def group_lines(groups: list[Group], width: int) -> list[str]:
    """The groups under one heading per (severity, rule): the rule and the unit of its
    values once, then one line per tokenizer."""
    tw = max((cells(g.tokenizer) for g in groups), default=0)
    out: list[str] = []
    last = None
    for g in groups:
        if (g.severity, g.rule) != last:
            out.append(rule_heading(g))
            last = (g.severity, g.rule)
        out.append(group_line(g, width, tw))
    return out


def findings_head(findings: list, n_lines: int) -> str:
    """The counts above the grouped findings, in words."""
    n = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    counts = ", ".join(
        f"{v:,} {s if s == 'info' or v == 1 else s + 's'}" for s, v in n.items() if v
    )
    return (
        f"findings: {counts} on {n_lines} lines (one per rule and tokenizer, worst first; "
        "-v: each in full)"
    )


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
    lines = wrap_text(f"fertility gate: {head} ({labels}; policy: {result.policy.source})", width)
    if result.subset is not None:  # what it read, as the report's corpus line says
        lines += wrap_text(f"read: {result.subset['statement']}", width)
    if report is not None:
        lines += verdict_table(vs, width, verbose)
        lines += textwrap.wrap(verdict_legend(result.policy.fail_on), width)
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
                "none" if c.lo is None or c.hi is None else f"[{c.lo:.3f}, {c.hi:.3f}]",
                "" if c.threshold is None else f"{c.direction} {c.threshold:g}",
                c.note,
            ]
        )
    headers = (
        ["verdict"]
        + (["tokenizer"] if many else [])
        + ["check", "row", "value", "95% interval", "threshold", "note"]
    )
    # notes are words, not numbers: the one column left out when the width is short
    checks = fit_grid(headers, rows, width, keep=len(headers) - 1, verbose=verbose)
    lines += ["", f"checks ({len(result.checks)}):"] + checks
    for s in result.skipped:
        lines += wrap_text(
            f"skipped {s['tokenizer']} {s['group']}={s['key']}: {s['reason']}", width
        )
    if result.premium_note:
        lines += wrap_text(result.premium_note, width)
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
        lines += [""] + wrap_text(
            f"blocking findings ({len(result.blocking)}): one line per rule and tokenizer, "
            "each script or language once with its worst value (-v: each with its cause "
            "and fix)",
            width,
        )
        lines += group_lines(group_findings(result.blocking), width)
    for f in (result.blocking if verbose else []) + explain:
        lines += wrap_text(
            f"{f.severity.upper()} {f.tokenizer} {f.rule} {f.group}={f.key}: {f.cause} Fix: {f.fix}",
            width,
        )
    if result.uncertain:
        more = result.subset.get("more") if result.subset else None
        # the corpus has more than was read: reading it comes before adding documents
        todo = f"read more: {more}" if more else "add documents in those scripts"
        lines += wrap_text(
            f"{NEED_MORE}: {len(result.uncertain)} checks straddle their threshold; {todo} "
            f'to decide (policy: uncertain = "{result.policy.uncertain}").',
            width,
        )
    # last, whole on one line: scripts read it
    lines.append(verdict_line(result, head))
    return lines


def wrap_text(text: str, width: int) -> list[str]:
    """A sentence within `width`, continued lines indented (words never cut; width 0: one
    line)."""
    if width <= 0:
        return [text]
    return textwrap.wrap(
        text, max(width, 40), subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    ) or [""]


def verdict_line(result: GateResult, head: str | None = None) -> str:
    """`verdict: FAIL (3 of 20 checks failed, 1 uncertain; 2 blocking findings)`, read from
    the result (head: the word when the caller knows more, "PASS, LOSSY"). Short enough for
    80 columns with four-digit counts: it is always one line, the last."""
    head = head or ("PASS" if result.passed else "FAIL")
    n = {v: sum(c.verdict == v for c in result.checks) for v in ("fail", "uncertain")}
    return (
        f"verdict: {head} ({n['fail']} of {len(result.checks)} checks failed, "
        f"{n['uncertain']} uncertain; {len(result.blocking)} blocking "
        f"finding{'' if len(result.blocking) == 1 else 's'})"
    )
