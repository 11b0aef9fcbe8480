"""What `fertility extend` measures and writes: the target pieces, the held-out measurement,
the ids check and the ids map (fertility/extend/run.py runs them; the printed summary is
fertility/extend/text.py's extend_text)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, cast

import numpy as np

from fertility.corpus import Corpus
from fertility.findings import diagnose_under
from fertility.gate import evaluate
from fertility.measure.metrics import BEFORE_AFTER
from fertility.policy import Policy, load_policy
from fertility.tokenizers.patterns import compile_pattern

if TYPE_CHECKING:  # extend's records (fertility/schemas/extend.py), for mypy only
    from fertility.schemas.extend import ExtendIds, ExtendRow, NewToken, Unchanged
    from fertility.schemas.report import RowNumbers

MARKS = "\\p{M}\\u200c\\u200d"


# ---------------------------------------------------------------- learning text


def target_pieces(texts: list[str], regex: str, scripts: list[str]) -> Counter:
    """How often each piece of `texts` (cut by `regex`) occurs, counting only pieces that are
    an optional space, a letter of `scripts`, then letters of `scripts`, marks and joiners:
    a new token learned from them always holds a target-script character's bytes."""

    letters = "".join(f"\\p{{sc={s}}}" for s in scripts)
    ok = compile_pattern(f" ?[{letters}][{letters}{MARKS}]*").fullmatch
    split = compile_pattern(regex).finditer
    counts: Counter = Counter()
    for text in texts:
        counts.update(p for p in (m.group() for m in split(text)) if ok(p))
    return counts


# ---------------------------------------------------------------- measuring


def load(policy):
    return policy if isinstance(policy, Policy) else load_policy(policy)


def measure(files: list[str], toks: list, pol, seed: int):
    """The held-out measurement (as `fertility report` measures) with its findings."""
    # deferred: looked up when called, so a test can replace it
    from fertility.measure import analyze

    held = Corpus(files, lang_field="lang", on_warning=lambda m: None)
    report = analyze(held, toks, pretokenizers=[], seed=seed)
    report.findings = diagnose_under(report, pol)
    return report


def failing_langs(report, label: str, pol) -> list[str]:
    """Languages the gate fails for `label`: a failed language check or blocking finding, or
    a failed script check on the script that dominates the language's documents."""

    gate = evaluate(report, pol, label=label, findings=report.findings)
    bad = {
        ("language", c.key) for c in gate.checks if c.verdict == "fail" and c.group == "language"
    }
    bad |= {("script", c.key) for c in gate.checks if c.verdict == "fail" and c.group == "script"}
    bad |= {(f.group, f.key) for f in gate.blocking}
    docs = report.docs[report.docs["tokenizer"] == label]
    dominant = _dominant_scripts(docs)
    return sorted(
        lang
        for lang, script in dominant.items()
        if ("language", lang) in bad or ("script", script) in bad
    )


def _dominant_scripts(docs) -> dict[str, str]:
    by = docs.groupby(["lang", "script"])["chars"].sum().reset_index()
    by = by.sort_values(["lang", "chars"], ascending=[True, False]).drop_duplicates("lang")
    return dict(zip(by["lang"], by["script"]))


def scripts_of(report, label: str, langs: list[str]) -> list[str]:
    """The script that dominates each target language's held-out documents."""
    dominant = _dominant_scripts(report.docs[report.docs["tokenizer"] == label])
    return sorted({dominant[x] for x in langs if x in dominant})


def same_ids(base, ext, docs: list[tuple[str, str]]) -> dict[str, Unchanged]:
    """Per language of the other (not target) held-out documents: how many get exactly the
    base's ids from the extended tokenizer, and how many hold a mark or joiner."""

    marked = compile_pattern(f"[{MARKS}]").search
    out: dict[str, Unchanged] = {}
    for lang in sorted({g for _, g in docs}):
        texts = [t for t, g in docs if g == lang]
        a, b = base.encode_batch(texts), ext.encode_batch(texts)
        same = [np.array_equal(x.ids, y.ids) for x, y in zip(a, b)]
        plain = [not marked(t) for t in texts]
        out[lang] = {
            "documents": len(texts),
            "same_ids": int(sum(same)),
            "without_marks": int(sum(plain)),
            "without_marks_same_ids": int(sum(s and p for s, p in zip(same, plain))),
        }
    return out


def rows(report, before: str, after: str) -> list[ExtendRow]:
    """Per (group, key) of `after`: its BEFORE_AFTER columns, `before`'s, and the
    chars/token ratio."""

    def metrics(r: dict) -> RowNumbers:
        # a row of the table (Report.rows: untyped); BEFORE_AFTER are RowNumbers' keys
        return cast("RowNumbers", {c: r[c] for c in BEFORE_AFTER if c in r})

    old = {(r["group"], r["key"]): metrics(r) for r in report.rows(before)}
    out: list[ExtendRow] = []
    for r in report.rows(after):
        a, b = metrics(r), old.get((r["group"], r["key"]))
        new_cpt, old_cpt = a.get("chars_per_token"), b.get("chars_per_token") if b else None
        ratio = new_cpt / old_cpt if old_cpt and new_cpt else None
        out.append(
            {
                "group": r["group"],
                "key": r["key"],
                "base": b,
                "extended": a,
                "chars_per_token_ratio": ratio,
            }
        )
    return out


# ---------------------------------------------------------------- the ids map


def ids_map(first: int, specials: dict, spelling: dict[int, list[int]], base, ext) -> ExtendIds:
    """ids-map.json: ids below `first` are the base's, unchanged; per new id its bytes (as the
    extended tokenizer decodes it) and the base ids it replaces (`spelling`). `fingerprint` is
    the extended tokenizer's, so `pretrain --init-from` can tell the map is for it."""

    def entry(i: int) -> NewToken:
        b = ext.token_bytes(i)
        try:
            text = b.decode("utf-8")
        except UnicodeDecodeError:
            text = None  # part of a character: only its bytes say what it is
        return {"id": i, "hex": b.hex(), "text": text, "base_ids": spelling[i]}

    return {
        "schema": "fertility.extend-ids/1",
        "fingerprint": ext.fingerprint,
        "base": {
            "spec": base.spec,
            "kind": base.kind,
            "fingerprint": base.fingerprint,
            "vocab_size": int(base.vocab_size),
        },
        "unchanged_ids": [0, first],
        "special_tokens": specials,
        "new": [entry(i) for i in sorted(spelling)],
    }
