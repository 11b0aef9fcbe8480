"""What a tokenizer's configuration says about marks and normalisation (for diagnose).

Reads `Tokenizer.config()`: the HF `normalizer` / `pre_tokenizer` objects (as in
tokenizer.json), a tiktoken split `pattern`, or SentencePiece's normalisation rule name.
Split patterns are judged by what they do, not how they are spelled: the pattern is run over
a probe of Indic and Thai words (with ZWJ/ZWNJ conjuncts) and any piece that begins with a
combining mark or a joiner is a cut inside a word. The issue's static criterion (a letter
class with \\p{L} but no \\p{M}) is reported alongside.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Any, Iterator

import regex

from fertility.patterns import ALIASES, FAMILIES, identify

# Words whose vowel signs, viramas and joiners sit inside the word, space separated.
PROBE = ("বাংলা ভাষার কিছু শব্দ हिन्दी भाषा தமிழ் மொழி ภาษาไทย "
         "ক্\u200cষ क्\u200dष ര്\u200d")
_JOINERS = ("\u200c", "\u200d")
_NORM_FORMS = {"nfc": "NFC", "nfd": "NFD", "nfkc": "NFKC", "nfkd": "NFKD",
               "nmt_nfkc": "NFKC", "nfkc_cf": "NFKC", "nmt_nfkc_cf": "NFKC"}


@dataclass
class ConfigInfo:
    family: str | None = None          # known pre-tokenizer family the split matches
    pattern: str | None = None         # the split regex, when one is configured
    source: str = ""                   # where in the config the split came from
    cuts_marks: bool = False           # some piece of the probe begins with \p{M}
    cuts_joiners: bool = False         # some piece begins with ZWJ/ZWNJ
    letter_class_without_marks: bool = False
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
        rx = regex.compile(pattern)
    except (regex.error, TypeError, ValueError):
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


def inspect_config(config: Any) -> ConfigInfo:
    info = ConfigInfo()
    if not config:
        return info
    pre = _find_key(config, "pre_tokenizer") if isinstance(config, dict) else None
    for d in _dicts(pre):
        kind = d.get("type")
        if kind == "ByteLevel" and d.get("use_regex", True):
            info.source, info.pattern = "ByteLevel(use_regex=true)", FAMILIES["gpt2"]
            break
        if kind == "Split" and not d.get("invert"):
            raw = d.get("pattern")  # HF: {"Regex": ...} / {"String": ...}; tiktoken: the regex
            pat = raw if isinstance(raw, str) else None
            if isinstance(raw, dict):
                pat = raw.get("Regex")
                if pat is None and raw.get("String") is not None:
                    pat = regex.escape(raw["String"])
            if pat is not None:
                info.source, info.pattern = "Split pattern", pat
                break
    if info.pattern is None and isinstance(config, dict):
        # tiktoken-style: the regex itself, or a family name fertility.patterns knows
        for key in ("pattern_regex", "pattern", "pat_str", "split_pattern"):
            pat = config.get(key)
            if isinstance(pat, str) and pat:
                name = pat.lower()
                if name in FAMILIES or name in ALIASES:
                    pat = FAMILIES[ALIASES.get(name, name)]
                info.source, info.pattern = "split pattern", pat
                break
    if info.pattern is not None:
        info.family = identify(info.pattern)
        info.cuts_marks, info.cuts_joiners = probe_cuts(info.pattern)
        info.letter_class_without_marks = _letter_class_without_marks(info.pattern)
    info.normalizers = _normalizers(config)
    return info


def _normalizers(config: Any) -> list[str]:
    out: list[str] = []
    norm = _find_key(config, "normalizer") if isinstance(config, dict) else None
    for d in _dicts(norm):
        kind = d.get("type")
        if kind in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents"):
            out.append(kind)
        elif kind == "BertNormalizer":
            if d.get("lowercase"):
                out.append("Lowercase")
            if d.get("strip_accents") or (d.get("strip_accents") is None and d.get("lowercase")):
                out.append("StripAccents")
        elif kind == "Precompiled":
            out.append("Precompiled")  # SentencePiece's compiled map, usually nmt_nfkc
        elif kind == "SentencePiece":  # fertility's SentencePiece adapter: the rule's name
            form = _NORM_FORMS.get(str(d.get("name") or "").lower())
            if form:
                out.append(form)
    for d in _dicts(config):  # SentencePiece: normalization_rule_name or normalizer_spec.name
        spec = d.get("normalizer_spec")
        for name in (d.get("normalization_rule_name"),
                     spec.get("name") if isinstance(spec, dict) else None):
            form = _NORM_FORMS.get(str(name).lower()) if name else None
            if form:
                out.append(form)
    return list(dict.fromkeys(out))
