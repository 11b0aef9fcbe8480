"""Per-code-point Unicode facts, vectorised over whole batches of documents.

Properties come from the `regex` module (the same Unicode version as its `\\X` and `\\w`), looked
up once per *distinct* code point and cached in flat tables indexed by code point, so the
per-character work on the measuring path is numpy indexing, never a Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import regex

from fertility.unicode.graphemes import grapheme_starts as vectorised
from fertility.unicode.running import families, running_mask

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
_FAMILY, _NOSPACE_FAMILY = families(SCRIPTS, NO_SPACE_SCRIPTS)

# Flag bits of the per-code-point flag table.
_MARK, _JOIN, _WORD, _APOS, _SPACE, _BREAK, _DONE = 1, 2, 4, 8, 16, 32, 128

_SCRIPT_TABLE = np.zeros(0x110000, dtype=np.uint8)
_FLAG_TABLE = np.zeros(0x110000, dtype=np.uint8)
_MARK_RE = regex.compile(r"\p{M}+")
_WORD_RE = regex.compile(r"\w+")  # regex's \w includes marks, digits and ZWJ/ZWNJ
_APOSTROPHES = {0x27, 0x2019}
_SPACE_RE = regex.compile(r"\s+")
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
    flags = np.full(len(new), _DONE, dtype=np.uint8)
    for pattern, bit in (
        (_MARK_RE, _MARK),
        (_WORD_RE, _WORD),
        (_SPACE_RE, _SPACE),
        (BREAK_RE, _BREAK),
    ):
        for m in pattern.finditer(chars):
            flags[m.start() : m.end()] |= bit
    flags[np.isin(new, (0x200C, 0x200D))] |= _JOIN | _WORD
    flags[np.isin(new, list(_APOSTROPHES))] |= _APOS
    _SCRIPT_TABLE[new] = scripts
    _FLAG_TABLE[new] = flags


def code_points(text: str) -> np.ndarray:
    """The code points of `text` as uint32 (UTF-32 is a copy-free view for numpy)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def ensure_classified(cps: np.ndarray) -> np.ndarray:
    """Classify code points never seen before; returns their flags (never 0 afterwards)."""
    # take(): numpy's fancy indexing first copies a uint32 index to intp, 3-4x the gather
    flags = _FLAG_TABLE.take(cps)
    if not flags.all():  # rare after the first batches: a reduction, no index array
        _classify(np.unique(cps[flags == 0]))
        flags = _FLAG_TABLE.take(cps)
    return flags


def utf8_lengths(cps: np.ndarray) -> np.ndarray:
    # uint8 views of the comparisons: a quarter of the memory traffic of int64 sums
    n = (cps >= 0x80).view(np.uint8) + (cps >= 0x800).view(np.uint8)
    n += (cps >= 0x10000).view(np.uint8) + np.uint8(1)
    return n.astype(np.int64)


def _resolve(raw: np.ndarray, doc_starts: np.ndarray) -> np.ndarray:
    """Script index of each code point from its own (`raw`), with Common and Inherited resolved.

    A Common or Inherited code point (spaces, punctuation, digits, combining marks shared by
    scripts) takes the script of the nearest preceding code point in the same document that has
    a real script; at a document's start, the nearest following one; a document of nothing but
    Common code points stays Zyyy. So every character, and every token, belongs to one script.
    """
    # Worked on the runs of Common/Inherited code points (a space, ". "), cut at document
    # starts, not on every code point: a run takes the script just before it, or, when it
    # opens its document, the one just after it if that is still in the document. ZYYY and
    # ZINH are 1 and 2; 0 never survives ensure_classified.
    common = np.flatnonzero(raw <= ZINH)
    if common.size == 0:
        return raw
    first = np.empty(common.size, dtype=bool)
    first[0] = True
    np.not_equal(common[1:], common[:-1] + 1, out=first[1:])
    first |= doc_starts.take(common)
    run_start = common[first]
    run_len = np.diff(np.append(np.flatnonzero(first), common.size))
    value = raw.take(run_start - 1)  # -1 wraps for a run at 0, which opens its document
    opens = np.flatnonzero(doc_starts.take(run_start))
    if opens.size:
        after = run_start[opens] + run_len[opens]  # a real code point, a document start or the end
        inside = after < raw.size
        inside[inside] = ~doc_starts[after[inside]]
        value[opens] = np.where(inside, raw.take(after, mode="clip"), ZYYY)
    out = raw.copy()
    out[common] = np.repeat(value, run_len)
    return out


def is_mark_or_joiner(cps: np.ndarray) -> np.ndarray:
    """True for combining marks (\\p{M}) and ZWJ/ZWNJ: a token starting here was cut mid-word."""
    return _mark_or_joiner(ensure_classified(cps))


def _mark_or_joiner(flags: np.ndarray) -> np.ndarray:
    return (flags & (_MARK | _JOIN)) != 0


def _word_spans(flags: np.ndarray, doc_starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) indices of words.

    A word is a maximal run of word characters (letters, combining marks, digits, connector
    punctuation, ZWJ/ZWNJ), where an apostrophe between two word characters stays inside the
    word ("don't" is one word). Combining marks never split a word: a Bengali word with vowel
    signs is one word. Words never cross a document boundary.
    """
    w = (flags & _WORD) != 0
    if len(flags) > 2:
        apos = (flags & _APOS) != 0
        inner = np.zeros_like(w)
        inner[1:-1] = apos[1:-1] & w[:-2] & w[2:] & ~doc_starts[1:-1] & ~doc_starts[2:]
        w = w | inner
    prev_w = np.concatenate(([False], w[:-1])) & ~doc_starts
    next_w = np.concatenate((w[1:], [False])) & ~np.concatenate((doc_starts[1:], [True]))
    starts = np.flatnonzero(w & ~prev_w)
    ends = np.flatnonzero(w & ~next_w) + 1
    return starts, ends


def grapheme_starts(cps: np.ndarray, doc_starts: np.ndarray) -> np.ndarray:
    """Bool mask: True where an extended grapheme cluster (UAX #29) starts."""

    return vectorised(cps, doc_starts)


@dataclass
class TextBatch:
    """Everything about a batch of documents that does not depend on a tokenizer."""

    cps: np.ndarray  # uint32 code points of all documents, concatenated
    doc_offsets: np.ndarray  # int64, len = n_docs + 1: where each document starts in `cps`
    doc_of_char: np.ndarray  # int64 document index of each code point
    script: np.ndarray  # uint8 resolved script index of each code point
    own_script: np.ndarray  # uint8 its own script index (Common, Inherited unresolved)
    nbytes: np.ndarray  # int64 UTF-8 length of each code point
    gstart: np.ndarray  # bool: a grapheme cluster starts here
    word_starts: np.ndarray  # int64 word start indices (into cps)
    word_ends: np.ndarray  # int64 word end indices (exclusive)
    flags: np.ndarray  # uint8 flag bits of each code point (is_mark_or_joiner's)
    running: np.ndarray  # bool: in its script's running text (fertility.unicode.running)

    @property
    def n_docs(self) -> int:
        return len(self.doc_offsets) - 1

    def mark_or_joiner(self, pos: np.ndarray) -> np.ndarray:
        """is_mark_or_joiner of the code points at `pos`, from the batch's flags."""
        return _mark_or_joiner(self.flags[pos])


def _joined(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The code points of `texts` joined: (cps, doc_offsets, doc_of_char, doc_starts)."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    cps = code_points("".join(texts))
    doc_of_char = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    doc_starts = np.zeros(len(cps), dtype=bool)
    doc_starts[offsets[:-1][lengths > 0]] = True
    return cps, offsets, doc_of_char, doc_starts


def resolved_scripts(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(doc_of_char, script) of `texts` as `analyze_texts` gives them, without the word,
    grapheme and running-text tables (a vocabulary's classes need only these)."""
    cps, _, doc_of_char, doc_starts = _joined(texts)
    ensure_classified(cps)
    return doc_of_char, _resolve(_SCRIPT_TABLE.take(cps), doc_starts)


def analyze_texts(texts: list[str]) -> TextBatch:
    cps, offsets, doc_of_char, doc_starts = _joined(texts)
    flags = ensure_classified(cps)
    ws, we = _word_spans(flags, doc_starts)
    raw = _SCRIPT_TABLE.take(cps)
    running = running_mask(
        raw, flags, offsets, doc_of_char, _FAMILY, _NOSPACE_FAMILY, _SPACE, _BREAK
    )
    return TextBatch(
        cps=cps,
        doc_offsets=offsets,
        doc_of_char=doc_of_char,
        script=_resolve(raw, doc_starts),
        own_script=raw,
        nbytes=utf8_lengths(cps),
        gstart=grapheme_starts(cps, doc_starts),
        word_starts=ws,
        word_ends=we,
        flags=flags,
        running=running,
    )
