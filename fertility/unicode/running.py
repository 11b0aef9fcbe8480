"""Running text: the characters of a document that are a script's prose, not fragments.

A script is judged (gate floors and ceilings, findings, the verdict) on its running text
only; docs/GATE.md ("Running text") gives the rule and the measurements that chose its
numbers. Words are the letters of one script family inside one whitespace-separated token
(digits, punctuation and other Common or Inherited characters neither make nor split a
word); a token holding a breaker character (BREAK_RE: markup, code, placeholders such as
`{ -brand-short-name }`, `%1$S`) makes its words fragments and ends the runs around it. A
run is consecutive words of one family; it is running text when it has at least RUN_WORDS
words (scripts written with spaces) or RUN_LETTERS letters (scripts written without them),
or when its family has the most words of its document (a one-word document in its own
script is running text: "Firefox" alone, "ファイル"). Han, Hiragana, Katakana, Hangul and
Bopomofo are one family, as Japanese and Korean mix them within a sentence.

Characters that are not letters (spaces, punctuation, digits, marks of the Inherited
script) take the flag of the character whose script they take
(fertility.unicode.batch._resolve): the previous letter's, at a document's start the next one's.
"""

from __future__ import annotations

import numpy as np

from fertility.arrays import index_dtype

RUN_WORDS = 3  # words of a run, scripts written with spaces
RUN_LETTERS = 4  # letters of a run, scripts written without spaces
CJK = ("Hani", "Hira", "Kana", "Hang", "Bopo")


def families(scripts: list[str], no_space: frozenset[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per script index: its family (0 for Common, Inherited, Unknown and "?"), and per
    family whether it is written without spaces."""
    # the script codes' own type (uint8): a family per code point moves an eighth of int64's
    family = np.arange(len(scripts), dtype=np.min_scalar_type(len(scripts) - 1))
    family[[i for i, s in enumerate(scripts) if s in ("?", "Zyyy", "Zinh", "Zzzz")]] = 0
    han = scripts.index("Hani") if "Hani" in scripts else 0
    family[[i for i, s in enumerate(scripts) if s in CJK]] = han
    nospace = np.array([s in no_space or s in CJK for s in scripts], dtype=bool)
    return family, nospace


def running_mask(
    raw: np.ndarray,
    flags: np.ndarray,
    doc_start: np.ndarray,
    doc_of_char: np.ndarray,
    family_table: np.ndarray,
    nospace: np.ndarray,
    space_bit: int,
    break_bit: int,
) -> np.ndarray:
    """True for each code point in running text (the module's rule). raw: the unresolved
    script index of each code point; flags: the flag table's bits (space_bit: whitespace,
    break_bit: a breaker); doc_start: True where a document starts (TextBatch's)."""
    n = len(raw)
    fam = family_table.take(raw)
    letters = np.flatnonzero(fam > 0)
    if letters.size == 0:  # no word (an empty batch among them): no running text
        return np.zeros(n, dtype=bool)
    space = (flags & space_bit) != 0
    # a token starts at a non-space code point after a space or at a document's start
    tok_start = ~space
    tok_start[1:] &= space[:-1] | doc_start[1:]
    # the token a non-space code point is in, numbered from 1 (a non-space code point is
    # always at or after its token's start, so 0 is only ever a space's): no pass to
    # subtract 1, and the count of tokens is the last number
    tok_id: np.ndarray = np.cumsum(tok_start, dtype=index_dtype(n))
    # (a breaker is never whitespace: BREAK_RE holds none)
    tok_brk = np.bincount(tok_id[(flags & break_bit) != 0], minlength=int(tok_id[-1]) + 1) > 0
    lf, lt = fam[letters], tok_id[letters]
    new_word = np.ones(len(letters), dtype=bool)
    new_word[1:] = (lt[1:] != lt[:-1]) | (lf[1:] != lf[:-1])
    w_first = np.flatnonzero(new_word)
    w_fam, w_tok = lf[w_first], lt[w_first]
    w_letters = np.diff(np.append(w_first, len(letters)))
    w_doc = doc_of_char[letters[w_first]]
    w_clean = ~tok_brk[w_tok]
    # breaker tokens strictly between two consecutive words (inclusive counts per token)
    cum_brk = np.cumsum(tok_brk)
    before_next = cum_brk[w_tok[1:]] - tok_brk[w_tok[1:]]
    new_run = np.ones(len(w_fam), dtype=bool)
    new_run[1:] = (
        (w_doc[1:] != w_doc[:-1])
        | (w_fam[1:] != w_fam[:-1])
        | ~w_clean[1:]
        | ~w_clean[:-1]
        | (before_next != cum_brk[w_tok[:-1]])
    )
    run_of_word: np.ndarray = np.cumsum(new_run, dtype=tok_id.dtype) - 1
    r_first = np.flatnonzero(new_run)
    r_words = np.diff(np.append(r_first, len(w_fam)))
    r_letters = np.add.reduceat(w_letters, r_first)
    r_fam, r_doc, r_clean = w_fam[r_first], w_doc[r_first], w_clean[r_first]
    long_enough = np.where(nospace[r_fam], r_letters >= RUN_LETTERS, r_words >= RUN_WORDS)
    ok = r_clean & (long_enough | (r_fam == _dominant(w_doc, w_fam, w_clean)[r_doc]))
    return _spread(ok[run_of_word], letters[w_first], w_doc, doc_start, doc_of_char)


def _dominant(w_doc: np.ndarray, w_fam: np.ndarray, w_clean: np.ndarray) -> np.ndarray:
    """Per document (indexed up to the last one with a word): the family with the most
    clean words, 0 where none or where two tie."""
    n_docs = int(w_doc.max()) + 1
    # the families present, numbered 0..width-1: a batch holds a few of the 170 scripts,
    # and a table of documents x every script cost a quarter of running_mask
    present = np.flatnonzero(np.bincount(w_fam))
    number = np.zeros(int(present[-1]) + 1, dtype=np.int64)
    number[present] = np.arange(present.size)
    width = present.size
    cells = w_doc[w_clean] * width + number[w_fam[w_clean]]
    counts = np.bincount(cells, minlength=n_docs * width).reshape(n_docs, width)
    best = counts.argmax(axis=1)
    top = counts[np.arange(n_docs), best]
    tie = (counts == top[:, None]).sum(axis=1) > 1
    return np.where((top > 0) & ~tie, present[best], 0)


def _spread(flag, w_start, w_doc, doc_start, doc_of_char) -> np.ndarray:
    """Each code point's flag: a word's (`flag`, one per word, which starts at `w_start` in
    document `w_doc`) over its letters, and a non-letter that of the letter whose script it
    takes: the previous letter of its document, else the next one (none: False). The flag
    changes only where a word or a document starts, so it is worked out once per stretch
    between those and repeated over each: no work per code point but the marks and the
    repeat, where spreading the letters' flags to each gap between them took a gather per
    non-letter (benchmarks/RESULTS.md, stop 48)."""
    word = np.zeros(len(doc_start), dtype=bool)
    word[w_start] = True
    at = np.flatnonzero(word | doc_start)  # where a stretch starts: a word or a document
    is_word = word.take(at)
    k = np.cumsum(is_word) - 1  # the last word started at or before each stretch
    # A stretch that starts a word has that word's flag (its letters, then the non-letters
    # after them). One that starts a document before its first word (leading punctuation,
    # or a document without letters) has the next word's when it is in that document.
    nxt = np.minimum(k + 1, len(flag) - 1)
    ahead = (k + 1 < len(flag)) & (w_doc.take(nxt) == doc_of_char.take(at))
    stretch = np.where(is_word, flag.take(np.maximum(k, 0)), ahead & flag.take(nxt))
    return np.repeat(stretch, np.diff(np.append(at, len(doc_start))))
