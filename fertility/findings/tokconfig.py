"""What a tokenizer's configuration says about marks and normalisation (for diagnose).

Reads `Tokenizer.config()`: the `normalizer` / `pre_tokenizer` objects (HF's as in
tokenizer.json; the tiktoken and SentencePiece adapters write theirs in the same shape), else
the adapters' `pattern_regex` or a pre-tokenizer family's `pattern`. Every splitting step of a
pre-tokenizer sequence is judged, since each one cuts the pieces of the step before: a
mark-aware Split followed by ByteLevel(use_regex=true) still cuts at vowel signs.
Split patterns are judged by what they do, not how they are spelled: the pattern is run over
a probe of Indic and Thai words (with ZWJ/ZWNJ conjuncts) and any piece that begins with a
combining mark or a joiner is a cut inside a word. The issue's static criterion (a letter
class with \\p{L} but no \\p{M}) is reported alongside.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import regex

from fertility.errors import TokenizerError
from fertility.tokenizers.patterns import FAMILIES, compile_pattern, identify
from fertility.tokenizers.wordpiece import bert_strips_accents

# Words whose vowel signs, viramas and joiners sit inside the word, space separated.
PROBE = "বাংলা ভাষার কিছু শব্দ हिन्दी भाषा தமிழ் மொழி ภาษาไทย ক্\u200cষ क्\u200dष ര്\u200d"
_JOINERS = ("\u200c", "\u200d")
_NORM_FORMS = {
    "nfc": "NFC",
    "nfd": "NFD",
    "nfkc": "NFKC",
    "nfkd": "NFKD",
    "nmt_nfkc": "NFKC",
    "nfkc_cf": "NFKC",
    "nmt_nfkc_cf": "NFKC",
}


@dataclass
class ConfigInfo:
    family: str | None = None  # known pre-tokenizer family the split matches
    pattern: str | None = None  # the split regex: the first step that cuts, else the first
    source: str = ""  # where in the config the split came from
    cuts_marks: bool = False  # some step cuts a piece of the probe at \p{M}
    cuts_joiners: bool = False  # some step cuts a piece at ZWJ/ZWNJ
    letter_class_without_marks: bool = False  # some step's pattern has \p{L} but no \p{M}
    normalizers: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if not self.source:
            return "no split pattern found in the configuration"
        name = f" = {self.family}" if self.family else ""
        return f"{self.source}{name}"


def _dicts(obj: Any) -> Iterator[dict]:
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            yield from _dicts(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _dicts(v)


def _find_key(obj: Any, key: str) -> Any:
    for d in _dicts(obj):
        if key in d:
            return d[key]
    return None


def probe_cuts(pattern: str) -> tuple[bool, bool]:
    """(cuts at marks, cuts at joiners): pieces = matches and the gaps between them."""
    try:
        rx = compile_pattern(pattern)
    except TokenizerError:
        return (False, False)
    starts = set()
    pos = 0
    for m in rx.finditer(PROBE):
        if m.start() > pos:
            starts.add(pos)  # an unmatched gap is a piece of its own (HF "isolated")
        if m.end() > m.start():
            starts.add(m.start())
        pos = max(pos, m.end())
    if pos < len(PROBE):
        starts.add(pos)
    firsts = [PROBE[i] for i in starts if i > 0 and not PROBE[i - 1].isspace()]
    marks = any(unicodedata.category(c).startswith("M") for c in firsts)
    return (marks, any(c in _JOINERS for c in firsts))


def _letter_class_without_marks(pattern: str) -> bool:
    return "\\p{L}" in pattern and "\\p{M}" not in pattern and "\\p{Mn}" not in pattern


def _splits(config: dict) -> list[tuple[str, str]]:
    """(source, regex) of every splitting step, in order."""
    out = []
    for d in _dicts(_find_key(config, "pre_tokenizer")):
        kind = d.get("type")
        if kind == "ByteLevel" and d.get("use_regex", True):
            out.append(("ByteLevel(use_regex=true)", FAMILIES["gpt2"]))
        elif kind == "Split":
            raw = d.get("pattern")  # HF: {"Regex": ...} / {"String": ...}; tiktoken: the regex
            pat = raw if isinstance(raw, str) else None
            if isinstance(raw, dict):
                pat = raw.get("Regex")
                if pat is None and raw.get("String") is not None:
                    pat = regex.escape(raw["String"])
            if pat is not None:
                out.append(("Split pattern", pat))
    if not out:
        for key in ("pattern_regex", "pattern"):
            if isinstance(config.get(key), str) and config[key]:
                out.append(("split pattern", config[key]))
                break
    return out


def inspect_config(config: Any) -> ConfigInfo:
    info = ConfigInfo()
    if not isinstance(config, dict) or not config:
        return info
    steps = [(source, pat, probe_cuts(pat)) for source, pat in _splits(config)]
    if steps:
        source, pat, _ = next((s for s in steps if any(s[2])), steps[0])
        info.source, info.pattern, info.family = source, pat, identify(pat)
        info.cuts_marks = any(marks for _, _, (marks, _) in steps)
        info.cuts_joiners = any(joins for _, _, (_, joins) in steps)
        info.letter_class_without_marks = any(_letter_class_without_marks(p) for _, p, _ in steps)
    info.normalizers = _normalizers(config)
    return info


def _normalizers(config: dict) -> list[str]:
    out: list[str] = []
    for d in _dicts(_find_key(config, "normalizer")):
        kind = d.get("type")
        if kind in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents"):
            out.append(kind)
        elif kind == "BertNormalizer":
            if d.get("lowercase", True):  # (the library's default)
                out.append("Lowercase")
            if bert_strips_accents(d):
                out.append("StripAccents")
        elif kind == "Precompiled":
            out.append("Precompiled")  # SentencePiece's compiled map, usually nmt_nfkc
        elif kind == "SentencePiece":  # fertility's SentencePiece adapter: the rule's name
            form = _NORM_FORMS.get(str(d.get("name") or "").lower())
            if form:
                out.append(form)
    return list(dict.fromkeys(out))
