"""What every tokenizer adapter shares: the `Encoded` record, the `Tokenizer` protocol, the
byte table of byte-level vocabularies and the offset helpers."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from operator import methodcaller
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np

from fertility.arrays import index_dtype
from fertility.errors import TokenizerError


class Encoded(NamedTuple):
    ids: np.ndarray  # int64 token ids
    starts: np.ndarray  # int64 code-point offset of each token's first character
    ends: np.ndarray  # int64 code-point offset one past its last character


# Every tokenizer kind; each is declared once, with what it can do, in fertility.tokenizers.kinds
# ("pretokenizer": a standard pre-tokenizer family measured as a tokenizer, the ceiling).
Kind = Literal["hf", "sentencepiece", "tiktoken", "tekken", "pretokenizer"]

Flat = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # ids, starts, ends, per text


class PreTokens(NamedTuple):
    """The pre-tokens of some texts of a batch (their code-point spans, local to each text,
    non-empty, in order), as the tokenizer's own pre_tokenize gives them."""

    docs: np.ndarray  # int64: the texts they are of, in order
    spans: np.ndarray  # int64 (pre-tokens x 2): start and end of each, text after text
    per_doc: np.ndarray  # int64: how many each of those texts has


class Checked(NamedTuple):
    """What an encoding thread brings for a batch's detail documents where its kind can, so
    the measuring thread does not call the tokenizer for them: their pre-tokens (None where
    the encode does not give them exactly) and the texts they decode to (document -> text;
    None: decoded on the measuring thread)."""

    pre: PreTokens | None
    decoded: dict[int, str] | None


@runtime_checkable
class Tokenizer(Protocol):
    """What the code reads of a loaded tokenizer, and all it reads: every adapter satisfies it
    (mypy checks each loader of fertility.tokenizers.kinds against it; tests/tokenizers assert
    isinstance). What differs
    between the formats is declared in fertility.tokenizers.kinds, not asked of `kind`."""

    # read-only: an adapter may compute one when first asked for (cached_property)
    @property
    def label(self) -> str: ...
    @property
    def spec(self) -> str: ...
    @property
    def kind(self) -> Kind: ...
    @property
    def path(self) -> Path | None: ...  # the file it was loaded from; None for tiktoken:NAME
    @property
    def vocab_size(self) -> int: ...
    @property
    def fingerprint(self) -> str: ...  # sha256 of vocabulary + settings
    @property
    def unk_id(self) -> int | None: ...
    @property
    def special_tokens(self) -> dict[str, int]: ...

    def encode_batch(self, texts: list[str]) -> list[Encoded]: ...  # no specials/trunc/pad
    # encode_batch laid end to end, the measuring path's form: ids, starts, ends (local to
    # each text) and tokens per text (a fast path where kinds.Capabilities.flat_encode)
    def encode_flat(self, texts: list[str]) -> Flat: ...
    def decode(self, ids) -> str: ...
    # each text's pre-tokens as (n, 2) int64 code-point spans, end to end, and how many
    # each text has
    def pre_tokenize(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]: ...
    def token_bytes(self, id: int) -> bytes: ...  # what the token adds to decoded text
    def vocabulary_bytes(self) -> Sequence[bytes]: ...  # token_bytes of every id, in order
    def partial_mask(self) -> np.ndarray: ...  # bool per id: byte pieces, split characters
    def partial_of(self, ids: np.ndarray) -> np.ndarray: ...  # partial_mask()[ids], sized by ids
    def normalize(self, text: str) -> str: ...  # the tokenizer's normaliser (identity if none)

    # {"kind", "model", "byte_level", "byte_fallback", "normalizer", "pre_tokenizer",
    #  "pattern" (a fertility.tokenizers.patterns family name or None), "pattern_regex", "unk_token"}
    def config(self) -> dict: ...


@dataclass(frozen=True)
class Converted:
    """A tokenizer as Hugging Face files, what each kind's HF conversion gives
    (fertility.tokenizers.kinds.HFExport): the tokenizer.json to write, or None when its own
    model file is copied as tokenizer.model instead (transformers' LlamaTokenizer reads it);
    `note` says what was done, for the export's summary."""

    tokenizer_json: dict[str, Any] | None
    note: str


# Real vocabularies hold at most a few hundred thousand tokens; tables are built per id, so
# an id of two billion (a typo, or a hostile file) would take gigabytes before any text is read.
MAX_TOKEN_ID = (1 << 24) - 1


def check_max_id(path, max_id: int) -> None:
    if max_id > MAX_TOKEN_ID:
        raise TokenizerError(
            f"{path}: token id {max_id:,} is beyond any real vocabulary (at most {MAX_TOKEN_ID:,})"
        )


def sha256_hex(*parts: bytes | str | Iterable[bytes]) -> str:
    """sha256 of the parts, each followed by a NUL byte. A part may be an iterable of byte
    strings, hashed as their concatenation, so a whole vocabulary's lines never need to be
    joined in memory at once."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, str):
            h.update(part.encode("utf-8"))
        elif isinstance(part, bytes):
            h.update(part)
        else:
            for piece in part:
                h.update(piece)
        h.update(b"\0")
    return h.hexdigest()


# json.dumps's canonical form (keys sorted, no spaces, UTF-8 as it is) that fingerprints use
_CANONICAL: dict[str, Any] = {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":")}
_PIECE = 1024  # items of a dict or list serialised at once


def canonical_json(obj: Any) -> Iterator[bytes]:
    """json.dumps(obj, **_CANONICAL) as UTF-8, in pieces whose concatenation is exactly it: a
    large dict or list (a tokenizer's vocabulary and merges) serialised _PIECE items at a
    time. json's C encoder holds the interpreter for a whole call, which for a 32,000-token
    tokenizer.json kept every other thread waiting 0.08 s (the start of a pass among them);
    between pieces the other threads run."""
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        keys = sorted(obj)
        if len(keys) > _PIECE:
            for i in range(0, len(keys), _PIECE):
                part = json.dumps({k: obj[k] for k in keys[i : i + _PIECE]}, **_CANONICAL)
                yield (b"{" if i == 0 else b",") + part[1:-1].encode()
            yield b"}"
            return
        yield b"{"
        for i, k in enumerate(keys):
            yield (b"," if i else b"") + json.dumps(k, **_CANONICAL).encode() + b":"
            yield from canonical_json(obj[k])
        yield b"}"
    elif isinstance(obj, list) and len(obj) > _PIECE:
        for i in range(0, len(obj), _PIECE):
            part = json.dumps(obj[i : i + _PIECE], **_CANONICAL)
            yield (b"[" if i == 0 else b",") + part[1:-1].encode()
        yield b"]"
    else:  # a small list, a dict whose keys json would turn to strings, a plain value
        yield json.dumps(obj, **_CANONICAL).encode()


def whole_texts(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """pre_tokenize's result for a tokenizer that does not cut its input: each non-empty
    text is one pre-token, an empty one has none."""
    size = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    kept = size[size > 0]
    return np.stack((np.zeros_like(kept), kept), axis=1), (size > 0).astype(np.int64)


def utf8_continues(b: np.ndarray) -> np.ndarray:
    """True for each byte of `b` (uint8) that continues a UTF-8 character (0b10xxxxxx);
    every other byte starts one (a lead byte)."""
    return (b & 0xC0) == 0x80


class TokenBytes(NamedTuple):
    """Per token id, what rebuilds spans from ids alone (flat_offsets): its bytes' length,
    how many of them start a character (UTF-8 lead bytes: all but 0b10xxxxxx), and whether
    its first byte does (1) or continues the character before it (0)."""

    length: np.ndarray
    leads: np.ndarray
    first_lead: np.ndarray

    @classmethod
    def of(cls, table: Sequence[bytes]) -> TokenBytes:
        """From every id's bytes (ByteTable._table), UTF8_CHUNK pieces joined at a time
        (bytes.join holds an 80-byte buffer record per piece: o200k's 200,000 at once
        peaked 16 MiB). o200k: a few milliseconds."""
        length = np.fromiter(map(len, table), np.int64, len(table))
        leads = length.astype(np.int32)
        first_lead = np.zeros(len(table), np.int32)
        for lo in range(0, len(table), UTF8_CHUNK):
            hi = min(lo + UTF8_CHUNK, len(table))
            cont = utf8_continues(np.frombuffer(b"".join(table[lo:hi]), np.uint8))
            n = length[lo:hi]
            some = np.flatnonzero(n)  # reduceat reads an empty piece as the next one's
            start = (np.cumsum(n) - n)[some]
            leads[lo + some] -= np.add.reduceat(cont, start, dtype=np.int32)
            first_lead[lo + some] = ~cont[start]
        return cls(length, leads, first_lead)


def offsets_from_token_bytes(
    texts: Sequence[str], ids: Sequence[np.ndarray], token_bytes: TokenBytes
) -> tuple[list[Encoded], list[int]]:
    """Code-point spans of tokens whose bytes concatenate to each text's UTF-8.

    Returns the encodings and the indices of texts whose tokens do not add up to the text's
    byte length (their spans are clipped to the text; callers may redo them another way).
    See `flat_offsets` for how.
    """
    if len(texts) == 0:
        return [], []
    n_tok = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    all_ids = np.concatenate(ids) if len(ids) > 1 else np.asarray(ids[0])
    all_ids = all_ids.astype(np.int64, copy=False)
    starts, ends, bad = flat_offsets(texts, all_ids, n_tok, token_bytes)
    # Plain slicing: np.split costs several times more per piece.
    bounds = np.cumsum(n_tok).tolist()
    return [
        Encoded(all_ids[a:b], starts[a:b], ends[a:b]) for a, b in zip([0, *bounds[:-1]], bounds)
    ], bad


def flat_from_id_lists(
    texts: Sequence[str],
    lists: Iterable[Sequence[int]],
    counts: np.ndarray,
    token_bytes: TokenBytes,
) -> Flat | None:
    """The measuring path's flat form of a batch (ids, starts, ends local to each text, tokens
    per text) from a library's id lists (`counts`: their lengths, known without building
    the lists), with spans from the tokens' bytes (`flat_offsets`); None when some text's
    tokens do not add up to its bytes (map those another way)."""
    ids = np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(counts.sum()))
    starts, ends, bad = flat_offsets(texts, ids, counts, token_bytes)
    return None if bad else (ids, starts, ends, counts)


def pre_tokens_from_words(
    flat: Flat, docs: Sequence[int], words: Sequence[Sequence[int | None]]
) -> PreTokens:
    """The pre-tokens of texts `docs` of an encoded batch from each token's word id (the
    library's number of the pre-token it came from; `words`: one list per text): a pre-token
    spans from its first token's start to its tokens' last end. Exact where every character
    of a pre-token lies in some token of it and no token crosses two (byte-level BPE, whose
    tokens cover every byte, and WordPiece, which gives a word it cannot split one unknown
    token) and no added token was taken out of the text first: the caller says where that
    holds. A text with a token of no word, or whose word ids go back, is left out."""
    _, starts, ends, per_text = flat
    bounds = np.concatenate(([0], np.cumsum(per_text))).tolist()
    kept, spans, sizes = [], [], []
    for i, w in zip(docs, words):
        if None in w:
            continue
        word = np.asarray(w, dtype=np.int64)
        if (word[1:] < word[:-1]).any():
            continue
        first = np.flatnonzero(np.diff(word, prepend=-1))
        a, b = bounds[i], bounds[i + 1]
        s = starts[a:b].take(first)
        e = np.maximum.reduceat(ends[a:b], first) if first.size else s
        keep = e > s
        kept.append(i)
        spans.append(np.stack((s[keep], e[keep]), axis=1))
        sizes.append(int(keep.sum()))
    return PreTokens(
        np.asarray(kept, dtype=np.int64),
        np.concatenate(spans) if spans else np.zeros((0, 2), np.int64),
        np.asarray(sizes, dtype=np.int64),
    )


def concat_encoded(
    encs: Sequence[Encoded],
) -> Flat:
    """Per-text encodings laid end to end: ids, starts, ends and tokens per text."""
    counts = np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(encs))
    if not encs:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, counts
    ids, starts, ends = (np.concatenate(col).astype(np.int64, copy=False) for col in zip(*encs))
    return ids, starts, ends, counts


_UTF8 = methodcaller("encode", "utf-8", "surrogatepass")


def flat_offsets(
    texts: Sequence[str], all_ids: np.ndarray, n_tok: np.ndarray, token_bytes: TokenBytes
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Start and end code-point offsets (local to each text) of a whole batch's tokens.

    A token spans the characters its bytes fall in: a token with part of a character's bytes
    spans the whole character. Also returns the indices of texts whose tokens do not add up
    to the text's byte length. This sits on the measuring hot path. When every text's tokens
    add up to its bytes and to its characters (lead bytes) and no token is empty (the usual
    case), the spans come from the tokens alone: the characters started before a token's
    end are the lead bytes of the tokens up to it, so a token ends where that count does
    and starts its lead bytes earlier, one later when its first byte continues a character.
    That is the same map as `_byte_spans`, which works byte by byte, in half its time (the
    encoding threads of a 25 MB report spent 0.28 s there, against 0.13 s).
    """
    n_docs = len(texts)
    n_chars = np.fromiter(map(len, texts), dtype=np.int64, count=n_docs)
    n_bytes = np.fromiter(map(len, map(_UTF8, texts)), dtype=np.int64, count=n_docs)
    tl = token_bytes.length.take(all_ids)
    lead = token_bytes.leads.take(all_ids)
    tok_end = np.cumsum(n_tok)
    cum_bytes, cum_leads = np.zeros(len(tl) + 1, np.int64), np.zeros(len(tl) + 1, np.int64)
    np.cumsum(tl, out=cum_bytes[1:])
    np.cumsum(lead, out=cum_leads[1:])
    doc_bytes = cum_bytes[tok_end] - cum_bytes[tok_end - n_tok]
    bad = np.flatnonzero(doc_bytes != n_bytes).tolist()
    doc_leads = cum_leads[tok_end] - cum_leads[tok_end - n_tok]
    if not bad and (doc_leads == n_chars).all() and tl.all():
        char_start = np.repeat(np.cumsum(n_chars) - n_chars, n_tok)
        ends = cum_leads[1:] - char_start
        starts = ends - lead + token_bytes.first_lead.take(all_ids) - 1
        return starts, ends, bad
    starts, ends = _byte_spans(texts, n_chars, n_bytes, tl, n_tok, bool(bad))
    return starts, ends, bad


def _byte_spans(
    texts: Sequence[str],
    n_chars: np.ndarray,
    n_bytes: np.ndarray,
    tl: np.ndarray,
    n_tok: np.ndarray,
    clip: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """flat_offsets byte by byte (each text's characters and bytes, each token's bytes, each
    text's tokens): byte offsets from cumulative token lengths, each mapped to the character
    holding that byte; with `clip` (some text's tokens do not add up to its bytes), each
    text's tokens are clipped to its bytes."""
    # One encode of the joined batch, not one per text: UTF-8 is encoded character by
    # character (surrogatepass included), so the join's bytes are the texts' bytes end to end.
    data = np.frombuffer("".join(texts).encode("utf-8", "surrogatepass"), dtype=np.uint8)
    # Character index of every byte of the batch: count the bytes that start a character
    # (all but 0b10xxxxxx continuation bytes); one sentinel past the end.
    lead = ~utf8_continues(data)
    index_type = index_dtype(len(data))
    char_of_byte = np.empty(len(data) + 1, dtype=index_type)
    np.cumsum(lead, dtype=index_type, out=char_of_byte[1:])
    char_of_byte[:-1] = char_of_byte[1:] - 1
    char_of_byte[-1] = int(n_chars.sum())
    text_start = np.cumsum(n_bytes) - n_bytes

    cum = np.cumsum(tl)
    if not clip:  # the usual case: token bytes tile the whole batch
        b1 = cum
        b0 = cum - tl
    else:
        tok_end = np.cumsum(n_tok)
        cum0 = np.concatenate(([0], cum))
        tok_doc = np.repeat(np.arange(len(texts)), n_tok)
        base = cum0[tok_end - n_tok][tok_doc]
        limit = n_bytes[tok_doc]
        b1 = np.minimum(cum - base, limit) + text_start[tok_doc]
        b0 = np.minimum(cum - tl - base, limit) + text_start[tok_doc]
    char_start = np.repeat(np.cumsum(n_chars) - n_chars, n_tok)
    starts = char_of_byte[b0].astype(np.int64) - char_start
    ends = np.where(b1 > b0, char_of_byte[np.maximum(b1 - 1, 0)] + 1 - char_start, starts)
    return starts, ends


class ByteTable:
    """Mixin for adapters that keep `_table`: the bytes each id stands for in decoded text.

    It defines which tokens are partial (see `partial_mask`) once for every adapter: a token
    whose bytes are not complete UTF-8, or a byte-fallback piece (`_byte_pieces`), whichever
    byte it holds (``<0x41>`` is a fallback even though "A" is a whole character).
    """

    if TYPE_CHECKING:  # what the adapter that mixes it in provides
        spec: str
        vocab_size: int

        @property
        def _table(self) -> list[bytes]: ...

    @cached_property
    def _token_bytes(self) -> TokenBytes:
        return TokenBytes.of(self._table)

    def token_bytes(self, id: int) -> bytes:
        if not 0 <= int(id) < self.vocab_size:
            raise TokenizerError(f"{self.spec}: token id {id} outside the vocabulary")
        return self._table[int(id)]

    def vocabulary_bytes(self) -> Sequence[bytes]:
        """token_bytes of every id, in id order (the table itself: read, not changed)."""
        return self._table

    @cached_property
    def _byte_pieces(self) -> np.ndarray:
        """bool per id: byte-fallback pieces; adapters with them override this."""
        return np.zeros(self.vocab_size, dtype=np.bool_)

    @cached_property
    def _partial(self) -> np.ndarray:
        return self._partial_ids(None)

    def _partial_ids(self, ids: np.ndarray | None) -> np.ndarray:
        """The rule, once: per id (None: every id), a byte piece or bytes that are not whole
        UTF-8."""
        if ids is None:
            return ~whole_utf8(self._table, self._token_bytes.length) | self._byte_pieces
        pieces = [self._table[i] for i in ids.tolist()]
        return ~whole_utf8(pieces, self._token_bytes.length[ids]) | self._byte_pieces[ids]

    def partial_mask(self) -> np.ndarray:
        return self._partial.copy()

    def partial_of(self, ids: np.ndarray) -> np.ndarray:
        """partial_mask()[ids], working out only the ids not asked about before: the
        measuring pass asks for each batch's ids, so a short text costs its own few ids,
        not a decode of the whole vocabulary (o200k: 200,000 tokens for a one-line report).
        Once it has been asked about as many ids as the vocabulary holds, the whole mask
        costs no more than the text did, and each later batch is one lookup in it."""
        self._partial_asked += len(ids)
        if "_partial" in self.__dict__ or self._partial_asked >= self.vocab_size:
            return self._partial[ids]
        known, partial = self._partial_seen
        fresh = ids[~known[ids]]
        if fresh.size:
            mark = np.zeros(len(known), bool)  # each once (np.unique imports numpy.ma)
            mark[fresh] = True
            fresh = np.flatnonzero(mark)
            partial[fresh] = self._partial_ids(fresh)
            known[fresh] = True
        return partial[ids]

    _partial_asked = 0  # ids partial_of was asked about, in all (repeats counted)

    @cached_property
    def _partial_seen(self) -> tuple[np.ndarray, np.ndarray]:
        """partial_of's cache: (asked about, partial) per id."""
        return np.zeros(self.vocab_size, np.bool_), np.zeros(self.vocab_size, np.bool_)


# The length of the character a byte starts in UTF-8 (RFC 3629); 0 for a continuation byte
# (10xxxxxx) and for bytes UTF-8 never holds (C0, C1, F5-FF)
_CHAR_LEN = np.zeros(256, np.uint8)
_CHAR_LEN[:0x80], _CHAR_LEN[0xC2:0xE0], _CHAR_LEN[0xE0:0xF0], _CHAR_LEN[0xF0:0xF5] = 1, 2, 3, 4


def whole_utf8(pieces: Sequence[bytes], lengths: np.ndarray | None = None) -> np.ndarray:
    """Per piece, whole_chars (complete, valid UTF-8), for all of them at once with numpy
    (o200k's 200,000 tokens: 0.055 s decoded one by one, 0.03 s here), in chunks of
    UTF8_CHUNK pieces (all at once, the per-byte arrays of o200k peaked 29 MB). `lengths`:
    the pieces' lengths when known."""
    if lengths is None:
        lengths = np.fromiter(map(len, pieces), np.int64, len(pieces))
    whole = np.ones(len(pieces), bool)
    for lo in range(0, len(pieces), UTF8_CHUNK):
        hi = min(lo + UTF8_CHUNK, len(pieces))
        whole[lo:hi] = _whole_utf8(pieces[lo:hi], lengths[lo:hi])
    return whole


UTF8_CHUNK = 16384


def _whole_utf8(pieces: Sequence[bytes], lengths: np.ndarray) -> np.ndarray:
    """whole_utf8 of one chunk. A piece of ASCII alone is whole; the others are joined, and
    one is whole when each character's first byte is followed by as many continuation bytes
    as it announces, all inside the piece, and the second byte is in the range RFC 3629
    gives after E0, ED, F0 and F4 (no overlong form, no surrogate)."""
    whole = np.ones(len(pieces), bool)
    b = np.frombuffer(b"".join(pieces), np.uint8)
    some = np.flatnonzero(lengths)
    if not len(some):
        return whole
    end = np.cumsum(lengths)
    highest = np.maximum.reduceat(b, (end - lengths)[some])  # each non-empty piece's
    check = some[highest >= 0x80]  # the pieces with a byte beyond ASCII
    if not len(check):
        return whole
    lengths = lengths[check]
    end = np.cumsum(lengths)
    b = np.frombuffer(b"".join([pieces[i] for i in check.tolist()]), np.uint8)
    cont = utf8_continues(b)
    lead = np.flatnonzero(~cont)  # where each character starts
    first = b[lead]
    size = _CHAR_LEN.take(first)
    piece = np.repeat(np.arange(len(check)), lengths).take(lead)  # the piece each is in
    # a character ends where the next starts or its piece ends, whichever comes first (a
    # byte UTF-8 never holds announces 0 bytes, so it never does)
    bad = lead + size != np.minimum(np.append(lead[1:], len(b)), end[piece])
    second = b[np.minimum(lead + 1, len(b) - 1)]
    bad |= ((first == 0xE0) & (second < 0xA0)) | ((first == 0xED) & (second > 0x9F))
    bad |= ((first == 0xF0) & (second < 0x90)) | ((first == 0xF4) & (second > 0x8F))
    ok = np.bincount(piece[bad], minlength=len(check)) == 0
    ok &= ~cont[end - lengths]  # (never empty) its first byte does not continue a character
    whole[check] = ok
    return whole


def whole_chars(data: bytes) -> bool:
    """True when `data` is complete UTF-8 (every character whole)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def byte_piece_value(piece: str) -> int | None:
    """The byte of a ``<0xNN>`` byte-fallback piece, else None."""
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return int(piece[3:5], 16)
        except ValueError:
            return None
    return None


def merges_from_ranks(
    ranks: dict[bytes, int], tokens: Iterable[bytes] | None = None
) -> list[tuple[bytes, bytes]]:
    """Merges that make a rank file's BPE as a merges list: for each token (every one, or
    `tokens`), every split into two tokens of the vocabulary, ordered by the token's rank.
    tiktoken joins any adjacent pair whose bytes are a token, lowest rank first, so one merge
    per token (the pair its own bytes end in) would miss joins that other contexts reach;
    listing every split is what makes `tokenizers` give tiktoken's ids (it is how the
    tiktoken conversions in `transformers` build their merges)."""
    found = []
    for token in ranks if tokens is None else tokens:
        rank = ranks[token]
        for i in range(1, len(token)):
            left, right = ranks.get(token[:i]), ranks.get(token[i:])
            if left is not None and right is not None:
                found.append((rank, left, right, token[:i], token[i:]))
    found.sort(key=lambda m: m[:3])
    return [(m[3], m[4]) for m in found]
