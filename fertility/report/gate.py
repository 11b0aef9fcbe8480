"""The gate's result rendered: its plain text (gate_text, on summary.gate_lines, the one text
of a GateResult) and JUnit XML (gate_junit). The decision itself is fertility.gate's; nothing
here decides."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from fertility.gate import NEED_MORE, Check, GateResult
from fertility.report.summary import gate_lines


def gate_text(result: GateResult) -> str:
    """The gate's verdict as text without a Report (the trainer's log): `fertility gate -v`'s
    text less the verdict table, every check naming its tokenizer."""
    # verbose: nothing is cut to a width, so the width is not used
    return "\n".join(gate_lines(None, result, 0, verbose=True, tokenizers=True))


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
