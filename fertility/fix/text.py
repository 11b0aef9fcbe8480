"""What `fertility fix` prints (fix_text): what the normaliser changes, the held-out figures
before and after, the trade-offs, the verdict. Nothing here measures or decides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fertility.fix import normalize
from fertility.fix.result import AFTER, BEFORE, WORSE_SHARE, preview_lines
from fertility.report.heldout import cell, heldout_line

if TYPE_CHECKING:
    from fertility.fix.result import FixResult


def tradeoff_lines(tradeoffs: list[dict], temperature: float) -> list[str]:
    """One warning per language the new tokenizer serves worse than --from, with the knob."""
    out = []
    for t in tradeoffs:
        now, hi, lo = t["share"], t["share_at_1"], t["share_at_0"]
        if max(abs(hi - now), abs(lo - now)) < 0.1 * now:
            knob = (
                "the temperature hardly moves its share (the languages are of similar sizes): "
                "a larger --vocab-size is what gives it more tokens"
            )
        elif t["raise_gives_more"]:
            knob = (
                "raise --temperature to give it more of the training text (1: its share of "
                "the corpus), at the smaller languages' cost, or a larger --vocab-size"
            )
        else:
            knob = (
                "lower --temperature to give it more of the training text (0: every language "
                "the same share), at the larger languages' cost, or a larger --vocab-size"
            )
        out.append(
            f"warning: {t['lang']} {t['before']:.2f} -> {t['after']:.2f} chars/token, "
            f"{1 - t['ratio']:.0%} worse than before (fix warns beyond {WORSE_SHARE:.0%}): "
            f"at --temperature {temperature:g} it gets {now:.0%} of the training text "
            f"({hi:.0%} at 1, {lo:.0%} at 0); {knob} (docs/FIX.md shows the curve)"
        )
    return out


def fix_text(r: FixResult) -> str:
    """What `fertility fix` prints: what the normaliser changes, the special tokens, then the
    held-out figures per script and language, why any text does not round-trip, the verdict."""

    s, g = r.split, r.gate
    name = (r.normalizer_preview or {}).get("normalizer")
    lines = [
        f"fertility fix: {r.tokenizer['vocab_size']:,} tokens, {r.settings['model']} "
        f"({r.settings['backend']}), normaliser {name or 'none'} -> {r.paths['tokenizer']}"
    ]
    lines += preview_lines(r.normalizer_preview)
    for t in r.special_tokens:
        how = "kept" if t["kept"] else "new" if t["old_id"] is None else "id not kept"
        lines.append(f"special token {t['token']}: id {t['old_id']} -> {t['new_id']} ({how})")
    lines += [f"changed {k}: {a} -> {b}" for k, (a, b) in r.changes.items() if k != "pattern_regex"]
    lines.append(
        f"wrote {r.paths['fix_report']}, {r.paths['report_html']}; held-out text in "
        f"{r.paths['heldout']}"
    )
    lines += [
        heldout_line(s),
        f"{'':<19}{'chars/token ' + BEFORE:>20}  {AFTER:>20}  {'change':>7}  round trip",
    ]
    for group in ("script", "language"):
        for row in sorted((x for x in r.rows if x["group"] == group), key=lambda x: x["key"]):
            a, ratio = row[AFTER], row["chars_per_token_ratio"]
            lines.append(
                f"{group:<9}{row['key']:<10}{cell(row[BEFORE])}  {cell(a)}  "
                f"{(f'{ratio:.2f}x' if ratio else '-'):>7}  "
                f"{a['roundtrip_failures'] or 0}/{a['roundtrip_checked'] or 0} failed"
            )
    failed = checked = 0
    for lang, rt in sorted(r.roundtrip.items()):
        failed, checked = failed + rt["failures"], checked + rt["checked"]
        if not rt["failures"]:
            continue
        # changes are recorded only where a normaliser ran, so `name` is set when there are any
        why = "; ".join(normalize.describe(c, name) for c in rt["changes"][:3]) if name else ""
        rest = rt["failures"] - rt["normalizer_changed"]
        lines.append(
            f"round trip {lang}: {rt['failures']} of {rt['checked']} held-out documents "
            "do not decode to their text"
            + (f"; {why}" if why else "")
            + (
                f"; {rest} not from the normaliser (fix-report.json measurement)"
                if rest > 0
                else ""
            )
        )
    lines += tradeoff_lines(r.tradeoffs, r.settings["temperature"])
    counts = {v: sum(c.verdict == v for c in g.checks) for v in ("fail", "uncertain", "pass")}
    verdict = (
        "FAIL"
        if not g.passed
        else "PASS"
        if not failed
        else f"PASS, LOSSY ({failed} of {checked} held-out documents do not round-trip)"
    )
    lines.append(
        f"gate: {verdict} ({counts['fail']} failed, {counts['uncertain']} uncertain, "
        f"{counts['pass']} passed, {len(g.blocking)} blocking findings)"
    )
    lines += [f"  {c.verdict:<9} {c.describe()}" for c in g.checks if c.verdict != "pass"]
    lines += [f"  {f.severity:<9} {f.rule} {f.group}={f.key}: {f.cause}" for f in g.blocking]
    return "\n".join(lines) + "\n"
