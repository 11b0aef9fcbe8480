"""The gate's result rendered: its plain text (gate_text) and JUnit XML (gate_junit).
The decision itself is fertility.gate's; nothing here decides."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from fertility.gate import NEED_MORE, Check, GateResult


def gate_text(result: GateResult) -> str:
    """The gate's verdict as text: one line per check, skipped row and blocking finding."""
    head = "PASS" if result.passed else "FAIL"
    labels = sorted({c.tokenizer for c in result.checks})
    lines = [
        f"fertility gate: {head} ({', '.join(labels) or 'no tokenizer'}; "
        f"policy: {result.policy.source})"
    ]
    for c in result.checks:
        val = "n/a" if c.value is None else f"{c.value:.3f}"
        iv = "" if c.lo is None else f"[{c.lo:.3f}, {c.hi:.3f}]"
        thr = "" if c.threshold is None else f"{c.direction} {c.threshold:g}"
        lines.append(
            f"  {c.verdict.upper():<9} {c.tokenizer:<14} {c.name:<18} "
            f"{c.group + '=' + c.key:<16} {val:>8} {iv:<18} {thr}"
            + (f"  ({c.note})" if c.note else "")
        )
    for s in result.skipped:
        lines.append(f"  skipped   {s['tokenizer']:<14} {s['group']}={s['key']}: {s['reason']}")
    # a failed round trip is explained by its finding (which code points change, why),
    # a warning the text would not show otherwise
    lossy = {
        (c.tokenizer, c.key) for c in result.checks if c.name == "roundtrip" and c.verdict == "fail"
    }
    explain = [
        f
        for f in result.findings
        if f.rule == "roundtrip" and (f.tokenizer, f.key) in lossy and f not in result.blocking
    ]
    for f in result.blocking + explain:
        lines.append(
            f"  {f.severity.upper():<9} {f.tokenizer:<14} {f.rule} "
            f"{f.group}={f.key}: {f.cause} Fix: {f.fix}"
        )
    fails = sum(c.verdict == "fail" for c in result.checks)
    summary = (
        f"{fails} failed, {len(result.uncertain)} uncertain, "
        f"{sum(c.verdict == 'pass' for c in result.checks)} passed, "
        f"{len(result.blocking)} blocking findings"
    )
    lines.append(f"verdict: {head} ({summary})")
    if result.uncertain:
        rule = result.policy.uncertain
        lines.append(
            f"{NEED_MORE}: {len(result.uncertain)} checks straddle their threshold; "
            f"add documents in those scripts to decide (policy: uncertain = "
            f'"{rule}").'
        )
    return "\n".join(lines)


def gate_junit(result: GateResult) -> str:
    """JUnit XML: one testcase per check and per blocking finding."""
    fail_uncertain = result.policy.uncertain == "fail"
    root = ET.Element("testsuites", name="fertility gate")
    by_label: dict[str, list] = {}
    for c in result.checks:
        by_label.setdefault(c.tokenizer, []).append(c)
    for f in result.blocking:
        by_label.setdefault(f.tokenizer, []).append(f)
    total = failures = skipped = 0
    for label, items in by_label.items():
        suite = ET.SubElement(root, "testsuite", name=f"fertility gate: {label}")
        n_fail = n_skip = 0
        for it in items:
            if isinstance(it, Check):
                case = ET.SubElement(
                    suite,
                    "testcase",
                    classname=f"fertility.gate.{label}",
                    name=f"{it.name}[{it.group}={it.key}]",
                )
                if it.verdict == "fail" or (it.verdict == "uncertain" and fail_uncertain):
                    kind = "fail" if it.verdict == "fail" else "uncertain"
                    msg = it.describe() + (f" ({NEED_MORE})" if kind == "uncertain" else "")
                    ET.SubElement(case, "failure", type=kind, message=msg).text = it.note
                    n_fail += 1
                elif it.verdict == "uncertain":
                    ET.SubElement(case, "skipped", message=f"{it.describe()} ({NEED_MORE})")
                    n_skip += 1
            else:
                case = ET.SubElement(
                    suite,
                    "testcase",
                    classname=f"fertility.findings.{label}",
                    name=f"{it.rule}[{it.group}={it.key}]",
                )
                ET.SubElement(
                    case, "failure", type=it.severity, message=it.cause
                ).text = f"Fix: {it.fix}"
                n_fail += 1
        suite.set("tests", str(len(items)))
        suite.set("failures", str(n_fail))
        suite.set("skipped", str(n_skip))
        total, failures, skipped = total + len(items), failures + n_fail, skipped + n_skip
    root.set("tests", str(total))
    root.set("failures", str(failures))
    root.set("skipped", str(skipped))
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
