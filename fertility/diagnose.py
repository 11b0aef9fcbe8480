"""Findings: why a script collapses under a tokenizer, and what to change.

Every rule reads the measurement frame of a Report (and, for parity, its per-document table);
nothing recounts the corpus. A rule yields Findings: a rule id, a severity, the row it is
about (tokenizer, group, key), the measured evidence, one plain sentence of cause and one of
fix. Thresholds holds every number a rule compares with; docs/GATE.md gives the reasons, and
a policy's `[rules]` table overrides them.

Severities: "error" only for what no amount of training can repair and the corpus shows
happening (a pre-tokenizer that cuts words at vowel signs, a ceiling below the floor);
"warning" for measured problems; "info" for what a tokenizer *would* do (pre-tokenizer
family rows) or configuration that did not change this corpus.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pandas as pd

from fertility import _parity
from fertility._stats import wilson
from fertility._tokconfig import inspect_config

if TYPE_CHECKING:
    from fertility.measure import Report

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
RULES = ("mark-split", "pretokenizer-ceiling", "merge-starvation", "byte-fallback", "unk",
         "normalization", "grapheme-split", "balance-inversion", "parity")
# Scripts where one character already carries a syllable or a morpheme: a token of one
# grapheme is normal there, so the grapheme test of merge-starvation does not apply.
IDEOGRAPHIC = ("Hani", "Hira", "Kana", "Hang", "Yiii", "Bopo")


def _floors(name: str) -> Any:
    from fertility.policy import default_floors  # policy imports this module

    return default_floors()[name]


@dataclass
class Finding:
    rule: str
    severity: str  # "error" | "warning" | "info"
    tokenizer: str
    group: str     # "script" | "language" | "all"
    key: str       # ISO 15924 code, language label, or "*"
    evidence: dict
    cause: str
    fix: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Thresholds:
    """Every number a rule compares with. Defaults and reasons: docs/GATE.md."""

    min_tokens: int = 100                  # rows with fewer tokens are too small to judge
    mark_initial_rate: float = 0.02        # mark-split: share of tokens or pre-tokens
    mark_initial_token_rate: float = 0.25  # mark-split from tokens alone (pre-tokenizer clean)
    script_floors: dict = field(default_factory=lambda: _floors("script_floors"))
    language_floors: dict = field(default_factory=lambda: _floors("language_floors"))
    default_floor: float | None = field(default_factory=lambda: _floors("default_floor"))
    exempt_scripts: tuple = field(default_factory=lambda: _floors("exempt_scripts"))
    ceiling_headroom: float = 1.25         # ceiling < floor * this: warning
    starvation_bytes_per_token: float = 1.5
    starvation_graphemes_per_token: float = 1.1
    starvation_ceiling_share: float = 0.6  # below this share of the ceiling: vocabulary limits
    byte_fallback_rate: float = 0.01
    unk_rate: float = 0.001
    top_chars: int = 5
    grapheme_split_rate: float = 0.10
    overrepresentation: float = 2.0        # token_share / byte_share
    flip_margin: float = 0.10              # relative gap both ways for a ranking flip
    premium: float = 2.0
    parity_min_lines: int = 10
    parity_min_overlap: float = 0.9        # share of lines two parallel files must share
    bootstrap: int = 1000
    seed: int = 0

    def floor_for(self, group: str, key: str) -> float | None:
        """Chars-per-token floor of a frame row; None when the row has none."""
        if group == "language":
            return self.language_floors.get(key)
        if group != "script" or key in self.exempt_scripts:
            return None
        if key in self.script_floors:  # a floor switched off (None) stays off
            return self.script_floors[key]
        return self.default_floor


def diagnose(report: Report, thresholds: Thresholds | None = None, *, reference: str = "en",
             premium_table: pd.DataFrame | None = None) -> list[Finding]:
    """All findings for a Report, most severe first.

    premium_table: `premiums(report, thresholds, reference=reference)` when the caller has
    already computed it (the gate checks the same table), so the bootstrap runs once.
    """
    t = thresholds if thresholds is not None else Thresholds()
    found: list[Finding] = []
    for rule in (_mark_split, _ceiling, _starvation, _fallback_unk, _normalization,
                 _grapheme_split, _balance):
        found.extend(rule(report, t))
    if premium_table is None:
        premium_table = premiums(report, t, reference=reference)
    found.extend(_parity_rule(premium_table, t, reference))
    found.sort(key=lambda f: (SEVERITY_ORDER[f.severity], f.tokenizer, RULES.index(f.rule),
                              f.group, f.key))
    return found


# ---------------------------------------------------------------- frame helpers

def _num(x: Any) -> float | None:
    """A plain float for JSON evidence; None for missing values."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else round(v, 4)


def _rows(report: Report, t: Thresholds, *, groups=("script",), pretokenizer=False) -> pd.DataFrame:
    f = report.frame
    is_pre = f["kind"] == "pretokenizer"
    sel = f[(is_pre if pretokenizer else ~is_pre) & f["group"].isin(groups)]
    return sel[sel["tokens"] >= t.min_tokens]


def _configs(report: Report) -> dict[str, dict]:
    return {d["label"]: d for d in report.tokenizers}


def _char_names(counts: dict | None, top: int) -> list[dict]:
    items = sorted((counts or {}).items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [{"char": c, "code": f"U+{ord(c):04X}" if len(c) == 1 else c,
             "name": unicodedata.name(c, "<unnamed>") if len(c) == 1 else "", "count": int(n)}
            for c, n in items]


def _finding(rule, severity, row, evidence, cause, fix) -> Finding:
    return Finding(rule, severity, str(row["tokenizer"]), str(row["group"]), str(row["key"]),
                   evidence, cause, fix)


# ---------------------------------------------------------------- rules

_MARK_FIX = ("Use a pre-tokenizer whose letter class includes \\p{M} (and ZWJ/ZWNJ), e.g. "
             "fertility's mark_aware pattern as a Split before ByteLevel(use_regex=false), "
             "and retrain the vocabulary.")


def _mark_split(report: Report, t: Thresholds) -> Iterator[Finding]:
    configs = _configs(report)
    fam = _rows(report, t, pretokenizer=True)
    fam_rate = {(r.tokenizer, r.key): r.mark_initial_rate for r in fam.itertuples()}
    infos = {lab: inspect_config(d.get("config")) for lab, d in configs.items()}
    for _, r in _rows(report, t).iterrows():
        info = infos.get(r["tokenizer"]) or inspect_config(None)
        rate = float(r["mark_initial_rate"])
        own = fam_rate.get((info.family, r["key"])) if info.family else None
        lo, hi = wilson(float(r["mark_initial_tokens"]), float(r["tokens"]))
        ev = {"mark_initial_rate": _num(rate), "lo": _num(lo), "hi": _num(hi),
              "mark_initial_tokens": int(r["mark_initial_tokens"]), "tokens": int(r["tokens"]),
              "pretokenizer": info.describe(), "pretoken_mark_initial_rate": _num(own),
              "letter_class_without_marks": info.letter_class_without_marks}
        seen_tokens = rate >= t.mark_initial_rate
        seen_pre = own is not None and own >= t.mark_initial_rate
        if (info.cuts_marks or info.cuts_joiners) and (seen_tokens or seen_pre):
            what = "vowel signs and other combining marks" if info.cuts_marks else "ZWJ/ZWNJ"
            share = f"{rate:.0%} of tokens" if seen_tokens else f"{own:.0%} of pre-tokens"
            yield _finding("mark-split", "error", r, ev,
                           f"The pre-tokenizer ({info.describe()}) cuts {r['key']} words at "
                           f"{what}: {share} begin with one, and BPE can never "
                           "merge across the cut.", _MARK_FIX)
        elif seen_pre:
            yield _finding("mark-split", "error", r, ev,
                           f"{own:.0%} of this tokenizer's {r['key']} pre-tokens begin with a "
                           "combining mark: its pre-tokenizer cuts words at vowel signs.",
                           _MARK_FIX)
        elif rate >= t.mark_initial_token_rate:
            yield _finding("mark-split", "warning", r, ev,
                           f"{rate:.0%} of {r['key']} tokens begin with a combining mark "
                           "although the pre-tokenizer keeps marks in words: the vocabulary "
                           "lacks the merges that join vowel signs to their consonants.",
                           "Train with more text in this script or a larger vocabulary; "
                           "check the mark-initial rate again.")
    for r in fam.itertuples():
        if r.mark_initial_rate >= t.mark_initial_rate:
            yield Finding("mark-split", "info", r.tokenizer, r.group, r.key,
                          {"mark_initial_rate": _num(r.mark_initial_rate)},
                          f"The {r.tokenizer} pre-tokenizer would cut {r.key} words at combining "
                          f"marks ({r.mark_initial_rate:.0%} of its pre-tokens begin with one).",
                          "Do not train a tokenizer for this script with this pre-tokenizer; "
                          "use one whose letter class includes \\p{M}.")


def _ceiling(report: Report, t: Thresholds) -> Iterator[Finding]:
    for pre in (False, True):
        for _, r in _rows(report, t, groups=("script", "language"), pretokenizer=pre).iterrows():
            floor = t.floor_for(r["group"], r["key"])
            ceiling = r["chars_per_token"] if pre else r["chars_per_pretoken"]
            if floor is None or _num(ceiling) is None:
                continue
            ev = {"chars_per_pretoken": _num(ceiling), "floor": floor,
                  "chars_per_token": _num(r["chars_per_token"]),
                  "lo": _num(r["chars_per_token_lo"]), "hi": _num(r["chars_per_token_hi"])}
            fix = ("Use a pre-tokenizer that keeps whole words of this script (letter classes "
                   "with \\p{M}, e.g. o200k or mark_aware) and retrain.")
            if ceiling < floor:
                sev = "info" if pre else "error"
                who = f"the {r['tokenizer']} pre-tokenizer" if pre else "the pre-tokenizer"
                yield _finding("pretokenizer-ceiling", sev, r, ev,
                               f"{who.capitalize()} cuts {r['key']} text into pieces of "
                               f"{ceiling:.2f} characters on average, below the floor of "
                               f"{floor:g}: no vocabulary can merge across them.", fix)
            elif ceiling < floor * t.ceiling_headroom and not pre:
                yield _finding("pretokenizer-ceiling", "warning", r, ev,
                               f"The pre-tokenizer caps {r['key']} at {ceiling:.2f} characters "
                               f"per token, within {t.ceiling_headroom:g}x of the floor "
                               f"{floor:g}; real vocabularies stay well below their ceiling.",
                               fix)


def _starvation(report: Report, t: Thresholds) -> Iterator[Finding]:
    sizes = {d["label"]: d.get("vocab_size") for d in report.tokenizers}
    for _, r in _rows(report, t).iterrows():
        bpt, gpt = float(r["bytes_per_token"]), float(r["graphemes_per_token"])
        near_bytes = bpt <= t.starvation_bytes_per_token
        near_graphemes = (r["key"] not in IDEOGRAPHIC
                          and gpt <= t.starvation_graphemes_per_token)
        ceiling = _num(r["chars_per_pretoken"])
        below = ceiling is None or r["chars_per_token"] <= t.starvation_ceiling_share * ceiling
        if not ((near_bytes or near_graphemes) and below):
            continue
        size = sizes.get(r["tokenizer"])
        ev = {"bytes_per_token": _num(bpt), "graphemes_per_token": _num(gpt),
              "chars_per_token": _num(r["chars_per_token"]), "lo": _num(r["chars_per_token_lo"]),
              "hi": _num(r["chars_per_token_hi"]), "chars_per_pretoken": ceiling,
              "vocab_used": _num(r.get("vocab_used")), "vocab_size": size,
              "vocab_share": _num(r.get("vocab_used") / size) if size else None}
        unit = f"{bpt:.2f} bytes" if near_bytes else f"{gpt:.2f} graphemes"
        yield _finding("merge-starvation", "warning", r, ev,
                       f"{r['key']} tokens hold {unit} on average: the vocabulary has almost no "
                       "merges for this script, far below what its pre-tokenizer allows.",
                       "Put more of this script in the tokenizer's training data (script-"
                       "balanced sampling) or use a larger vocabulary, then measure again.")


def _fallback_unk(report: Report, t: Thresholds) -> Iterator[Finding]:
    specs = (("byte-fallback", "byte_fallback_tokens", "byte_fallback_rate",
              t.byte_fallback_rate, report.byte_fallback_chars,
              "are spelled as byte pieces", "Add these characters' text to the training data "
              "(or raise character_coverage in SentencePiece) so they get whole-character "
              "tokens."),
             ("unk", "unk_tokens", "unk_rate", t.unk_rate, report.unk_chars,
              "become the unknown token (the text is lost)",
              "Enable byte fallback (SentencePiece byte_fallback=true) or use a byte-level "
              "BPE, and cover these characters in training."))
    for _, r in _rows(report, t).iterrows():
        for rule, count, col, limit, chars, what, fix in specs:
            rate = float(r[col])
            if rate < limit or rate == 0:
                continue
            lo, hi = wilson(float(r[count]), float(r["tokens"]))
            top = _char_names(chars.get((r["tokenizer"], r["key"])), t.top_chars)
            names = ", ".join(f"{c['code']} {c['name']}" for c in top[:3])
            ev = {col: _num(rate), "lo": _num(lo), "hi": _num(hi), "count": int(r[count]),
                  "tokens": int(r["tokens"]), "threshold": limit, "top_chars": top}
            yield _finding(rule, "warning", r, ev,
                           f"{rate:.1%} of {r['key']} tokens {what}"
                           + (f"; most often {names}." if names else "."), fix)


_LOSSY_NORMALIZERS = {"NFKC", "NFKD", "Lowercase", "StripAccents", "Precompiled"}
_NUKTA = {"\u09dc", "\u09dd", "\u09df"}  # composition exclusions: NFC never recomposes them


def _normalization(report: Report, t: Thresholds) -> Iterator[Finding]:
    for label, d in _configs(report).items():
        if d.get("kind") == "pretokenizer":
            continue
        info = inspect_config(d.get("config"))
        n = report.normalization.get(label) or {}
        changed = int(n.get("changed_docs", 0))
        stored = list(n.get("examples", []))
        examples = stored[:3]
        row = {"tokenizer": label, "group": "all", "key": "*"}
        ev = {"normalizers": info.normalizers, "changed_docs": changed, "examples": examples}
        fix = ("Use a lossless normaliser (none, or NFC where the script needs it) and keep "
               "the text as written; apply the same normaliser at training and inference.")
        lossy = sorted(set(info.normalizers) & _LOSSY_NORMALIZERS)
        if changed:
            names = ", ".join(info.normalizers) or "as configured"
            yield _finding("normalization", "warning", row, ev,
                           f"The tokenizer's normaliser ({names}) changes {changed} documents "
                           "before tokenizing.", fix)
        elif lossy:
            yield _finding("normalization", "info", row, ev,
                           f"The normaliser folds text ({', '.join(lossy)}), though no document "
                           "of this corpus changed.", fix)
        # The measurement keeps a few changed passages, not a count of the nukta letters, so
        # this looks in every stored passage (not only the three shown as evidence).
        unicode_form = set(info.normalizers) & {"NFC", "NFKC", "NFD", "NFKD", "Precompiled"}
        if unicode_form and any(ch in e.get("before", "") for e in stored for ch in _NUKTA):
            yield _finding("normalization", "warning", {**row, "group": "script", "key": "Beng"},
                           ev, "Unicode normalisation decomposes the Bengali nukta letters "
                           "U+09DC, U+09DD, U+09DF into letter + nukta and NFC never recomposes "
                           "them, so the tokenizer sees different text than was written.",
                           "Drop the normaliser for Bengali or normalise the training corpus the "
                           "same way; never compare decoded text with the original byte for byte.")
    f = report.frame
    lang = f[(f["kind"] != "pretokenizer") & (f["group"] == "language")]
    for _, r in lang[lang["roundtrip_failures"] > 0].iterrows():
        ev = {"roundtrip_failures": int(r["roundtrip_failures"]),
              "documents": int(r["roundtrip_checked"]),
              "roundtrip_failure_rate": _num(r["roundtrip_failure_rate"])}
        yield _finding("normalization", "warning", r, ev,
                       f"decode(encode(text)) differs from the text for "
                       f"{int(r['roundtrip_failures'])} of {int(r['roundtrip_checked'])} "
                       f"{r['key']} documents checked: the tokenizer loses information.",
                       "Find the cause in the examples (normaliser, unknown tokens, stripped "
                       "spaces) and use a lossless setting.")


def _grapheme_split(report: Report, t: Thresholds) -> Iterator[Finding]:
    for _, r in _rows(report, t).iterrows():
        rate = float(r["grapheme_split_rate"])
        if rate >= t.grapheme_split_rate:
            lo, hi = wilson(float(r["grapheme_split_boundaries"]),
                            float(r["token_boundaries"]))
            ev = {"grapheme_split_rate": _num(rate), "lo": _num(lo), "hi": _num(hi),
                  "grapheme_split_boundaries": int(r["grapheme_split_boundaries"]),
                  "token_boundaries": int(r["token_boundaries"])}
            yield _finding("grapheme-split", "warning", r, ev,
                           f"{rate:.0%} of token boundaries in {r['key']} fall inside a "
                           "user-perceived character (a consonant cut from its vowel sign, or "
                           "a character cut into bytes).",
                           "Keep grapheme clusters whole: a mark-aware pre-tokenizer and enough "
                           "vocabulary for the script.")


def _balance(report: Report, t: Thresholds) -> Iterator[Finding]:
    rows = _rows(report, t, groups=("script", "language"))
    for _, r in rows.iterrows():
        if r["byte_share"] > 0 and r["token_share"] / r["byte_share"] >= t.overrepresentation:
            ratio = r["token_share"] / r["byte_share"]
            ev = {"token_share": _num(r["token_share"]), "byte_share": _num(r["byte_share"]),
                  "ratio": _num(ratio)}
            yield _finding("balance-inversion", "warning", r, ev,
                           f"{r['key']} is {r['byte_share']:.1%} of the bytes but "
                           f"{r['token_share']:.1%} of the tokens ({ratio:.1f}x): a mix "
                           "set in tokens holds far less of its text than it seems.",
                           "Set data mixtures in bytes or characters, not tokens, and improve "
                           "the tokenizer for this language.")
    m = 1 + t.flip_margin
    for label, g in rows[rows["group"] == "language"].groupby("tokenizer"):
        recs = list(g.itertuples())
        for a in recs:
            for b in recs:
                if a.byte_share > b.byte_share * m and b.token_share > a.token_share * m:
                    ev = {"bytes": {a.key: _num(a.byte_share), b.key: _num(b.byte_share)},
                          "tokens": {a.key: _num(a.token_share), b.key: _num(b.token_share)}}
                    yield Finding("balance-inversion", "warning", str(label), "language",
                                  f"{a.key}/{b.key}", ev,
                                  f"{a.key} has more bytes than {b.key} but fewer tokens: "
                                  "counted in tokens, the corpus balance is inverted.",
                                  "Sample and report the mixture in bytes; fix the tokenizer "
                                  f"for {b.key}.")


def _parity_rule(table: pd.DataFrame, t: Thresholds, reference: str) -> Iterator[Finding]:
    for r in table.itertuples():
        if r.premium <= t.premium:
            continue
        sure = r.lo > t.premium
        ev = {"premium": _num(r.premium), "lo": _num(r.lo), "hi": _num(r.hi),
              "reference": reference, "lines": int(r.lines), "threshold": t.premium}
        yield Finding("parity", "warning", r.tokenizer, "language", r.lang, ev,
                      f"The same content costs {r.premium:.2f}x the tokens of {reference} in "
                      f"{r.lang} (95% interval {r.lo:.2f}-{r.hi:.2f}"
                      + ("" if sure else f", reaching below {t.premium:g}") + ").",
                      f"Give {r.lang} more weight in the tokenizer's training data or more "
                      f"vocabulary; a premium above {t.premium:g}x multiplies cost and divides "
                      "context by as much.")


def premiums(report: Report, t: Thresholds | None = None, *,
             reference: str = "en") -> pd.DataFrame:
    """Token premium per (tokenizer, language) against `reference` on parallel files.

    Columns: tokenizer, lang, reference, lines, premium, lo, hi. Empty without parallel files.
    """
    t = t or Thresholds()
    families = [d["label"] for d in report.tokenizers if d.get("kind") == "pretokenizer"]
    docs = report.docs[~report.docs["tokenizer"].isin(families)]
    return _parity.premiums(docs, reference, min_lines=t.parity_min_lines,
                            min_overlap=t.parity_min_overlap, reps=t.bootstrap,
                            rng=np.random.default_rng(t.seed))
