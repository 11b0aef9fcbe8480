"""A batch of documents as the tokenizer-independent facts every count needs (TextBatch):
code points, resolved scripts, UTF-8 lengths, grapheme starts, words, running text; read off
the per-code-point tables of fertility/unicode/tables.py."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fertility.unicode.graphemes import grapheme_starts as vectorised
from fertility.unicode.running import running_mask
from fertility.unicode.tables import (
    APOS_BIT,
    BREAK_BIT,
    FAMILY,
    LETTER_BIT,
    NOSPACE_FAMILY,
    SCRIPT_TABLE,
    SPACE_BIT,
    WORD_BIT,
    ZINH,
    ZYYY,
    code_points,
    ensure_classified,
    flags_mark_or_joiner,
    utf8_lengths,
)


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


def _word_spans(flags: np.ndarray, doc_starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) indices of words.

    A word is a maximal run of word characters (letters, combining marks, digits, connector
    punctuation, ZWJ/ZWNJ), where an apostrophe between two word characters stays inside the
    word ("don't" is one word). Combining marks never split a word: a Bengali word with vowel
    signs is one word. Words never cross a document boundary.
    """
    w = (flags & WORD_BIT) != 0
    if len(flags) > 2:
        apos = (flags & APOS_BIT) != 0
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

    def script_letters(self, start: int, end: int, script: int) -> tuple[int, int]:
        """The letters (\\p{L}) among code points start..end-1 of the batch, and how many of
        them have `script` (an index of SCRIPTS) as their Script property."""
        letters = (self.flags[start:end] & LETTER_BIT) != 0
        own = SCRIPT_TABLE.take(self.cps[start:end][letters]) == script
        return int(letters.sum()), int(own.sum())

    def mark_or_joiner(self, pos: np.ndarray) -> np.ndarray:
        """is_mark_or_joiner of the code points at `pos`, from the batch's flags."""
        return flags_mark_or_joiner(self.flags[pos])


def _joined(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The code points of `texts` joined: (cps, doc_offsets, doc_of_char, doc_starts)."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    return _spans(code_points("".join(texts)), lengths)


def _spans(
    cps: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(cps, doc_offsets, doc_of_char, doc_starts) of documents of `lengths` code points held
    one after another in `cps`."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    doc_of_char = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    doc_starts = np.zeros(len(cps), dtype=bool)
    doc_starts[offsets[:-1][lengths > 0]] = True
    return cps, offsets, doc_of_char, doc_starts


def resolved_scripts(text: str, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(doc_of_char, script) of the documents `text` holds one after another, `lengths` code
    points each, as `analyze_texts` gives them, without the word, grapheme and running-text
    tables (a vocabulary's classes need only these, and pass its tokens as one string)."""
    cps, _, doc_of_char, doc_starts = _spans(code_points(text), np.asarray(lengths, np.int64))
    ensure_classified(cps)
    return doc_of_char, _resolve(SCRIPT_TABLE.take(cps), doc_starts)


def analyze_texts(texts: list[str]) -> TextBatch:
    cps, offsets, doc_of_char, doc_starts = _joined(texts)
    flags = ensure_classified(cps)
    ws, we = _word_spans(flags, doc_starts)
    raw = SCRIPT_TABLE.take(cps)
    running = running_mask(
        raw, flags, doc_starts, doc_of_char, FAMILY, NOSPACE_FAMILY, SPACE_BIT, BREAK_BIT
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
