"""A WordPiece tokenizer.json's token spans from its ids alone, the measuring path's form.

The library gives spans only through `encode_batch`, whose alignment tracking and Python
tuples cost MiniLM's tokenizer 2.2 s of CPU on 6 MB of real text against 1.4 s for the ids
of `encode_batch_fast` (benchmarks/RESULTS.md, stop 53). Under BERT's normaliser and
pre-tokenizer the ids and the text say where each token lies:

- the normaliser works character by character: each character becomes a string of its own
  (empty where it is removed, two or three characters for NFD's Hangul jamo or a lower-cased
  İ), which the library's own `normalize_str` gives, once per distinct character;
- the pre-tokenizer drops whitespace and isolates punctuation, also character by character:
  its own `pre_tokenize_str` of that string, and of the string twice over, tells which;
- a word's tokens spell it out: a first piece, then pieces with the continuing prefix, their
  lengths adding up to the word's normalised length; or one unknown token for the word.

The library gives a token the original characters from the one its first normalised
character came from to the one its last came from; so does `spans`. A text is left to the
library's offsets (the `bad` mask) wherever that cannot be shown: a character whose
normalised string mixes a word's letters with whitespace or punctuation, one that NFD's
canonical ordering could move (a combining character kept after decomposition), an id that
is an added token or no piece of the model, or words and pieces that do not add up
(tests/tokenizers/test_wordpiece_spans.py: the library's offsets, token for token, on real
text of 13 languages and on every normaliser setting).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from fertility.tokenizers.base import PreTokens

LETTER, SPACE, PUNCT, ALONE, GONE, MIXED = range(6)  # a character's class
UNSEEN = 255
UNICODE_SIZE = 0x110000


def wordpiece_spans_for(tok, obj: dict) -> WordPieceSpans | None:
    """WordPieceSpans for a loaded tokenizer.json (`tok`: the library's Tokenizer, `obj`: its
    JSON) whose parts all follow the rules above, else None: a WordPiece model, BERT's
    pre-tokenizer, and BERT's normaliser or none, with a continuing prefix the pre-tokenizer
    isolates (so that no word begins with it)."""
    model, pre, norm = obj.get("model") or {}, obj.get("pre_tokenizer"), obj.get("normalizer")
    if model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
        return None
    if not isinstance(pre, dict) or pre.get("type") != "BertPreTokenizer":
        return None
    if norm is not None and (not isinstance(norm, dict) or norm.get("type") != "BertNormalizer"):
        return None
    prefix = continuing_prefix(model)
    split = tok.pre_tokenizer.pre_tokenize_str(prefix) if prefix else []
    if not prefix or [p for p, _ in split] != list(prefix):
        return None
    # NFD comes with stripping accents
    return WordPieceSpans(tok, model, prefix, norm is not None and bert_strips_accents(norm))


def continuing_prefix(model: dict) -> str | None:
    """What a tokenizer.json model's pieces inside a word begin with: its
    continuing_subword_prefix, else WordPiece's default "##" (the library's), else none."""
    prefix = model.get("continuing_subword_prefix")
    if prefix is None and model.get("type") == "WordPiece":
        return "##"
    return prefix or None


def bert_strips_accents(normalizer: dict) -> bool:
    """Whether a BertNormalizer strips accents (NFD, then marks removed): `strip_accents`,
    which follows `lowercase` where unset; `lowercase` is on where unset (the library's
    defaults)."""
    strip = normalizer.get("strip_accents")
    return bool(strip) or (strip is None and bool(normalizer.get("lowercase", True)))


class WordPieceSpans:
    """Token spans of one WordPiece tokenizer from its ids (wordpiece_spans_for builds it)."""

    def __init__(self, tok, model: dict, prefix: str, decomposes: bool) -> None:
        self._normalize = tok.normalizer.normalize_str if tok.normalizer is not None else None
        self._pre = tok.pre_tokenizer.pre_tokenize_str
        self._decomposes = decomposes
        vocab: dict[str, int] = model["vocab"]
        size = max(vocab.values(), default=-1) + 1
        # each id's characters in the word (-1: an id no word's piece is: the unknown token,
        # whose span is its word's, or a piece that is only the prefix)
        self._length = np.full(size, -1, np.int64)
        self._continues = np.zeros(size, dtype=bool)
        for piece, i in vocab.items():
            goes_on = piece.startswith(prefix)
            n = len(piece) - len(prefix) if goes_on else len(piece)
            self._length[i] = n if n > 0 else -1
            self._continues[i] = goes_on
        unk = model.get("unk_token")
        self._unk = vocab.get(unk, -1) if isinstance(unk, str) else -1
        # added tokens the library may take out of a text before the model sees it (the
        # special ones are text here: HFTokenizer sets encode_special_tokens)
        added = tok.get_added_tokens_decoder()
        self._added = np.array(sorted(i for i, t in added.items() if not t.special), np.int64)
        # per code point: its class and its normalised length, filled as characters are seen
        self._class = np.full(UNICODE_SIZE, UNSEEN, np.uint8)
        self._width = np.zeros(UNICODE_SIZE, np.uint8)  # (BERT's normaliser: 1 to 3)

    def spans(self, texts: Sequence[str], ids: np.ndarray, counts: np.ndarray) -> Spans:
        """Each token's code-point span local to its text, for the batch's ids laid end to
        end (`counts`: tokens per text), the texts whose spans are not known exact (`bad`:
        their spans are meaningless, ask the library), and the words."""
        n_texts = len(texts)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=n_texts)
        text_start = np.cumsum(lengths) - lengths
        cps = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), np.uint32)
        klass, width = self._classes(cps)
        doc = np.repeat(np.arange(n_texts), lengths)
        bad = np.zeros(n_texts, dtype=bool)
        bad[doc[klass == MIXED]] = True
        # normalised positions, end to end over the batch (a removed character or whitespace
        # has none): the character each came from, and each character's first
        char_at = np.repeat(np.arange(len(cps)), width)
        words = _words(klass, np.cumsum(width) - width, len(char_at), doc, n_texts)

        tdoc = np.repeat(np.arange(n_texts), counts)
        known = ids < len(self._length)
        safe = np.where(known, ids, 0)
        tlen = self._length.take(safe)
        starts_word = ~self._continues.take(safe)
        unk = ids == self._unk
        odd = ~known | ((tlen < 0) & ~unk)
        if self._added.size:
            odd |= np.isin(ids, self._added)
        bad[tdoc[odd]] = True
        # each text's first token starts a word, and it has as many word starts as words
        first = np.cumsum(counts) - counts
        has = counts > 0
        bad[has] |= ~starts_word.take(first[has])
        bad |= np.bincount(tdoc[starts_word], minlength=n_texts) != words.per_text
        if not ids.size or not char_at.size:
            none = np.zeros(ids.size, np.int64)
            return Spans(none, none, bad | has, words.doc, none[:0], none[:0], text_start)
        # the word of each token: its text's first word and the word starts before it there
        started = np.cumsum(starts_word) - 1  # word starts up to each token, less one
        before = np.append(0, np.cumsum(starts_word))[first]
        words_before = np.cumsum(words.per_text) - words.per_text  # each text's first word
        tw = np.clip(words_before[tdoc] + started - before[tdoc], 0, len(words.start) - 1)
        tlen = np.where(unk, words.length.take(tw), tlen)
        n_words = len(words.start)
        spelled = np.bincount(tw, weights=tlen, minlength=n_words)
        pieces = np.bincount(tw, minlength=n_words)
        lone_unk = np.bincount(tw[unk], minlength=n_words) > 0
        word_bad = (spelled != words.length) | (lone_unk & (pieces != 1))
        bad[words.doc[word_bad]] = True
        # a token's first normalised position: its word's first plus the pieces before it
        # in the word (from the word's first token: the last word start at or before it)
        behind = np.cumsum(tlen) - tlen
        lead = np.maximum.accumulate(np.where(starts_word, np.arange(ids.size), 0))
        ns = words.start.take(tw) + behind - behind.take(lead)
        ne = ns + np.maximum(tlen, 1)
        c_first = char_at.take(ns, mode="clip")  # (clip: only a bad text's reach past the end)
        c_last = char_at.take(ne - 1, mode="clip")
        base = text_start.take(tdoc)
        w_first = char_at.take(words.start, mode="clip")
        w_end = char_at.take(words.start + words.length - 1, mode="clip") + 1
        return Spans(c_first - base, c_last + 1 - base, bad, words.doc, w_first, w_end, text_start)

    def _classes(self, cps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each code point's class and normalised length, the new ones classified first.
        Two encoding threads may classify the same one at once: they write the same values,
        the length before the class, so that a class seen set has its length."""
        klass = self._class.take(cps)
        new = cps[klass == UNSEEN]
        if new.size:
            for cp in np.unique(new).tolist():
                k, w = self._classify(chr(cp))
                self._width[cp] = w
                self._class[cp] = k
            klass = self._class.take(cps)
        return klass, self._width.take(cps).astype(np.int64)

    def _classify(self, c: str) -> tuple[int, int]:
        """(class, normalised length) of one character, by the library's own normaliser and
        pre-tokenizer: removed (GONE), whitespace (SPACE), a word's letters (LETTER), a
        punctuation mark standing alone (PUNCT), a word of its own between whitespace that
        the normaliser added (ALONE: handle_chinese_chars' " 中 "), or none of these (MIXED)."""
        s = self._normalize(c) if self._normalize is not None else c
        if not s:
            return GONE, 0
        split = [p for p, _ in self._pre(s)]
        if not split:
            return SPACE, 0
        if self._decomposes and any(unicodedata.combining(ch) for ch in s):
            return MIXED, 0  # canonical ordering may move it past its neighbours' marks
        if split == [s]:
            twice = [p for p, _ in self._pre(s + s)]
            if twice == [s + s]:
                return LETTER, len(s)
            if len(s) == 1 and twice == [s, s]:
                return PUNCT, 1
            return MIXED, 0
        if len(split) == 1:
            head, _, tail = s.partition(split[0])
            if head and tail and not self._pre(head) and not self._pre(tail):
                return ALONE, len(split[0])
        return MIXED, 0


class Spans(NamedTuple):
    """WordPieceSpans.spans's answer: the tokens' spans (local to each text), the texts
    whose spans are not known exact, and the words (the pre-tokenizer's pieces): the text
    of each, their first and one-past-last original characters (batch indices)."""

    starts: np.ndarray
    ends: np.ndarray
    bad: np.ndarray
    word_doc: np.ndarray
    word_first: np.ndarray
    word_end: np.ndarray
    text_start: np.ndarray

    def pre_tokens(self, docs: Sequence[int]) -> PreTokens:
        """The pre-tokens of texts `docs` that are not bad: each word's original characters,
        from the first its first normalised character came from to the last its last one
        came from, as the library's pre_tokenize gives them."""
        want = np.zeros(len(self.bad), dtype=bool)
        want[list(docs)] = True
        want &= ~self.bad
        doc = self.word_doc
        sel = np.flatnonzero(want.take(doc)) if doc.size else doc
        base = self.text_start.take(doc.take(sel))
        spans = np.stack((self.word_first.take(sel) - base, self.word_end.take(sel) - base), 1)
        kept = np.flatnonzero(want)
        per = np.bincount(doc.take(sel), minlength=len(want)).take(kept)
        return PreTokens(kept.astype(np.int64), spans.astype(np.int64), per.astype(np.int64))


class _Words(NamedTuple):
    """The batch's words (pre-tokens) in order: each one's first normalised position (end to
    end over the batch), normalised length and text; each text's count of them."""

    start: np.ndarray
    length: np.ndarray
    doc: np.ndarray
    per_text: np.ndarray


def _words(klass: np.ndarray, at: np.ndarray, total: int, doc: np.ndarray, n: int) -> _Words:
    """The words the pre-tokenizer makes of the normalised texts: a run of LETTER characters
    (removed ones between them do not part them), or one PUNCT or ALONE character. `at`: each
    character's first normalised position, `total`: the batch's normalised length. What lies
    between a word's first character and the next word's is the word's or has no normalised
    position (whitespace, removed), so a word's length is the distance to the next."""
    kept = np.flatnonzero(klass != GONE)
    kk, kd = klass.take(kept), doc.take(kept)
    letter = kk == LETTER
    joins = np.zeros(len(kept), dtype=bool)  # a letter right after a letter of its text
    joins[1:] = letter[1:] & letter[:-1] & (kd[1:] == kd[:-1])
    begins = np.flatnonzero((kk != SPACE) & ~joins)
    start = at.take(kept.take(begins))
    length = np.diff(start, append=total)
    word_doc = kd.take(begins)
    return _Words(start, length, word_doc, np.bincount(word_doc, minlength=n))
