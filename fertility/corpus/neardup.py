"""Near-duplicates between held-out and training documents (`fertility fix` and `extend`).

Every real corpus repeats itself: UI strings that differ by a number or a full stop, a
boilerplate sentence in many pages. A held-out document with such a twin in the training text
measures memory, not the tokenizer, so the split drops from *training* every document that
shares a near-duplicate with a held-out one (fertility.corpus.sampling says why training).

Two documents are near-duplicates when, after `normalise` (NFKC, casefold, everything but
letters and marks becomes a space, spaces collapsed), they share a shingle:
- in text written with spaces, a run of WORDS (8) words;
- in text mostly in a script written without them (Han, kana, Thai, Lao, Khmer, Myanmar), a
  run of CHARS (20) characters, spaces dropped (20 such characters carry about as much text
  as 8 words);
- a document shorter than one shingle is its own only shingle: two short documents are
  near-duplicates when their normalised texts are equal.
A document whose normalised text is empty (only digits or punctuation) has no shingle.

Shingles are hashed to 64 bits (a polynomial hash of the code points, mixed): a false match
needs two different shingles with the same hash, about (held-out shingles x training
shingles) / 2**64, below 1e-6 for a billion of each side. Only the held-out documents'
hashes are kept (`HeldoutShingles`, sorted uint64: 8 bytes a shingle, and fix holds out at most
--heldout-max documents per language); training documents are hashed a batch at a time.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

import numpy as np
import regex

from fertility.hashing import mix64

WORDS = 8
CHARS = 20
BATCH_CHARS = 1 << 20  # code points hashed at once: bounds the arrays, not the result

_NOT_LETTER = regex.compile(r"[^\p{L}\p{M}]+")
_UNSPACED = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Mymr}]")
_P = 0x100000001B3  # odd, so invertible modulo 2**64
_P_INV = pow(_P, -1, 1 << 64)


def normalise(text: str) -> str:
    """NFKC, casefolded, only letters and marks, single spaces between runs of them."""
    return _NOT_LETTER.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _units(text: str) -> tuple[str, bool]:
    """The normalised text shingles are cut from, and whether its units are characters."""
    n = normalise(text)
    letters = len(n) - n.count(" ")
    if letters and 2 * len(_UNSPACED.findall(n)) > letters:
        return n.replace(" ", ""), True
    return n, False


def _powers(base: int, n: int) -> np.ndarray:
    """base**0 .. base**(n-1) modulo 2**64 (uint64 products wrap)."""
    out = np.full(n, base, dtype=np.uint64)
    if n:
        out[0] = 1
    with np.errstate(over="ignore"):
        return np.cumprod(out, dtype=np.uint64)


def shingle_hashes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(index into `texts`, hash) of every shingle of every text (module docstring)."""
    parts = [_units(t) for t in texts]
    lengths = np.array([len(u) for u, _ in parts], dtype=np.int64)
    if not lengths.sum():
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    cp = np.frombuffer("".join(u for u, _ in parts).encode("utf-32-le"), dtype=np.uint32)
    doc = np.repeat(np.arange(len(texts)), lengths)
    chars = np.repeat(np.array([c for _, c in parts], dtype=bool), lengths)
    starts_at = np.zeros(len(cp), dtype=bool)
    ends_at = np.zeros(len(cp), dtype=bool)
    first = np.cumsum(lengths) - lengths
    nonempty = lengths > 0
    starts_at[first[nonempty]] = True
    ends_at[(first + lengths - 1)[nonempty]] = True
    space = cp == 32
    starts_at[1:] |= space[:-1]
    ends_at[:-1] |= space[1:]
    starts = np.flatnonzero(~space & (starts_at | chars))
    ends = np.flatnonzero(~space & (ends_at | chars)) + 1
    unit_doc = doc[starts]
    width = np.where(chars[starts], CHARS, WORDS)
    last = np.arange(len(starts)) + width - 1
    ok = last < len(starts)
    ok[ok] = unit_doc[last[ok]] == unit_doc[ok]
    # a document of fewer units than one shingle: its whole text, once
    units = np.bincount(unit_doc, minlength=len(texts))
    doc_width = np.where([c for _, c in parts], CHARS, WORDS)
    short = np.flatnonzero((units > 0) & (units < doc_width))
    lo = np.concatenate([starts[ok], first[short]])
    hi = np.concatenate([ends[last[ok]], first[short] + lengths[short]])
    owner = np.concatenate([unit_doc[ok], short])
    # sum cp[k] * P**k over [lo, hi), brought to P**0 at lo: the same text, the same hash
    with np.errstate(over="ignore"):
        terms = cp.astype(np.uint64) * _powers(_P, len(cp))
        pref = np.concatenate((np.zeros(1, np.uint64), np.cumsum(terms, dtype=np.uint64)))
        h = (pref[hi] - pref[lo]) * _powers(_P_INV, len(cp) + 1)[lo]
    return owner.astype(np.int64), mix64(h ^ mix64((hi - lo).astype(np.uint64)))


def _batches(texts: Iterable[str]) -> Iterable[list[str]]:
    batch: list[str] = []
    size = 0
    for t in texts:
        batch.append(t)
        size += len(t)
        if size >= BATCH_CHARS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


class HeldoutShingles:
    """The shingle hashes of the held-out documents; which other documents share one."""

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []
        self._pending: list[str] = []
        self._size = 0
        self.hashes = np.zeros(0, np.uint64)

    def add(self, text: str) -> None:
        self._pending.append(text)
        self._size += len(text)
        if self._size >= BATCH_CHARS:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._parts.append(np.unique(shingle_hashes(self._pending)[1]))
            self._pending, self._size = [], 0

    def freeze(self) -> HeldoutShingles:
        self._flush()
        self.hashes = np.unique(np.concatenate([self.hashes, *self._parts]))
        self._parts = []
        return self

    def shared(self, texts: list[str]) -> np.ndarray:
        """True for each of `texts` that shares a shingle with a held-out document."""
        out = np.zeros(len(texts), dtype=bool)
        if not len(self.hashes):
            return out
        at = 0
        for batch in _batches(texts):
            owner, h = shingle_hashes(batch)
            i = np.minimum(np.searchsorted(self.hashes, h), len(self.hashes) - 1)
            out[at + owner[self.hashes[i] == h]] = True
            at += len(batch)
        return out
