"""SentencePiece adapter (.model protobuf files).

Offsets: the Python binding reports code-point offsets into the original text, through
``out_type="offset_mapping"`` in recent releases and ``"immutable_proto"`` in older ones
(checked with 0.1.99, 0.2.0 and 0.2.3). SentencePiece gives a character's leading
byte-fallback pieces an empty span and the last one the character; we widen the leading
ones to the character too.

pre_tokenize: SentencePiece cuts its (normalised) input at whitespace and never merges
across the cut, each piece keeping the space in front of it. We return the ``whitespace``
pattern's pieces (``\\s?\\S+|\\s``) on the original text, or ``\\S+\\s?|\\s`` for models
trained with treat_whitespace_as_suffix, or the whole text for split_by_whitespace=false.

The model's settings are read from the protobuf with a small reader of our own, so the
optional `protobuf` package is not needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from itertools import chain
from pathlib import Path

import numpy as np

from fertility.errors import TokenizerError, one_line
from fertility.tokenizers.base import ByteTable, Encoded, sha256_hex
from fertility.tokenizers.patterns import FAMILIES, split_spans

_SUFFIX_SPLIT = r"\S+\s?|\s"
_MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


# -- a minimal protobuf reader ------------------------------------------------------------


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one message; ValueError/IndexError if malformed."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            size, i = _varint(buf, i)
            if i + size > n:
                raise ValueError("truncated")
            value, i = buf[i : i + size], i + size
        elif wire == 5:
            value, i = buf[i : i + 4], i + 4
        elif wire == 1:
            value, i = buf[i : i + 8], i + 8
        else:
            raise ValueError(f"wire type {wire}")
        if i > n:
            raise ValueError("truncated")
        yield field, wire, value


def looks_like_model_proto(data: bytes) -> bool:
    """True when the first fields parse as a ModelProto's pieces (field 1: SentencePiece)."""
    try:
        seen = 0
        for field, wire, value in _fields(data):
            if field != 1 or wire != 2:
                return seen > 0 and field in (2, 3, 4, 5)
            sub = dict((f, v) for f, _, v in _fields(value))
            if not isinstance(sub.get(1), bytes):
                return False
            sub[1].decode("utf-8")
            seen += 1
            if seen >= 32:
                return True
        return seen > 0
    except (ValueError, IndexError, UnicodeDecodeError):
        return False


def model_settings(data: bytes) -> tuple[dict, dict]:
    """(trainer_spec, normalizer_spec) scalar fields by number, from the ModelProto."""
    trainer: dict[int, int | bytes] = {}
    normalizer: dict[int, int | bytes] = {}
    for field, wire, value in _fields(data):
        if wire == 2 and field in (2, 3):
            target = trainer if field == 2 else normalizer
            target.update((f, v) for f, _, v in _fields(value))
    return trainer, normalizer


# -- the adapter --------------------------------------------------------------------------


class SPTokenizer(ByteTable):
    kind = "sentencepiece"

    def __init__(self, path: Path, data: bytes, spec: str, label: str) -> None:
        # deferred: sentencepiece only for its files
        import sentencepiece as spm

        try:
            trainer, normalizer = model_settings(data)
            sp = spm.SentencePieceProcessor()
            sp.LoadFromSerializedProto(data)
        except Exception as e:  # malformed proto or a model sentencepiece refuses
            raise TokenizerError(
                f"{path}: not a usable SentencePiece model ({one_line(e)})"
            ) from None
        if sp.get_piece_size() == 0:
            raise TokenizerError(f"{path}: SentencePiece model has no pieces")
        self._sp = sp
        self.path, self.spec, self.label = path, spec, label
        self.fingerprint = sha256_hex("sentencepiece", data)
        self.vocab_size = int(sp.get_piece_size())
        unk = int(sp.unk_id())
        self.unk_id = unk if 0 <= unk < self.vocab_size and sp.IsUnknown(unk) else None

        self._model_type = _MODEL_TYPES.get(int(trainer.get(3, 1)), "unknown")
        self._byte_fallback = bool(trainer.get(35, 0))
        self._split_ws = bool(trainer.get(22, 1))
        self._ws_suffix = bool(trainer.get(24, 0))
        name = normalizer.get(1)
        self._normalizer = {
            "type": "SentencePiece",
            "name": name.decode("utf-8", "replace") if isinstance(name, bytes) else None,
            "add_dummy_prefix": bool(normalizer.get(3, 1)),
            "remove_extra_whitespaces": bool(normalizer.get(4, 1)),
            "escape_whitespaces": bool(normalizer.get(5, 1)),
        }
        self._pre_tokenizer = {
            "type": "SentencePiece",
            "split_by_whitespace": self._split_ws,
            "treat_whitespace_as_suffix": self._ws_suffix,
            "split_by_unicode_script": bool(trainer.get(21, 1)),
            "split_by_number": bool(trainer.get(23, 1)),
            "split_digits": bool(trainer.get(25, 0)),
        }
        try:
            sp.encode("a", out_type="offset_mapping")
            self._offset_mapping = True
        except Exception:  # older releases reject the out_type (ValueError or RuntimeError)
            self._offset_mapping = False

    # -- encoding ------------------------------------------------------------------------

    def encode_batch(self, texts: list[str]) -> list[Encoded]:
        texts = list(texts)
        if not texts:
            return []
        is_byte = self._byte_pieces
        if self._offset_mapping:
            out = []
            for r in self._sp.encode(texts, out_type="offset_mapping"):
                ids = np.array(r["ids"], dtype=np.int64)
                off = np.fromiter(
                    chain.from_iterable(r["offsets"]), dtype=np.int64, count=2 * len(ids)
                )
                out.append(_widen_bytes(ids, off[0::2].copy(), off[1::2].copy(), is_byte))
            return out
        out = []  # older releases: an immutable proto, also in code points for str input
        for proto in self._sp.encode(texts, out_type="immutable_proto"):
            pieces = proto.pieces
            n = len(pieces)
            ids = np.fromiter((p.id for p in pieces), dtype=np.int64, count=n)
            starts = np.fromiter((p.begin for p in pieces), dtype=np.int64, count=n)
            ends = np.fromiter((p.end for p in pieces), dtype=np.int64, count=n)
            out.append(_widen_bytes(ids, starts, ends, is_byte))
        return out

    def decode(self, ids) -> str:
        ids = ids.tolist() if isinstance(ids, np.ndarray) else [int(i) for i in ids]
        return self._sp.decode(ids)

    def pre_tokenize(self, text: str) -> list[tuple[int, int]]:
        if not self._split_ws:
            return [(0, len(text))] if text else []
        return split_spans(_SUFFIX_SPLIT if self._ws_suffix else FAMILIES["whitespace"], text)

    def normalize(self, text: str) -> str:
        """SentencePiece's normaliser without its whitespace escaping ('▁' back to ' ') and
        without the dummy-prefix space it adds in front."""
        if hasattr(self._sp, "normalize"):
            out = self._sp.normalize(text)
        else:
            out = self._sp.decode(self._sp.encode(text))
        if self._normalizer["escape_whitespaces"]:
            out = out.replace("▁", " ")
            if (
                self._normalizer["add_dummy_prefix"]
                and out.startswith(" ")
                and not text.startswith(" ")
            ):
                out = out[1:]
        return out

    # -- vocabulary ----------------------------------------------------------------------

    @cached_property
    def _byte_pieces(self) -> np.ndarray:
        sp = self._sp
        return np.fromiter(
            (sp.IsByte(i) for i in range(self.vocab_size)), dtype=bool, count=self.vocab_size
        )

    @cached_property
    def _table(self) -> list[bytes]:
        sp, table = self._sp, []
        for i, is_byte in enumerate(self._byte_pieces.tolist()):
            piece = sp.IdToPiece(i)
            if is_byte:
                table.append(bytes([int(piece[3:5], 16)]))
            elif sp.IsControl(i) or sp.IsUnknown(i) or sp.IsUnused(i):
                table.append(b"")
            else:
                table.append(piece.replace("▁", " ").encode("utf-8"))
        return table

    @cached_property
    def special_tokens(self) -> dict[str, int]:
        sp = self._sp
        return {sp.IdToPiece(i): i for i in range(self.vocab_size) if sp.IsControl(i)}

    def config(self) -> dict:
        return {
            "kind": self.kind,
            "model": self._model_type,
            "byte_level": False,
            "byte_fallback": self._byte_fallback,
            "normalizer": dict(self._normalizer),
            "pre_tokenizer": dict(self._pre_tokenizer),
            "pattern": "whitespace" if self._split_ws and not self._ws_suffix else None,
            "pattern_regex": (
                (_SUFFIX_SPLIT if self._ws_suffix else FAMILIES["whitespace"])
                if self._split_ws
                else None
            ),
            "unk_token": self._sp.IdToPiece(self.unk_id) if self.unk_id is not None else None,
        }


def _widen_bytes(
    ids: np.ndarray, starts: np.ndarray, ends: np.ndarray, is_byte: np.ndarray
) -> Encoded:
    """Give leading byte pieces of a character (empty span) the span of the piece that
    completes it, so every byte piece spans the character its bytes belong to."""
    lead = is_byte[ids] & (starts == ends)
    if lead.any():
        n = len(ids)
        idx = np.where(ends > starts, np.arange(n), n)
        nxt = np.minimum.accumulate(idx[::-1])[::-1]
        fix = lead & (nxt < n)
        starts[fix] = starts[nxt[fix]]
        ends[fix] = ends[nxt[fix]]
    return Encoded(ids, starts, ends)
