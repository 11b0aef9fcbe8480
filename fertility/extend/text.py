"""What `fertility extend` prints (extend_text): the added tokens, the split, the held-out
figures of the base and the extended tokenizer, the verdict. Nothing here measures or decides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fertility.report.heldout import cell, heldout_line

if TYPE_CHECKING:
    from fertility.extend.run import ExtendResult


def extend_text(r: ExtendResult) -> str:
    """What `fertility extend` prints: the added tokens, the split, the held-out figures per
    script and language, which other languages keep the base's ids, the verdict."""
    t, g = r.tokenizer, r.gate
    lines = [
        f"fertility extend: {r.base['spec']} + {t['added']:,} tokens (ids "
        f"{t['first_new_id']:,}..{t['first_new_id'] + t['added'] - 1:,}) for "
        f"{', '.join(r.langs)} ({', '.join(r.scripts)}; from {r.langs_from}) -> "
        f"{r.paths['tokenizer']}"
    ]
    if t["added"] < t["requested"]:
        lines.append(
            f"only {t['added']:,} of {t['requested']:,} requested: the target text "
            "offers no more merges"
        )
    if r.pattern["extended"] is None:
        lines.append("split: SentencePiece's own (no regex; it never cuts a word at its marks)")
    else:
        lines.append(
            f"split pattern {'widened' if r.pattern['changed'] else 'unchanged'}: "
            f"{r.pattern['extended']}"
        )
    lines.append(heldout_line(r.split))
    lines.append(f"{'':<19}{'chars/token base':>20}  {'extended':>20}  {'change':>7}  round trip")
    for group in ("script", "language"):
        for row in sorted((x for x in r.rows if x["group"] == group), key=lambda x: x["key"]):
            a, ratio = row["extended"], row["chars_per_token_ratio"]
            lines.append(
                f"{group:<9}{row['key']:<10}{cell(row['base'])}  {cell(a)}  "
                f"{(f'{ratio:.2f}x' if ratio else '-'):>7}  "
                f"{a.get('roundtrip_failures') or 0}/{a.get('roundtrip_checked') or 0}"
                " failed"
            )
    for lang, u in r.unchanged.items():
        lines.append(
            f"same ids as the base: {lang} {u['same_ids']}/{u['documents']} documents "
            f"({u['without_marks_same_ids']}/{u['without_marks']} without marks)"
        )
    counts = {v: sum(c.verdict == v for c in g.checks) for v in ("fail", "uncertain", "pass")}
    lines.append(
        f"gate: {'PASS' if g.passed else 'FAIL'} ({counts['fail']} failed, "
        f"{counts['uncertain']} uncertain, {counts['pass']} passed, "
        f"{len(g.blocking)} blocking findings)"
    )
    lines += [f"  {c.verdict:<9} {c.describe()}" for c in g.checks if c.verdict != "pass"]
    lines.append(f"wrote {r.paths['extend_report']}, {r.paths['ids_map']}")
    return "\n".join(lines) + "\n"
