"""Per-code-point Unicode facts, vectorised over whole batches of documents.

Properties come from the `regex` module (the same Unicode version as its `\\X` and `\\w`), looked
up once per *distinct* code point and cached in flat tables indexed by code point, so the
per-character work on the measuring path is numpy indexing, never a Python loop.

The tables (script and flag bits per code point) and the lookups on them; what they make of a
batch of documents (TextBatch) is fertility/unicode/batch.py.
"""

from __future__ import annotations

import numpy as np
import regex

from fertility.unicode.running import families

# ISO 15924 codes of the scripts Unicode assigns. Codes the installed `regex` does not know are
# dropped at import; anything unassigned ends up in Zzzz.
_SCRIPT_CODES = """Adlm Aghb Ahom Arab Armi Armn Avst Bali Bamu Bass Batk Beng Bhks Bopo Brah Brai
Bugi Buhd Cakm Cans Cari Cham Cher Chrs Copt Cpmn Cprt Cyrl Deva Diak Dogr Dsrt Dupl Egyp Elba
Elym Ethi Gara Geor Glag Gong Gonm Goth Gran Grek Gujr Gukh Guru Hang Hani Hano Hatr Hebr Hira
Hluw Hmng Hmnp Hung Ital Java Kali Kana Kawi Khar Khmr Khoj Kits Knda Krai Kthi Lana Laoo Latn
Lepc Limb Lina Linb Lisu Lyci Lydi Mahj Maka Mand Mani Marc Medf Mend Merc Mero Mlym Modi Mong
Mroo Mtei Mult Mymr Nagm Nand Narb Nbat Newa Nkoo Nshu Ogam Olck Onao Orkh Orya Osge Osma Ougr
Palm Pauc Perm Phag Phli Phlp Phnx Plrd Prti Rjng Rohg Runr Samr Sarb Saur Sgnw Shaw Shrd Sidd
Sidt Sind Sinh Sogd Sogo Sora Soyo Sund Sunu Sylo Syrc Tagb Takr Tale Talu Taml Tang Tavt Tayo
Telu Tfng Tglg Thaa Thai Tibt Tirh Tnsa Todr Tols Toto Tutg Ugar Vaii Vith Wara Wcho Xpeo Xsux
Yezi Yiii Zanb""".split()


def _known(code: str) -> bool:
    try:
        regex.compile(rf"\p{{sc={code}}}")
        return True
    except regex.error:
        return False


def _alternation(codes: list[str]) -> regex.Pattern:
    """One alternation of every script, a named group each: one scan classifies a batch."""
    return regex.compile("|".join(rf"(?P<{code}>\p{{sc={code}}}+)" for code in codes))


def _script_codes() -> tuple[list[str], regex.Pattern]:
    """The codes the installed regex knows, and the alternation of them. The alternation
    compiles only if it knows them all (the usual case): one compile, where testing each of
    the ~170 codes alone took about as long again at every start-up."""
    try:
        return _SCRIPT_CODES, _alternation(["Zyyy", "Zinh", *_SCRIPT_CODES])
    except regex.error:
        known = [c for c in _SCRIPT_CODES if _known(c)]
        return known, _alternation(["Zyyy", "Zinh", *known])


_KNOWN_CODES, _SCRIPT_RE = _script_codes()
# Index 0 is "not yet classified"; Zyyy (Common), Zinh (Inherited) and Zzzz (Unknown) are
# real scripts of the table but Common and Inherited are resolved to a neighbour's script.
SCRIPTS: list[str] = ["?", "Zyyy", "Zinh", "Zzzz", *_KNOWN_CODES]
SCRIPT_INDEX = {c: i for i, c in enumerate(SCRIPTS)}
ZYYY, ZINH, ZZZZ = 1, 2, 3

# Scripts written without spaces between words: a whitespace/punctuation word count would be an
# invented number there, so tokens_per_word is reported as null (docs/METRICS.md).
NO_SPACE_SCRIPTS = frozenset(
    {"Thai", "Laoo", "Khmr", "Mymr", "Hani", "Hira", "Kana", "Tale", "Talu", "Lana", "Bopo", "Yiii"}
)
FAMILY, NOSPACE_FAMILY = families(SCRIPTS, NO_SPACE_SCRIPTS)

# Flag bits of the per-code-point flag table.
MARK_BIT, JOIN_BIT, WORD_BIT, APOS_BIT, SPACE_BIT, BREAK_BIT = 1, 2, 4, 8, 16, 32
LETTER_BIT, DONE_BIT = 64, 128

SCRIPT_TABLE = np.zeros(0x110000, dtype=np.uint8)
_FLAG_TABLE = np.zeros(0x110000, dtype=np.uint8)
_MARK_RE = regex.compile(r"\p{M}+")
_WORD_RE = regex.compile(r"\w+")  # regex's \w includes marks, digits and ZWJ/ZWNJ
_APOSTROPHES = {0x27, 0x2019}
_SPACE_RE = regex.compile(r"\s+")
_LETTER_RE = regex.compile(r"\p{L}+")
# What does not occur inside running prose: maths, currency and modifier symbols, connector
# punctuation (`_`), and the ASCII punctuation of markup, code and placeholders
# (`{ $name }`, `%1$S`, `<label data-l10n-name="...">`, `$(ARG1)`). fertility.unicode.running
BREAK_RE = regex.compile(r"[\p{Sm}\p{Sc}\p{Sk}\p{Pc}#%&*@/\\{}\[\]<>|~^`_=$+]+")


def _classify(new: np.ndarray) -> None:
    """Fill the tables for code points never seen before (a few thousand per corpus, in
    dozens of batches: one compiled pattern, not one per script per call)."""
    chars = "".join(map(chr, new.tolist()))
    scripts = np.full(len(new), ZZZZ, dtype=np.uint8)
    for m in _SCRIPT_RE.finditer(chars):
        scripts[m.start() : m.end()] = SCRIPT_INDEX[m.lastgroup]
    flags = np.full(len(new), DONE_BIT, dtype=np.uint8)
    for pattern, bit in (
        (_MARK_RE, MARK_BIT),
        (_WORD_RE, WORD_BIT),
        (_SPACE_RE, SPACE_BIT),
        (BREAK_RE, BREAK_BIT),
        (_LETTER_RE, LETTER_BIT),
    ):
        for m in pattern.finditer(chars):
            flags[m.start() : m.end()] |= bit
    flags[np.isin(new, (0x200C, 0x200D))] |= JOIN_BIT | WORD_BIT
    flags[np.isin(new, list(_APOSTROPHES))] |= APOS_BIT
    SCRIPT_TABLE[new] = scripts
    _FLAG_TABLE[new] = flags


def code_points(text: str) -> np.ndarray:
    """The code points of `text` as uint32 (UTF-32 is a copy-free view for numpy)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def ensure_classified(cps: np.ndarray) -> np.ndarray:
    """Classify code points never seen before; returns their flags (never 0 afterwards)."""
    # take(): numpy's fancy indexing first copies a uint32 index to intp, 3-4x the gather
    flags = _FLAG_TABLE.take(cps)
    if not flags.all():  # rare after the first batches: a reduction, no index array
        # each new code point once, in order (a mark per code point: np.unique's first
        # call imports numpy.ma, 10 ms of a one-line report)
        new = np.zeros(len(_FLAG_TABLE), bool)
        new[cps[flags == 0]] = True
        _classify(np.flatnonzero(new).astype(cps.dtype))
        flags = _FLAG_TABLE.take(cps)
    return flags


def utf8_lengths(cps: np.ndarray) -> np.ndarray:
    # uint8 views of the comparisons: a quarter of the memory traffic of int64 sums
    n = (cps >= 0x80).view(np.uint8) + (cps >= 0x800).view(np.uint8)
    n += (cps >= 0x10000).view(np.uint8) + np.uint8(1)
    return n.astype(np.int64)


def is_mark_or_joiner(cps: np.ndarray) -> np.ndarray:
    """True for combining marks (\\p{M}) and ZWJ/ZWNJ: a token starting here was cut mid-word."""
    return flags_mark_or_joiner(ensure_classified(cps))


def flags_mark_or_joiner(flags: np.ndarray) -> np.ndarray:
    return (flags & (MARK_BIT | JOIN_BIT)) != 0
