"""The rules behind `diagnose`, one function per rule id, each declared by its `@rule(...)`
(fertility.findings.registry): the severities it gives, the Thresholds it reads, the evidence
its one-line summary names. Each reads a Report's measurement table (Report.table: a dict per
row, in the table's order; balance and parity also the premium table) and yields its own
Findings through `x.finding`. None reads Report.frame: that would import pandas for every
report and gate, which judge a table of a few rows per tokenizer. The order of this file is
the order of the findings in every output. docs/GATE.md gives the reasons for every
threshold, one section per rule.

Adding a rule: a decorated function here, its section in docs/GATE.md, its tests in
tests/findings/test_diagnose.py."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fertility.corpus import labels
from fertility.findings.evidence import char_names, number, rate_interval
from fertility.findings.finding import Finding
from fertility.findings.registry import Inputs, Summary, rule
from fertility.findings.tokconfig import ConfigInfo, inspect_config
from fertility.numbers import finite
from fertility.options import Severity
from fertility.tokenizers.pretokenizer import PRETOKENIZER

if TYPE_CHECKING:
    from fertility.measure import TokenizerInfo

# Scripts where one character already carries a syllable or a morpheme: a token of one
# grapheme is normal there, so the grapheme test of merge-starvation does not apply.
IDEOGRAPHIC = ("Hani", "Hira", "Kana", "Hang", "Yiii", "Bopo")


# ---------------------------------------------------------------- table helpers


def _rows(x: Inputs, *, groups=("script",), pretokenizer=False) -> list[dict]:
    """The table's rows of `groups` with at least min_tokens tokens, of the tokenizers (or,
    pretokenizer, of the pre-tokenizer families), in the table's order."""
    return [
        r
        for r in x.report.table
        if (r["kind"] == PRETOKENIZER) == pretokenizer
        and r["group"] in groups
        and _at_least(r["tokens"], x.t.min_tokens)
    ]


def _at_least(x: Any, limit: float) -> bool:
    """x >= limit; False for a missing number (None, NaN, pandas' NA in a hand-built row),
    as a comparison with NaN is."""
    v = finite(x)
    return v is not None and v >= limit


def _configs(x: Inputs) -> dict[str, TokenizerInfo]:
    return {d.label: d for d in x.report.tokenizers}


@dataclass
class _Marks:
    """What a tokenizer's script row says about marks: mark-initial tokens, and its own
    pre-tokens that begin with a mark, a ZWJ or a ZWNJ (the detail pass). mark-split and the
    vocabulary half of merge-starvation read the same numbers and show the same evidence."""

    row: Mapping[str, Any]
    info: ConfigInfo
    rate: float  # mark-initial tokens
    n_pre: int
    marks: int
    zwj: int
    zwnj: int
    cuts: int  # pre-tokens that begin with a mark or a ZWJ
    pre_rate: float | None  # None: no pre-tokens checked
    pre_lo: Any
    pre_hi: Any
    words: int
    cut: int  # words cut into two or more pre-tokens
    evidence: dict


def _marks(x: Inputs) -> Iterator[_Marks]:
    t = x.t
    infos = {lab: inspect_config(d.config) for lab, d in _configs(x).items()}
    for r in _rows(x):
        info = infos.get(r["tokenizer"]) or inspect_config(None)
        rate = float(r["mark_initial_rate"])
        lo, hi = rate_interval(
            r, "mark_initial_rate", float(r["mark_initial_tokens"]), float(r["tokens"])
        )
        n_pre = int(r.get("pretokens", 0) or 0)
        marks = int(r.get("pretoken_mark_initial", 0) or 0)
        zwj = int(r.get("pretoken_zwj_initial", 0) or 0)
        zwnj = int(r.get("pretoken_zwnj_initial", 0) or 0)
        cuts = marks + zwj
        pre_rate = cuts / n_pre if n_pre else None
        pre_lo, pre_hi = (
            rate_interval(r, "pretoken_mark_initial_rate", cuts, n_pre) if n_pre else (None, None)
        )
        words = int(r.get("pretoken_words", 0) or 0)
        cut = int(r.get("pretoken_cut_words", 0) or 0)
        cut_lo, cut_hi = (
            rate_interval(r, "pretoken_cut_word_rate", cut, words) if words else (None, None)
        )
        ev = {
            "mark_initial_rate": number(rate),
            "lo": number(lo),
            "hi": number(hi),
            "mark_initial_tokens": int(r["mark_initial_tokens"]),
            "tokens": int(r["tokens"]),
            "pretokens": n_pre,
            "pretoken_mark_initial": marks,
            "pretoken_zwj_initial": zwj,
            "pretoken_zwnj_initial": zwnj,
            "pretoken_mark_initial_rate": number(pre_rate),
            "pretoken_lo": number(pre_lo),
            "pretoken_hi": number(pre_hi),
            "pretoken_words": words,
            "pretoken_cut_words": cut,
            "pretoken_cut_word_rate": number(cut / words) if words else None,
            "cut_word_lo": number(cut_lo),
            "cut_word_hi": number(cut_hi),
            "threshold": t.mark_initial_rate,
            "pretokenizer": info.describe(),
            "config_cuts_marks": info.cuts_marks,
            "config_cuts_joiners": info.cuts_joiners,
            "letter_class_without_marks": info.letter_class_without_marks,
        }
        yield _Marks(
            r, info, rate, n_pre, marks, zwj, zwnj, cuts, pre_rate, pre_lo, pre_hi, words, cut, ev
        )


# ---------------------------------------------------------------- rules

_MARK_FIX = (
    "Use a pre-tokenizer whose letter class includes \\p{M} (and ZWJ/ZWNJ), e.g. "
    "fertility's mark_aware pattern as a Split before ByteLevel(use_regex=false), "
    "and retrain the vocabulary."
)


@rule(
    "mark-split",
    severities=("error", "warning", "info"),
    thresholds=("min_tokens", "mark_initial_rate", "mark_initial_token_rate"),
    summary=Summary("pretoken_mark_initial_rate", "max", "{:.1%} of pre-tokens start at a mark"),
)
def mark_split(x: Inputs) -> Iterator[Finding]:
    """Decided by the tokenizer's own pre-tokens on this corpus (the detail pass): the share
    that begin with a combining mark or a ZWJ, a cut inside a cluster. A ZWNJ asks for the
    parts around it to stay apart (a compound or loanword boundary: Telugu వెబ్‌సైట్, web|site),
    so cuts before it are reported on their own, as info. Tokens that begin with marks under a
    clean pre-tokenizer are the vocabulary's doing (merge-starvation). The configuration's
    probe is evidence beside the measurement, never the verdict."""
    t = x.t
    for m in _marks(x):
        r, info, ev, key = m.row, m.info, m.evidence, m.row["key"]
        n_pre, pre_rate, words, cut = m.n_pre, m.pre_rate, m.words, m.cut
        cut_words = (
            f", and {cut / words:.0%} of {key} words are cut into two or more pre-tokens"
            if words
            else ""
        )
        if pre_rate is not None and pre_rate >= t.mark_initial_rate:
            what = (
                f"a combining mark ({m.marks}) or a ZWJ ({m.zwj})"
                if m.marks and m.zwj
                else "a combining mark (vowel sign, virama)"
                if m.marks
                else "a ZWJ"
            )
            measured = (
                f"{pre_rate:.1%} of its {key} pre-tokens ({m.cuts} of {n_pre}, "
                f"95% interval {m.pre_lo:.1%}-{m.pre_hi:.1%}) begin with {what}" + cut_words
            )
            if m.pre_lo >= t.mark_initial_rate:
                agree = (
                    " The configuration's split cuts the probe words the same way."
                    if info.cuts_marks or info.cuts_joiners
                    else ""
                )
                yield x.finding(
                    "error",
                    r,
                    ev,
                    f"The pre-tokenizer ({info.describe()}) cuts {key} words: "
                    f"{measured}. BPE never merges across these cuts." + agree,
                    _MARK_FIX,
                )
            else:
                yield x.finding(
                    "warning",
                    r,
                    ev,
                    f"{measured}, but the interval reaches below "
                    f"{t.mark_initial_rate:.0%}: this corpus cannot tell whether "
                    f"the pre-tokenizer cuts {key} words.",
                    "Measure on more text in this script (--detail all).",
                )
        elif n_pre and m.zwnj / n_pre >= t.mark_initial_rate:
            yield x.finding(
                "info",
                r,
                ev,
                f"{m.zwnj / n_pre:.1%} of its {key} pre-tokens ({m.zwnj} of {n_pre}) begin "
                f"with a ZWNJ and {pre_rate:.2%} with a combining mark or ZWJ"
                f"{cut_words}: the pre-tokenizer cuts where the writer kept two "
                "parts of a word apart on purpose (a ZWNJ), not inside a cluster.",
                "Nothing to repair for the script; a split with ZWNJ in its letter "
                "class (mark_aware) would let BPE learn such words whole.",
            )
        if m.rate >= t.mark_initial_token_rate and pre_rate is None:
            yield x.finding(
                "warning",
                r,
                ev,
                f"{m.rate:.0%} of {key} tokens begin with a combining mark or "
                "joiner, and no pre-tokens were checked: this corpus cannot tell "
                "whether the pre-tokenizer or the vocabulary cuts them.",
                "Measure with the per-document checks on (--detail N or all).",
            )
    for r in _rows(x, pretokenizer=True):
        # its tokens are its pre-tokens; the pre-token counts tell a ZWNJ from a mark or ZWJ
        n_pre = r["pretokens"]
        fam_rate = (
            (r["pretoken_mark_initial"] + r["pretoken_zwj_initial"]) / n_pre if n_pre else 0.0
        )
        if fam_rate >= t.mark_initial_rate:
            yield x.finding(
                "info",
                {"tokenizer": r["tokenizer"], "group": r["group"], "key": r["key"]},
                {
                    "mark_initial_rate": number(r["mark_initial_rate"]),
                    "pretoken_mark_initial_rate": number(fam_rate),
                },
                f"The {r['tokenizer']} pre-tokenizer would cut {r['key']} words at combining "
                f"marks or ZWJ ({fam_rate:.0%} of its pre-tokens begin with one).",
                "Do not train a tokenizer for this script with this pre-tokenizer; "
                "use one whose letter class includes \\p{M}.",
            )


@rule(
    "pretokenizer-ceiling",
    severities=("error", "warning", "info"),
    thresholds=(
        "min_tokens",
        "script_floors",
        "language_floors",
        "default_floor",
        "exempt_scripts",
        "ceiling_headroom",
    ),
    summary=Summary("chars_per_pretoken", "min", "ceiling {:.2f} chars/pre-token"),
)
def pretokenizer_ceiling(x: Inputs) -> Iterator[Finding]:
    t = x.t
    for pre in (False, True):
        for r in _rows(x, groups=("script", "language"), pretokenizer=pre):
            floor = t.floor_for(r["group"], r["key"])
            ceiling = r["chars_per_token"] if pre else r["chars_per_pretoken"]
            if floor is None or number(ceiling) is None:
                continue
            ev = {
                "chars_per_pretoken": number(ceiling),
                "floor": floor,
                "chars_per_token": number(r["chars_per_token"]),
                "lo": number(r["chars_per_token_lo"]),
                "hi": number(r["chars_per_token_hi"]),
            }
            fix = (
                "Use a pre-tokenizer that keeps whole words of this script (letter classes "
                "with \\p{M}, e.g. o200k or mark_aware) and retrain."
            )
            if ceiling < floor:
                sev: Severity = "info" if pre else "error"
                who = f"the {r['tokenizer']} pre-tokenizer" if pre else "the pre-tokenizer"
                yield x.finding(
                    sev,
                    r,
                    ev,
                    f"{who.capitalize()} cuts {r['key']} text into pieces of "
                    f"{ceiling:.2f} characters on average, below the floor of "
                    f"{floor:g}: no vocabulary can merge across them.",
                    fix,
                )
            elif ceiling < floor * t.ceiling_headroom and not pre:
                yield x.finding(
                    "warning",
                    r,
                    ev,
                    f"The pre-tokenizer caps {r['key']} at {ceiling:.2f} characters "
                    f"per token, within {t.ceiling_headroom:g}x of the floor "
                    f"{floor:g}; real vocabularies stay well below their ceiling.",
                    fix,
                )


@rule(
    "merge-starvation",
    severities=("warning",),
    thresholds=(
        "min_tokens",
        "mark_initial_token_rate",
        "mark_initial_rate",
        "starvation_bytes_per_token",
        "starvation_graphemes_per_token",
        "starvation_ceiling_share",
    ),
    summary=Summary("graphemes_per_token", "min", "{:.2f} graphemes/token"),
)
def merge_starvation(x: Inputs) -> Iterator[Finding]:
    """The vocabulary, not the split, is the limit: tokens begin with marks while the
    tokenizer's own pre-tokens do not, or tokens are about one byte or one grapheme long
    far below the pre-tokenizer's ceiling."""
    t = x.t
    for m in _marks(x):
        if m.rate >= t.mark_initial_token_rate and (
            m.pre_rate is not None and m.pre_rate < t.mark_initial_rate
        ):
            yield x.finding(
                "warning",
                m.row,
                m.evidence,
                f"{m.rate:.0%} of {m.row['key']} tokens begin with a combining mark or joiner "
                f"while only {(m.cuts + m.zwnj) / m.n_pre:.2%} of its pre-tokens do "
                f"({m.cuts + m.zwnj} of {m.n_pre}): the cuts are not the "
                "pre-tokenizer's, the vocabulary lacks the merges that join vowel "
                "signs to their consonants.",
                "Train with more text in this script or a larger vocabulary; "
                "check the mark-initial rate again.",
            )
    sizes = {d.label: d.vocab_size for d in x.report.tokenizers}
    for r in _rows(x):
        bpt, gpt = float(r["bytes_per_token"]), float(r["graphemes_per_token"])
        near_bytes = bpt <= t.starvation_bytes_per_token
        near_graphemes = r["key"] not in IDEOGRAPHIC and gpt <= t.starvation_graphemes_per_token
        ceiling = number(r["chars_per_pretoken"])
        below = ceiling is None or r["chars_per_token"] <= t.starvation_ceiling_share * ceiling
        if not ((near_bytes or near_graphemes) and below):
            continue
        size = sizes.get(r["tokenizer"])
        # None in a row without a token-id histogram (the table's null for a count)
        unique = finite(r.get("unique_tokens"))
        ev = {
            "bytes_per_token": number(bpt),
            "graphemes_per_token": number(gpt),
            "chars_per_token": number(r["chars_per_token"]),
            "lo": number(r["chars_per_token_lo"]),
            "hi": number(r["chars_per_token_hi"]),
            "chars_per_pretoken": ceiling,
            "unique_tokens": number(unique),
            "vocab_size": size,
            "vocab_share": number(unique / size) if size and unique is not None else None,
        }
        unit = f"{bpt:.2f} bytes" if near_bytes else f"{gpt:.2f} graphemes"
        yield x.finding(
            "warning",
            r,
            ev,
            f"{r['key']} tokens hold {unit} on average: the vocabulary has almost no "
            "merges for this script, far below what its pre-tokenizer allows.",
            "Put more of this script in the tokenizer's training data (script-"
            "balanced sampling) or use a larger vocabulary, then measure again.",
        )


def _token_rate(
    x: Inputs, count: str, col: str, limit: float, chars: dict, what: str, fix: str
) -> Iterator[Finding]:
    """byte-fallback and unk: a share of tokens at or above its threshold, with its interval
    and the characters behind it."""
    for r in _rows(x):
        rate = float(r[col])
        if rate < limit or rate == 0:
            continue
        lo, hi = rate_interval(r, col, float(r[count]), float(r["tokens"]))
        top = char_names(chars.get((r["tokenizer"], r["key"])), x.t.top_chars)
        names = ", ".join(f"{c['code']} {c['name']}" for c in top[:3])
        ev = {
            col: number(rate),
            "lo": number(lo),
            "hi": number(hi),
            "count": int(r[count]),
            "tokens": int(r["tokens"]),
            "threshold": limit,
            "top_chars": top,
        }
        yield x.finding(
            "warning",
            r,
            ev,
            f"{rate:.1%} of {r['key']} tokens {what}"
            + (f"; most often {names}." if names else "."),
            fix,
        )


@rule(
    "byte-fallback",
    severities=("warning",),
    thresholds=("min_tokens", "byte_fallback_rate", "top_chars"),
    summary=Summary("byte_fallback_rate", "max", "{:.1%} byte pieces"),
)
def byte_fallback(x: Inputs) -> Iterator[Finding]:
    return _token_rate(
        x,
        "byte_fallback_tokens",
        "byte_fallback_rate",
        x.t.byte_fallback_rate,
        x.report.byte_fallback_chars,
        "are spelled as byte pieces",
        "Add these characters' text to the training data "
        "(or raise character_coverage in SentencePiece) so they get whole-character tokens.",
    )


@rule(
    "unk",
    severities=("warning",),
    thresholds=("min_tokens", "unk_rate", "top_chars"),
    summary=Summary("unk_rate", "max", "{:.2%} UNK"),
)
def unk(x: Inputs) -> Iterator[Finding]:
    return _token_rate(
        x,
        "unk_tokens",
        "unk_rate",
        x.t.unk_rate,
        x.report.unk_chars,
        "become the unknown token (the text is lost)",
        "Enable byte fallback (SentencePiece byte_fallback=true) or use a byte-level "
        "BPE, and cover these characters in training.",
    )


_LOSSY_NORMALIZERS = {"NFKC", "NFKD", "Lowercase", "StripAccents", "Precompiled"}
_NUKTA = {"\u09dc", "\u09dd", "\u09df"}  # composition exclusions: NFC never recomposes them


@rule(
    "normalization",
    severities=("warning", "info"),
    thresholds=(),
    summary=Summary("changed_docs", "max", "{:d} documents changed"),
)
def normalization(x: Inputs) -> Iterator[Finding]:
    for label, d in _configs(x).items():
        if d.kind == PRETOKENIZER:
            continue
        info = inspect_config(d.config)
        n = x.report.normalization.get(label) or {}
        changed = int(n.get("changed_docs", 0))
        stored = list(n.get("examples", []))
        examples = stored[:3]
        row = {"tokenizer": label, "group": "all", "key": "*"}
        ev = {"normalizers": info.normalizers, "changed_docs": changed, "examples": examples}
        fix = (
            "Use a lossless normaliser (none, or NFC where the script needs it) and keep "
            "the text as written; apply the same normaliser at training and inference."
        )
        lossy = sorted(set(info.normalizers) & _LOSSY_NORMALIZERS)
        if changed:
            names = ", ".join(info.normalizers) or "as configured"
            yield x.finding(
                "warning",
                row,
                ev,
                f"The tokenizer's normaliser ({names}) changes {changed} documents "
                "before tokenizing.",
                fix,
            )
        elif lossy:
            yield x.finding(
                "info",
                row,
                ev,
                f"The normaliser folds text ({', '.join(lossy)}), though no document "
                "of this corpus changed.",
                fix,
            )
        # The measurement keeps a few changed passages, not a count of the nukta letters, so
        # this looks in every stored passage (not only the three shown as evidence).
        unicode_form = set(info.normalizers) & {"NFC", "NFKC", "NFD", "NFKD", "Precompiled"}
        if unicode_form and any(ch in e.get("before", "") for e in stored for ch in _NUKTA):
            yield x.finding(
                "warning",
                {**row, "group": "script", "key": "Beng"},
                ev,
                "Unicode normalisation decomposes the Bengali nukta letters "
                "U+09DC, U+09DD, U+09DF into letter + nukta and NFC never recomposes "
                "them, so the tokenizer sees different text than was written.",
                "Drop the normaliser for Bengali or normalise the training corpus the "
                "same way; never compare decoded text with the original byte for byte.",
            )


_CAUSE_WORDS = {
    "unk": "the unknown token replaced text",
    "lowercase": "the normaliser lowercases",
    "stripped_accents": "the normaliser strips accents and other combining marks",
    "composition_exclusion": "Unicode normalisation decomposes characters NFC never "
    "recomposes (composition exclusions)",
    "compatibility": "compatibility normalisation (NFKC/NFKD) folds characters",
    "prefix_space": "the pre-tokenizer puts a space in front of the text (add_prefix_space) "
    "and decode keeps it",
    "whitespace": "spaces are added or removed",
    "reordered": "combining marks come back in another order",
    "normaliser": "the normaliser changes the text",
    "decoder": "decode does not give back the text it was given",
}
# What to do about each cause (the finding's fix names those of the causes it shows).
_NORMALISER_FIX = (
    "use a lossless normaliser (none: no lowercasing, accent stripping, NFC or NFKC), "
    "or normalise the text the same way before comparing"
)
_CAUSE_FIX = {
    "unk": "use byte fallback instead of an unknown token",
    "lowercase": _NORMALISER_FIX,
    "stripped_accents": _NORMALISER_FIX,
    "composition_exclusion": _NORMALISER_FIX,
    "compatibility": _NORMALISER_FIX,
    "normaliser": _NORMALISER_FIX,
    "reordered": _NORMALISER_FIX,
    "prefix_space": 'set add_prefix_space=false (prepend_scheme "never" for Metaspace) in '
    "the pre-tokenizer, which changes the first word's tokens (retrain or re-measure), or "
    "drop the one leading space decode adds to a text that did not begin with one",
    "whitespace": "keep whitespace as written: no Strip or whitespace-collapsing normaliser, "
    "no clean-up of spaces in the decoder, no add_prefix_space on a ByteLevel step that "
    "follows a Split (it puts a space before every piece)",
    "decoder": "use the decoder that inverts the pre-tokenizer (ByteLevel for ByteLevel, "
    "Metaspace for Metaspace, ByteFallback for byte pieces)",
}


@rule(
    "roundtrip",
    severities=("warning",),
    thresholds=("top_chars",),
    summary=Summary("roundtrip_failures", "max", "{:d} documents changed"),
)
def roundtrip(x: Inputs) -> Iterator[Finding]:
    """Documents whose decode(encode(text)) is not the text: which code points change, how
    often, and the causes the evidence shows (fertility.measure.roundtrip)."""
    report, t = x.report, x.t
    infos = {d.label: inspect_config(d.config) for d in report.tokenizers}
    failed = (
        r
        for r in report.table
        if r["kind"] != PRETOKENIZER
        and r["group"] == "language"
        and (finite(r["roundtrip_failures"]) or 0) > 0
    )
    for r in failed:
        n, k = int(r["roundtrip_checked"]), int(r["roundtrip_failures"])
        ch = report.roundtrip.get((r["tokenizer"], r["key"])) or {}
        lost = char_names(ch.get("lost"), t.top_chars)
        added = char_names(ch.get("added"), t.top_chars)
        causes = dict(sorted((ch.get("causes") or {}).items(), key=lambda kv: -kv[1]))
        info = infos.get(r["tokenizer"]) or inspect_config(None)
        lo, hi = rate_interval(r, "roundtrip_failure_rate", k, n)
        ev = {
            "roundtrip_failures": k,
            "documents": n,
            "roundtrip_failure_rate": number(r["roundtrip_failure_rate"]),
            "lo": number(lo),
            "hi": number(hi),
            "lost_chars": lost,
            "added_chars": added,
            "causes": causes,
            "normalizers": info.normalizers,
            "examples": ch.get("examples", []),
        }
        changed = "; ".join(
            part
            for part in (
                ", ".join(f"{c['code']} {c['name']} lost {c['count']}x" for c in lost[:3]),
                ", ".join(f"{c['code']} {c['name']} added {c['count']}x" for c in added[:3]),
            )
            if part
        )
        why = "; ".join(f"{_CAUSE_WORDS[c]} ({m} documents)" for c, m in causes.items())
        form = f" Normaliser: {', '.join(info.normalizers)}." if info.normalizers else ""
        fixes = list(dict.fromkeys(_CAUSE_FIX[c] for c in causes if c in _CAUSE_FIX))
        todo = "; ".join(fixes) or (
            "use a lossless setting (no lowercasing or accent stripping, no NFKC; "
            "byte fallback instead of UNK)"
        )
        yield x.finding(
            "warning",
            r,
            ev,
            f"decode(encode(text)) differs from the text in {k} of {n} {r['key']} "
            f"documents checked"
            + (f": {changed}" if changed else "")
            + (f". Why: {why}." if why else ".")
            + form,
            f"{todo[0].upper()}{todo[1:]}; or accept it on purpose with "
            "allow_lossy = true in the gate policy.",
        )


@rule(
    "grapheme-split",
    severities=("warning",),
    thresholds=("min_tokens", "grapheme_split_rate"),
    summary=Summary("grapheme_split_rate", "max", "{:.1%} of boundaries inside a grapheme"),
)
def grapheme_split(x: Inputs) -> Iterator[Finding]:
    for r in _rows(x):
        rate = float(r["grapheme_split_rate"])
        if rate >= x.t.grapheme_split_rate:
            lo, hi = rate_interval(
                r,
                "grapheme_split_rate",
                float(r["grapheme_split_boundaries"]),
                float(r["token_boundaries"]),
            )
            ev = {
                "grapheme_split_rate": number(rate),
                "lo": number(lo),
                "hi": number(hi),
                "grapheme_split_boundaries": int(r["grapheme_split_boundaries"]),
                "token_boundaries": int(r["token_boundaries"]),
            }
            yield x.finding(
                "warning",
                r,
                ev,
                f"{rate:.0%} of token boundaries in {r['key']} fall inside a "
                "user-perceived character (a consonant cut from its vowel sign, or "
                "a character cut into bytes).",
                "Keep grapheme clusters whole: a mark-aware pre-tokenizer and enough "
                "vocabulary for the script.",
            )


@rule(
    "balance-inversion",
    severities=("warning",),
    thresholds=("min_tokens", "overrepresentation", "flip_margin"),
    summary=Summary("ratio", "max", "{:.1f}x the tokens/char of the rest"),
)
def balance_inversion(x: Inputs) -> Iterator[Finding]:
    """Content is counted in characters, never bytes (a Bengali character is 3 UTF-8 bytes, a
    Latin one 1). A row's cost is its tokens per unit of content against the rest of the
    tokenizer's corpus; languages aligned line by line on parallel files hold the same
    content, so their premiums (the premium table, parity's thresholds) are that cost."""
    t = x.t
    aligned: dict[str, dict[str, float]] = {}
    for p in x.premium_table.rows:
        aligned.setdefault(p["tokenizer"], {p["reference"]: 1.0})[p["lang"]] = p["premium"]
    rows = _rows(x, groups=("script", "language"))
    over: set[tuple[str, str]] = set()
    for r in rows:
        prem = aligned.get(r["tokenizer"], {})
        if r["group"] == "language" and r["key"] in prem and len(prem) > 1:
            others = [v for k, v in prem.items() if k != r["key"]]
            ratio = prem[r["key"]] / (sum(others) / len(others))
            unit = "aligned lines"
            said = (
                f"On the parallel files {r['key']} needs {ratio:.1f}x the tokens per line "
                f"of the other {len(others)} aligned languages on average"
            )
        else:
            share, tshare = float(r["char_share"]), float(r["token_share"])
            if not 0 < share < 1 or not 0 < tshare < 1:
                continue  # the row is the whole corpus: there is no rest to compare with
            ratio = (tshare / share) / ((1 - tshare) / (1 - share))
            unit = "characters"
            said = (
                f"{r['key']} is {share:.1%} of the characters but {tshare:.1%} of the "
                f"tokens: {ratio:.1f}x the tokens per character of the rest of the corpus"
            )
        if ratio < t.overrepresentation:
            continue
        ev: dict[str, Any] = {
            "token_share": number(r["token_share"]),
            "char_share": number(r["char_share"]),
            "byte_share": number(r["byte_share"]),
            "ratio": number(ratio),
            "unit": unit,
            "threshold": t.overrepresentation,
        }
        if unit == "aligned lines":
            ev["premiums"] = {k: number(v) for k, v in prem.items()}
        if r["group"] == "language":
            over.add((r["tokenizer"], r["key"]))
        yield x.finding(
            "warning",
            r,
            ev,
            f"{said}, so a mixture set in tokens gives {r['key']} {ratio:.1f}x "
            "less text per token than the rest.",
            "Set and report data mixtures in characters, not tokens; a tokenizer "
            f"that compresses {r['key']} better narrows the gap.",
        )
    # A flip (a has more characters, b more tokens) is named only for a language b found
    # over-represented above, never between aligned languages (same content by construction).
    m = 1 + t.flip_margin
    # each tokenizer's language rows, tokenizers in sorted order (as a groupby gave them),
    # rows in the table's order
    langs: dict[str, list[dict]] = {}
    for r in rows:
        if r["group"] == "language":
            langs.setdefault(r["tokenizer"], []).append(r)
    for label in sorted(langs):
        prem = aligned.get(label, {})
        recs = langs[label]
        for a in recs:
            for b in recs:
                ak, bk = a["key"], b["key"]
                if (label, bk) not in over or (ak in prem and bk in prem):
                    continue
                if (
                    a["char_share"] > b["char_share"] * m
                    and b["token_share"] > a["token_share"] * m
                ):
                    ev = {
                        "chars": {ak: number(a["char_share"]), bk: number(b["char_share"])},
                        "tokens": {ak: number(a["token_share"]), bk: number(b["token_share"])},
                        "bytes": {ak: number(a["byte_share"]), bk: number(b["byte_share"])},
                    }
                    yield x.finding(
                        "warning",
                        {"tokenizer": label, "group": "language", "key": f"{ak}/{bk}"},
                        ev,
                        f"{ak} has more characters than {bk} but fewer tokens: "
                        f"counted in tokens, {bk} looks like the larger part of "
                        "the corpus though it holds less text.",
                        "Set and report the mixture in characters, not tokens.",
                    )


@rule(
    "parity",
    severities=("warning",),
    thresholds=("premium", "parity_min_lines", "parity_min_overlap", "bootstrap", "seed"),
    summary=Summary("premium", "max", "{:.2f}x the tokens of the reference"),
)
def parity(x: Inputs) -> Iterator[Finding]:
    """The premium table (fertility.measure.parity.premium_table: parallel files, its
    bootstrap) against the `premium` threshold."""
    t, reference = x.t, x.reference
    for r in x.premium_table.rows:
        if r["premium"] <= t.premium:
            continue
        sure = r["lo"] > t.premium
        ev = {
            "premium": number(r["premium"]),
            "lo": number(r["lo"]),
            "hi": number(r["hi"]),
            "reference": reference,
            "lines": int(r["lines"]),
            "threshold": t.premium,
        }
        yield x.finding(
            "warning",
            {"tokenizer": r["tokenizer"], "group": "language", "key": r["lang"]},
            ev,
            f"The same content costs {r['premium']:.2f}x the tokens of {reference} in "
            f"{r['lang']} (95% interval {r['lo']:.2f}-{r['hi']:.2f}"
            + ("" if sure else f", reaching below {t.premium:g}")
            + ").",
            f"Give {r['lang']} more weight in the tokenizer's training data or more "
            f"vocabulary; a premium above {t.premium:g}x multiplies cost and divides "
            "context by as much.",
        )


# The ISO 15924 codes of FineWeb-2 / FLORES labels that name several Unicode scripts:
# Japanese writes Han, Hiragana and Katakana, Korean Hangul and Han, Chinese Han.
LABEL_SCRIPTS = {
    "Jpan": ("Hani", "Hira", "Kana"),
    "Kore": ("Hang", "Hani"),
    "Hans": ("Hani",),
    "Hant": ("Hani",),
}


@rule(
    "label-script",
    severities=("warning",),
    thresholds=("label_script_share",),
    summary=Summary("label_share", "min", "{:.0%} of its running text in its label's script"),
)
def label_script(x: Inputs) -> Iterator[Finding]:
    """A FineWeb-2 / FLORES label (`hin_Deva`) whose script holds under `label_script_share`
    of the language's running text (Report.running_langs): the folder holds something else
    (English pages in `heb_Hebr/`), and every figure of the language describes that."""
    report, t = x.report, x.t
    by_lang: dict[str, dict[str, dict[str, int]]] = {}  # label -> lang -> script -> chars
    for (label, script), per_lang in (getattr(report, "running_langs", None) or {}).items():
        for lang, n in per_lang.items():
            by_lang.setdefault(label, {}).setdefault(lang, {})[script] = n
    files = (getattr(report, "corpus", None) or {}).get("files") or []
    families = {d.label for d in report.tokenizers if d.kind == PRETOKENIZER}
    for label, langs in by_lang.items():
        if label in families:  # the corpus's text, said once per tokenizer, not per family
            continue
        for lang, scripts in sorted(langs.items()):
            named = labels.flores_script(lang)
            total = sum(scripts.values())
            if named is None or not total:
                continue
            want = LABEL_SCRIPTS.get(named, (named,))
            share = sum(n for s, n in scripts.items() if s in want) / total
            if share >= t.label_script_share:
                continue
            found = max(scripts, key=scripts.__getitem__)
            where = sorted({os.path.dirname(f["path"]) for f in files if lang in f["langs"]})
            folder = ", ".join(where) or "?"
            yield x.finding(
                "warning",
                {"tokenizer": label, "group": "language", "key": lang},
                {
                    "label_share": number(share),
                    "label_script": named,
                    "script_found": found,
                    "found_share": number(scripts[found] / total),
                    "folders": where,
                    "threshold": t.label_script_share,
                },
                f"{lang} names the script {named}, but {named} is {share:.0%} of the running "
                f"text of {folder}; most of it is {found} ({scripts[found] / total:.0%}): "
                f"the figures of {lang} describe that text, not {lang}.",
                f"Check what {folder} holds (a crawl's misfiled pages, the wrong shard) and "
                "move or relabel it.",
            )
