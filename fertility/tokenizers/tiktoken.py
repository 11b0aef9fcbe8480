"""tiktoken adapter: BPE rank files (``base64 rank`` lines) and ``tiktoken:NAME``.

tiktoken is optional and imported only here. A rank file holds no split pattern, so the
pattern comes from ``#PATTERN`` in the spec or an encoding name in the file's name, and
loading fails when neither says (see fertility.tokenizers). Offsets are rebuilt from the
tokens' bytes over the whole batch (tiktoken reports none); tokens are exact runs of the
text's UTF-8 since tiktoken has no normaliser.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
import socket
import tempfile
from collections.abc import Sequence
from functools import cached_property
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from fertility.errors import TokenizerError, one_line
from fertility.threads import by_chunks
from fertility.tokenizers.base import (
    MAX_TOKEN_ID,
    ByteTable,
    Converted,
    Encoded,
    Flat,
    Kind,
    Tokenizer,
    check_max_id,
    concat_encoded,
    flat_from_id_lists,
    merges_from_ranks,
    offsets_from_token_bytes,
    sha256_hex,
)
from fertility.tokenizers.guard import reraise_panic, rust_call
from fertility.tokenizers.hf_json import byte_level_bpe, mismatches
from fertility.tokenizers.patterns import (
    ALIASES,
    identify,
    known_names,
    pattern_from_filename,
    resolve_pattern,
    split_many,
    split_spans,
)

_INSTALL = "tiktoken is not installed: pip install 'fertility[tiktoken]'"
_DOWNLOAD_TIMEOUT_S = 30.0


# "=" alone is the empty token (Whisper's multilingual.tiktoken ends with one)
_RANK_LINE = re.compile(rb"(?:[A-Za-z0-9+/]+={0,2}|=) [0-9]+\r?")


def looks_like_rank_file(data: bytes) -> bool:
    """True when the first line is a ``base64 rank`` line (fertility.tokenizers.kinds)."""
    return bool(_RANK_LINE.fullmatch(data[:4096].lstrip().split(b"\n", 1)[0]))


def require_tiktoken(shown: str):
    try:
        # deferred: tiktoken is the optional tiktoken extra
        import tiktoken
    except ImportError:
        raise TokenizerError(f"{shown}: {_INSTALL}") from None
    return tiktoken


# A whole rank file of plain lines, as every published one is, is read in bulk: each line
# `[A-Za-z0-9+/]+={0,2} [0-9]{1,9}\n` (the regex tests/tokenizers checks `_plain_ranks`
# against), found with numpy over the whole file (a regex's match took o200k 0.043 s).

# base64's alphabet -> each character's 6-bit value (255: not in it)
_B64_VALUE = np.full(256, 255, np.uint8)
_B64_VALUE[
    np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8)
] = np.arange(64, dtype=np.uint8)
# the bytes a plain file holds: base64's alphabet, "=", a space and a newline
_PLAIN_BYTE = np.zeros(256, bool)
_PLAIN_BYTE[_B64_VALUE < 64] = True
_PLAIN_BYTE[[0x3D, 0x20, 0x0A]] = True


class _Lines:
    """The plain lines of a rank file's `body` (ending in a newline), found with numpy:
    each line's first byte (`start`), its space and its newline, how many "=" end its base64
    (`pads`) and its rank (`ranks`). `ok` is False when some line is not
    `[A-Za-z0-9+/]+={0,2} [0-9]{1,9}`."""

    def __init__(self, body: bytes) -> None:
        self.ok = False
        self.b = b = np.frombuffer(body, np.uint8)
        seen = np.bincount(b, minlength=256)  # one pass: which bytes, and how many of each
        if seen[~_PLAIN_BYTE].any() or seen[0x20] != seen[0x0A] or not seen[0x20]:
            return
        self.space = space = np.flatnonzero(b == 0x20)
        self.newline = newline = np.flatnonzero(b == 0x0A)
        self.start = start = np.concatenate(([0], newline[:-1] + 1))
        digits = newline - space - 1
        # one space a line (the counts are equal and both sorted, so space i lies in line
        # i), after a base64 part and before 1-9 characters
        if not ((start < space) & (digits >= 1) & (digits <= 9)).all():
            return
        pad1 = b[space - 1] == 0x3D
        pad2 = pad1 & (space - 2 >= start) & (b[np.maximum(space - 2, 0)] == 0x3D)
        self.pads = pads = pad1.astype(np.int64) + pad2
        # every "=" is one of those ending a base64 part (none in a rank, none a third), and
        # a base64 character comes before them
        if seen[0x3D] != pads.sum() or ((space - start - pads) < 1).any():
            return
        # the rank, digit by digit (the only place a line's bytes after its space are read)
        self.ranks = np.zeros(len(space), np.int64)
        for j in range(int(digits.max())):
            more = digits > j
            digit = b[np.where(more, space + 1 + j, space + 1)].astype(np.int64) - 0x30
            if ((digit < 0) | (digit > 9)).any():
                return
            self.ranks = np.where(more, self.ranks * 10 + digit, self.ranks)
        self.ok = True

    def canonical(self) -> bool:
        """The file is already the text the fingerprint hashes: canonical base64 (the padding
        its length needs, zero bits after the last byte) and ranks written without leading
        zeros (whether the ranks rise line by line, the other condition, the fingerprint
        checks itself). Checked with numpy over the whole file: re-encoding each token took
        o200k 0.09 s."""
        b, space = self.b, self.space
        if ((space - self.start) % 4).any():  # a length base64 never has
            return False
        pad1, pad2 = self.pads >= 1, self.pads == 2
        last = _B64_VALUE[b[space - 1 - self.pads]]  # the last character carrying data
        spare = np.where(pad2, last & 0x0F, np.where(pad1, last & 0x03, 0))
        leading_zero = (b[space + 1] == 0x30) & (self.newline - space > 2)  # "07", not "0"
        return not (spare.any() or leading_zero.any())


def _plain_ranks(data: bytes) -> tuple[dict[bytes, int], bytes | None] | None:
    """`parse_ranks`'s answer for a file of plain lines, without a Python step per line
    (o200k: 0.25 -> 0.11 s); None when any line needs them (padding alone, CR, blank lines,
    a duplicate, bad padding), so `parse_ranks` reads it line by line and names the line
    that is wrong."""
    body = data if data.endswith(b"\n") else data + b"\n"
    lines = _Lines(body)
    if not lines.ok or int(lines.ranks.max()) > MAX_TOKEN_ID:
        return None
    canonical = lines.canonical()
    # The split's words live until the dict is made: the tokens and ranks then fill fresh
    # memory, and the words' memory goes back to the system whole (freed while the tokens
    # were made, it left them scattered over memory the process kept: 17 MiB more after
    # loading o200k, 5 MiB more at a one-line report's peak).
    words = body.split()
    try:
        tokens = list(map(binascii.a2b_base64, words[0::2]))
    except binascii.Error:
        return None
    ranks = dict(zip(tokens, lines.ranks.tolist()))
    del words
    if len(ranks) != len(tokens):
        return None
    return ranks, body if canonical else None


def parse_ranks(path: Path, data: bytes) -> tuple[dict[bytes, int], bytes | None]:
    """The ``base64 rank`` lines of a rank file, checked so tiktoken cannot panic on them, and
    the file's text when it is what the fingerprint hashes (_Lines.canonical), else None.

    A token written as padding alone (``= 50256``) is the empty token, as tiktoken's own
    loader reads it: Whisper's multilingual.tiktoken holds one. BPE never produces it.
    Refused although tiktoken's loader reads them: characters outside base64 (it drops them,
    so the token's bytes are wrong), a token listed twice (the last wins) and a missing single
    byte (tiktoken panics on text holding it).
    """
    ranks, text = _plain_ranks(data) or ({}, None)
    for lineno, line in enumerate([] if ranks else data.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError("expected 'base64 rank'")
            token = b"" if not parts[0].strip(b"=") else base64.b64decode(parts[0], validate=True)
            rank = int(parts[1])
        except (ValueError, binascii.Error) as e:
            raise TokenizerError(
                f"{path}: line {lineno}: not a 'base64 rank' line ({one_line(e)})"
            ) from None
        if rank < 0:
            raise TokenizerError(f"{path}: line {lineno}: negative rank")
        check_max_id(f"{path}: line {lineno}", rank)
        if token in ranks:
            raise TokenizerError(f"{path}: line {lineno}: token listed twice")
        ranks[token] = rank
    if len(set(ranks.values())) != len(ranks):
        raise TokenizerError(f"{path}: two tokens share a rank")
    missing = 256 - sum(1 for b in range(256) if bytes([b]) in ranks)
    if missing:
        raise TokenizerError(f"{path}: rank file lacks {missing} of the 256 single-byte tokens")
    return ranks, text


def from_rank_file(
    path: Path, data: bytes, spec: str, label: str, pattern: str | None
) -> TiktokenTokenizer:
    tiktoken = require_tiktoken(str(path))
    try:
        data.decode("ascii")
    except UnicodeDecodeError:
        raise TokenizerError(f"{path}: not a tiktoken rank file (non-ASCII bytes)") from None
    ranks, text = parse_ranks(path, data)
    if pattern is None:
        pattern = pattern_from_filename(path)
    if pattern is None:
        raise TokenizerError(
            f"{path}: a tiktoken rank file carries no split pattern and its file name names no "
            f"encoding; name one as -t {path}#PATTERN with PATTERN one of "
            f"{', '.join(known_names())} or re:REGEX"
        )
    name, regex = resolve_pattern(pattern)
    try:
        with rust_call(path, "tiktoken"):
            enc = tiktoken.Encoding(label, pat_str=regex, mergeable_ranks=ranks, special_tokens={})
    except TokenizerError:
        raise
    except Exception as e:  # the Rust core rejects some regexes fancy-regex cannot compile
        raise TokenizerError(
            f"{path}: tiktoken cannot use this rank file with pattern {name} ({one_line(e)})"
        ) from None
    tok = TiktokenTokenizer(enc, ranks, {}, spec, label, name, regex)
    tok.path = path
    tok._rank_text = text
    return tok


@contextlib.contextmanager
def _socket_timeout(seconds: float):
    """tiktoken downloads with requests and no timeout; bound a stalled connection."""
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(old)


def from_name(spec: str, full_spec: str, label: str, pattern: str | None) -> TiktokenTokenizer:
    tiktoken = require_tiktoken(spec)
    enc_name = spec.split(":", 1)[1]
    known = tiktoken.list_encoding_names()
    if enc_name not in known:
        raise TokenizerError(
            f"{spec}: unknown tiktoken encoding (known: {', '.join(sorted(known))})"
        )
    try:
        with _socket_timeout(_DOWNLOAD_TIMEOUT_S):
            enc = tiktoken.get_encoding(enc_name)
    except Exception as e:  # requests/OS/hash errors: neither cached nor reachable
        cache = (
            os.environ.get("TIKTOKEN_CACHE_DIR")
            or os.environ.get("DATA_GYM_CACHE_DIR")
            or os.path.join(tempfile.gettempdir(), "data-gym-cache")
        )
        raise TokenizerError(
            f"{spec}: not in tiktoken's cache ({cache}) and the download failed "
            f"({one_line(e, 120)})"
        ) from None
    ranks = getattr(enc, "_mergeable_ranks", None)
    specials = dict(getattr(enc, "_special_tokens", {}) or {})
    if ranks is None:
        raise TokenizerError(f"{spec}: this tiktoken version hides the encoding's ranks")
    if pattern is None:
        name = ALIASES.get(enc_name) or identify(enc._pat_str) or f"re:{enc._pat_str}"
        regex = enc._pat_str
    else:
        name, regex = resolve_pattern(pattern)
        try:
            with rust_call(spec, "tiktoken"):
                enc = tiktoken.Encoding(
                    enc.name, pat_str=regex, mergeable_ranks=ranks, special_tokens=specials
                )
        except TokenizerError:
            raise
        except Exception as e:
            raise TokenizerError(
                f"{spec}: tiktoken cannot use pattern {name} ({one_line(e)})"
            ) from None
    return TiktokenTokenizer(enc, ranks, specials, full_spec, label, name, regex)


class TiktokenTokenizer(ByteTable):
    kind: Kind = "tiktoken"
    unk_id: int | None = None  # byte-level BPE has no unknown token
    path: Path | None = None  # the rank file; None for tiktoken:NAME
    # the rank file's bytes when they are what the fingerprint hashes (_Lines.canonical), until
    # it is taken
    _rank_text: bytes | None = None

    def __init__(
        self,
        enc,
        ranks: dict[bytes, int],
        specials: dict[str, int],
        spec: str,
        label: str,
        pattern_name: str | None,
        pattern: str,
    ) -> None:
        self._enc = enc
        self._ranks = ranks
        self.special_tokens = dict(specials)
        self.spec, self.label = spec, label
        self._pattern_name, self._pattern = pattern_name, pattern
        self.vocab_size = int(enc.n_vocab)

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the ranks as a rank file writes them (by rank, ``base64 rank`` lines),
        the split pattern and the specials."""
        ranks = self._ranks
        items = ranks.items()
        # A rank file lists its tokens by rank, so they need no sort; with binascii called
        # directly, o200k's lines cost 0.06 s instead of 0.15 s, on the thread beside the
        # first batches (a one-line report's whole pass).
        by_rank = bool((np.diff(np.fromiter(ranks.values(), np.int64, len(ranks))) > 0).all())
        if not by_rank:
            items = sorted(items, key=lambda kv: kv[1])  # type: ignore[assignment]
        b64 = binascii.b2a_base64

        def chunks():  # 8,192 lines at a time: o200k's lines joined at once held 17 MB
            it = iter(items)
            while part := list(islice(it, 8192)):
                yield b"".join([b64(tok, newline=False) + b" %d\n" % rank for tok, rank in part])

        # a file already in that form (_Lines.canonical: o200k, cl100k, r50k, Llama 3's and 4's
        # are) is hashed as it was read: the same digest, without a Python step per token
        # (that held the interpreter beside a short report's pass); its bytes are let go after
        text, self._rank_text = self._rank_text if by_rank else None, None
        return sha256_hex(
            "tiktoken",
            chunks() if text is None else [text],
            self._pattern,
            json.dumps(self.special_tokens, sort_keys=True),
        )

    # -- encoding ------------------------------------------------------------------------

    def encode_batch(self, texts: list[str]) -> list[Encoded]:
        texts = list(texts)
        if not texts:
            return []
        lists = self._id_lists(texts)
        ids = [np.array(x, dtype=np.int64) for x in lists]
        # Every token is a run of the text's UTF-8, so lengths give exact spans, unless the
        # split pattern leaves characters unmatched (tiktoken drops them): those texts are
        # mapped again piece by piece.
        out, bad = offsets_from_token_bytes(texts, ids, self._token_bytes)
        for i in bad:
            redone = self._by_pieces(texts[i])
            if np.array_equal(redone.ids, out[i].ids):
                out[i] = redone
        return out

    def encode_flat(self, texts: list[str]) -> Flat:
        """encode_batch laid end to end (ids, starts, ends, tokens per text), built flat:
        the measuring path's form, without per-text arrays."""
        texts = list(texts)
        if texts:
            lists = self._id_lists(texts)
            counts = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
            flat = flat_from_id_lists(texts, lists, counts, self._token_bytes)
            if flat is not None:
                return flat
        return concat_encoded(self.encode_batch(texts))

    def _id_lists(self, texts: list[str]) -> list[list[int]]:
        """encode_ordinary_batch's result, each core encoding a chunk of the texts in a loop
        (fertility.threads.by_chunks: the library's batch call gives each text a thread of
        its own, five times the encoding's cost on short texts)."""
        encode = self._enc.encode_ordinary
        with rust_call(self.path or self.spec, "tiktoken"):
            return by_chunks(lambda part: [encode(t) for t in part], texts)

    def _by_pieces(self, text: str) -> Encoded:
        parts = [Encoded(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))]
        spans = split_spans(self._pattern, text)
        with rust_call(self.path or self.spec, "tiktoken"):
            pieces = [self._enc.encode_ordinary(text[a:b]) for a, b in spans]
        for (a, b), got in zip(spans, pieces):
            enc = np.array(got, dtype=np.int64)
            (e,), _ = offsets_from_token_bytes([text[a:b]], [enc], self._token_bytes)
            parts.append(Encoded(e.ids, e.starts + a, e.ends + a))
        return Encoded(*(np.concatenate(cols) for cols in zip(*parts)))

    def decode(self, ids) -> str:
        ids = ids.tolist() if isinstance(ids, np.ndarray) else [int(i) for i in ids]
        try:
            return self._enc.decode(ids, errors="replace")
        except BaseException as e:
            reraise_panic(e, self.path or self.spec, "tiktoken")
            raise

    def pre_tokenize(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return split_many(self._pattern, texts)

    def normalize(self, text: str) -> str:
        return text  # tiktoken has no normaliser

    # -- vocabulary ----------------------------------------------------------------------

    @cached_property
    def _table(self) -> list[bytes]:
        table = [b""] * self.vocab_size
        for tok, rank in self._ranks.items():
            table[rank] = tok
        for text, i in self.special_tokens.items():
            table[i] = text.encode("utf-8")
        return table

    def config(self) -> dict:
        return {
            "kind": self.kind,
            "model": "bpe",
            "byte_level": True,
            "byte_fallback": False,
            "normalizer": None,
            "pre_tokenizer": {"type": "Split", "pattern": self._pattern},
            "pattern": self._pattern_name,
            "pattern_regex": self._pattern,
            "unk_token": None,
        }


# -- fertility export --to hf (fertility.tokenizers.convert) --------------------------------


def tiktoken_to_hf(tok: Tokenizer) -> dict[str, Any]:
    """A byte-level BPE tokenizer.json equivalent to a tiktoken tokenizer.

    tiktoken merges the adjacent pair whose concatenation has the lowest rank; the same
    greedy order is HF BPE with the merges of `merges_from_ranks`: every split of each token
    into two tokens, ranked like the token (the same list `fertility extend` writes).
    """
    special_ids = set(tok.special_tokens.values())
    ranks: dict[bytes, int] = {}
    for i in range(tok.vocab_size):
        if i not in special_ids:
            b = tok.token_bytes(i)
            if b:
                ranks[b] = i
    tokens = {r: b for b, r in ranks.items()}
    merges = merges_from_ranks(ranks)  # every split, as tiktoken can reach it
    return byte_level_bpe(tokens, merges, tok.config()["pattern_regex"], tok.special_tokens)


def to_hf(tok: Tokenizer, src: Path, probes: list[str], error: type[Exception]) -> Converted:
    """The rank file converted to a byte-level BPE tokenizer.json, refused (`error`) when it
    does not load or encodes one of the `probes` differently."""
    obj = tiktoken_to_hf(tok)
    bad = mismatches(tok, obj, probes)
    if bad < 0:
        raise error(
            f"{src}: the tokenizer.json converted from the tiktoken vocabulary "
            "does not load in `tokenizers` (its split regex?)"
        )
    if bad:
        raise error(
            f"{src}: converting the tiktoken vocabulary to tokenizer.json "
            f"changed how {bad} of {len(probes)} check texts are encoded"
        )
    return Converted(
        obj,
        f"tiktoken: converted to a byte-level BPE tokenizer.json, same ids on "
        f"{len(probes)} check texts",
    )
