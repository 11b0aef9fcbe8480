"""What `fertility fix` reports: fix-report.json (`FixResult`, schema "fertility.fix/1") and
the parts of it read off the held-out measurement (per-language rows old against new, the
languages the new tokenizer serves worse, the round trip, the special tokens' ids). The run
that fills it is fertility/fix/run.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

from fertility.fix import normalize
from fertility.measure.metrics import BEFORE_AFTER

if TYPE_CHECKING:  # fix-report.json's records (fertility/schemas/fix.py), for mypy only
    from fertility.gate import GateResult
    from fertility.measure import Report
    from fertility.schemas import fix as fix_json
    from fertility.schemas.corpus import CorpusSummary
    from fertility.schemas.report import RowNumbers

SCHEMA: Final = "fertility.fix/1"
# tokenizer labels in the held-out measurement, and the keys of a row's two sides
BEFORE: Final = "before"
AFTER: Final = "after"
# A language whose held-out chars/token falls by more than this share against --from is a
# warning: the temperature gave its share of the training text (and so of the vocabulary) to
# other languages. 5%: beyond the width of a held-out interval (about +-2% at 1000
# documents), and what a model pays in context and compute on that language.
WORSE_SHARE = 0.05


@dataclass
class FixResult:
    paths: fix_json.FixPaths  # tokenizer, fix_report, report_html, heldout, model (.model)
    rows: list[fix_json.FixRow]  # per (group, key): before/after metrics on held-out text
    gate: GateResult  # of the new tokenizer
    special_tokens: list[fix_json.SpecialToken]  # token, old_id, new_id, kept
    changes: dict[str, list[Any]]  # what differs from --from: {field: [old, new]}
    tokenizer: fix_json.FixTokenizer  # kind, vocab_size, fingerprint of the new tokenizer
    settings: fix_json.FixSettings
    split: fix_json.Split
    sampling: fix_json.Sampling
    corpus: CorpusSummary
    timings: fix_json.FixTimings
    report: Report = field(repr=False)  # the held-out measurement
    normalizer_preview: dict | None = None  # what --nfc/--nfkc changes in the training text
    roundtrip: dict[str, fix_json.Roundtrip] = field(default_factory=dict)  # per language
    # languages worse than --from (WORSE_SHARE)
    tradeoffs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.gate.passed)

    def to_dict(self) -> fix_json.Fix:
        """The content of fix-report.json (schema "fertility.fix/1")."""
        return {
            "schema": SCHEMA,
            "settings": self.settings,
            "tokenizer": self.tokenizer,
            "paths": self.paths,
            "corpus": self.corpus,
            "split": self.split,
            "sampling": self.sampling,
            "special_tokens": self.special_tokens,
            "changes": self.changes,
            "rows": self.rows,
            "normalizer_preview": self.normalizer_preview,
            "roundtrip": self.roundtrip,
            "tradeoffs": {"worse_share": WORSE_SHARE, "languages": self.tradeoffs},
            "gate": self.gate.to_dict(),
            "timings": self.timings,
            "measurement": self.report.to_dict(),
        }


def special_ids(
    planned: list[tuple[str, int | None]], new, unk: str | None
) -> list[fix_json.SpecialToken]:
    have = dict(new.special_tokens)
    if unk is not None and new.unk_id is not None:
        have.setdefault(unk, int(new.unk_id))  # SentencePiece lists its UNK apart
    return [
        {"token": t, "old_id": i, "new_id": have.get(t), "kept": i is not None and have.get(t) == i}
        for t, i in planned
    ]


def heldout_rows(report, has_before: bool) -> list[fix_json.FixRow]:
    """Per (group, key) of the new tokenizer: its BEFORE_AFTER columns, the old one's, and
    the ratio."""

    def metrics(r: dict) -> RowNumbers:
        # a row of the table (Report.rows: untyped); BEFORE_AFTER are RowNumbers' keys
        return cast("RowNumbers", {c: r[c] for c in BEFORE_AFTER if c in r})

    before = {
        (r["group"], r["key"]): metrics(r) for r in (report.rows(BEFORE) if has_before else [])
    }
    out: list[fix_json.FixRow] = []
    for r in report.rows(AFTER):
        a, b = metrics(r), before.get((r["group"], r["key"]))
        ratio = (
            a["chars_per_token"] / b["chars_per_token"]
            if b and b["chars_per_token"] and a["chars_per_token"] is not None
            else None
        )
        out.append(
            {
                "group": r["group"],
                "key": r["key"],
                BEFORE: b,
                AFTER: a,
                "chars_per_token_ratio": ratio,
            }
        )
    return out


def tradeoffs(rows: list[fix_json.FixRow], sampling: fix_json.Sampling) -> list[dict[str, Any]]:
    """The languages whose held-out chars/token fell by more than WORSE_SHARE against --from,
    with their share of the training text now, at temperature 1 (the corpus's) and at 0 (all
    the same), and whether raising the temperature gives them more: d p_g / dT has the sign
    of ln n_g - sum_h p_h ln n_h, so a language larger than the mix's (geometric) average
    gains from a higher temperature and a smaller one from a lower."""
    langs = sampling["languages"]
    have = {k: v for k, v in langs.items() if v["corpus_share"] > 0}
    mean_log = sum(v["share"] * math.log(v["corpus_share"]) for v in have.values())
    out = []
    for row in rows:
        ratio, lang = row["chars_per_token_ratio"], row["key"]
        if row["group"] != "language" or ratio is None or ratio >= 1 - WORSE_SHARE:
            continue
        s = langs.get(lang)
        if not s or lang not in have:
            continue
        out.append(
            {
                "lang": lang,
                "before": row[BEFORE]["chars_per_token"],
                "after": row[AFTER]["chars_per_token"],
                "ratio": ratio,
                "share": s["share"],
                "share_at_1": s["corpus_share"],
                "share_at_0": 1 / len(have),
                "raise_gives_more": math.log(s["corpus_share"]) > mean_log,
            }
        )
    return out


def changed_fields(old, new) -> dict:
    if old is None:
        return {}
    a, b = old.config() or {}, new.config() or {}
    out: dict[str, list[Any]] = {"vocab_size": [int(old.vocab_size), int(new.vocab_size)]}
    if old.kind != new.kind:
        out["kind"] = [old.kind, new.kind]
    for key in ("model", "normalizer", "pattern", "pattern_regex", "byte_level", "byte_fallback"):
        if a.get(key) != b.get(key):
            out[key] = [a.get(key), b.get(key)]
    return out


def roundtrip_rows(report, heldout_changes: dict) -> dict[str, fix_json.Roundtrip]:
    """Per held-out language: documents checked, round-trip failures, and how many of the
    documents (and what in them) the normaliser changes: with byte fallback nothing else in
    the new tokenizer loses text, so those are the failures' cause."""
    out: dict[str, fix_json.Roundtrip] = {}
    for r in report.rows(AFTER):
        if r["group"] != "language":
            continue
        seen = heldout_changes.get(r["key"]) or {}
        out[r["key"]] = {
            "checked": int(r["roundtrip_checked"] or 0),
            "failures": int(r["roundtrip_failures"] or 0),
            "normalizer_changed": int(seen.get("changed_documents", 0)),
            "changes": list(seen.get("changes", []))[:5],
        }
    return out


def preview_lines(preview: dict | None, top: int = 5) -> list[str]:
    """What the asked-for normaliser changes (the run's progress and fix_text print it)."""
    if not preview:
        return []
    name = preview["normalizer"]
    head = (
        f"normaliser {name} (asked for) changes {preview['changed_documents']:,} of "
        f"{preview['documents']:,} training documents before training"
        + (":" if preview["changes"] else "; decode(encode(x)) is x for the others")
    )
    rows = preview["changes"][:top]
    more = preview["distinct_changes"] - len(rows)
    return (
        [head]
        + [f"  {normalize.describe(c, name)}" for c in rows]
        + ([f"  and {more} more (fix-report.json normalizer_preview)"] if more > 0 else [])
    )
