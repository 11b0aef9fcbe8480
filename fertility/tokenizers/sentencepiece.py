"""SentencePiece adapter (.model protobuf files).

Offsets: the Python binding reports code-point offsets into the original text, through
``out_type="offset_mapping"`` in recent releases and ``"immutable_proto"`` in older ones
(checked with 0.1.99, 0.2.0 and 0.2.3). SentencePiece gives a character's leading
byte-fallback pieces an empty span and the last one the character; we widen the leading
ones to the character too. Under the identity normaliser (Mistral's shipped models use it)
encode_flat works the same spans out from the ids and the pieces' lengths, at a quarter of the
cost, and asks the library where that cannot be exact (`_flat_from_lengths`).

pre_tokenize: SentencePiece cuts its (normalised) input at whitespace and never merges
across the cut, each piece keeping the space in front of it. We return the ``whitespace``
pattern's pieces (``\\s?\\S+|\\s``) on the original text, or ``\\S+\\s?|\\s`` for models
trained with treat_whitespace_as_suffix, or the whole text for split_by_whitespace=false.

The model's settings are read from the protobuf with a small reader of our own, so the
optional `protobuf` package is not needed.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from functools import cached_property
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from fertility.errors import TokenizerError, one_line
from fertility.threads import library_threads
from fertility.tokenizers.base import (
    ByteTable,
    Converted,
    Encoded,
    Flat,
    Kind,
    Tokenizer,
    concat_encoded,
    sha256_hex,
    utf8_continues,
    whole_texts,
)
from fertility.tokenizers.hf_json import mismatches
from fertility.tokenizers.patterns import FAMILIES, split_many

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
        value: int | bytes
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
            if field != 1 or wire != 2 or not isinstance(value, bytes):
                return seen > 0 and field in (2, 3, 4, 5)
            piece = dict((f, v) for f, _, v in _fields(value)).get(1)
            if not isinstance(piece, bytes):
                return False
            piece.decode("utf-8")
            seen += 1
            if seen >= 32:
                return True
        return seen > 0
    except (ValueError, IndexError, UnicodeDecodeError):
        return False


def model_without_pieces(data: bytes) -> bool:
    """True when `data` parses whole as a ModelProto that holds a trainer_spec (field 2) and
    no piece (field 1): a SentencePiece model with no vocabulary, which looks_like_model_proto
    cannot tell from any other binary file."""
    try:
        fields = list(_fields(data))
        if not fields or any(f not in (2, 3, 4, 5) or w != 2 for f, w, _ in fields):
            return False
        spec = next((v for f, _, v in fields if f == 2), None)
        return isinstance(spec, bytes) and bool(list(_fields(spec)))
    except (ValueError, IndexError):
        return False


def model_settings(data: bytes) -> tuple[dict, dict]:
    """(trainer_spec, normalizer_spec) scalar fields by number, from the ModelProto."""
    trainer: dict[int, int | bytes] = {}
    normalizer: dict[int, int | bytes] = {}
    for field, wire, value in _fields(data):
        if wire == 2 and field in (2, 3) and isinstance(value, bytes):
            target = trainer if field == 2 else normalizer
            target.update((f, v) for f, _, v in _fields(value))
    return trainer, normalizer


# -- the adapter --------------------------------------------------------------------------


class SPTokenizer(ByteTable):
    kind: Kind = "sentencepiece"

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
            for r in self._sp.encode(
                texts, out_type="offset_mapping", num_threads=library_threads()
            ):
                ids = np.array(r["ids"], dtype=np.int64)
                off = np.fromiter(
                    chain.from_iterable(r["offsets"]), dtype=np.int64, count=2 * len(ids)
                )
                out.append(_widen_bytes(ids, off[0::2].copy(), off[1::2].copy(), is_byte))
            return out
        out = []  # older releases: an immutable proto, also in code points for str input
        old_type: Any = "immutable_proto"  # (the binding's type hints name only today's)
        for proto in self._sp.encode(texts, out_type=old_type):
            pieces = proto.pieces
            n = len(pieces)
            ids = np.fromiter((p.id for p in pieces), dtype=np.int64, count=n)
            starts = np.fromiter((p.begin for p in pieces), dtype=np.int64, count=n)
            ends = np.fromiter((p.end for p in pieces), dtype=np.int64, count=n)
            out.append(_widen_bytes(ids, starts, ends, is_byte))
        return out

    def encode_flat(self, texts: list[str]) -> Flat:
        """encode_batch laid end to end, read from the binding's per-text lists in one pass
        (not an array per text: 0.37 -> 0.24 s per 460k characters of real text)."""
        texts = list(texts)
        if not self._offset_mapping or not texts:
            return concat_encoded(self.encode_batch(texts))
        if (fast := self._flat_from_lengths(texts)) is not None:
            return fast
        res = self._sp.encode(texts, out_type="offset_mapping", num_threads=library_threads())
        per_text = np.fromiter((len(r["ids"]) for r in res), dtype=np.int64, count=len(res))
        n = int(per_text.sum())
        ids = np.fromiter(chain.from_iterable(r["ids"] for r in res), dtype=np.int64, count=n)
        off = np.fromiter(
            chain.from_iterable(chain.from_iterable(r["offsets"] for r in res)),
            dtype=np.int64,
            count=2 * n,
        )
        # a byte piece takes its span from a piece of its own text only
        text_end = np.repeat(np.cumsum(per_text), per_text)
        enc = _widen_bytes(ids, off[0::2].copy(), off[1::2].copy(), self._byte_pieces, text_end)
        return enc.ids, enc.starts, enc.ends, per_text

    def _flat_from_lengths(self, texts: list[str]) -> Flat | None:
        """encode_flat's result from the ids alone, or None where that cannot be exact. Under
        the identity normaliser SentencePiece's pieces spell out its dummy-prefix space and
        then the text itself, so a piece's span is the running sum of its length in code
        points (`_piece_chars`): the library's offset mapping builds a Python list per
        piece and costs 5-6 times its ids-only encode (1.21 s against 0.21 s on 60,000 real
        documents). A text is taken only when those lengths add up to its own (any
        whitespace the normaliser removed breaks that) and holds no unknown piece, else the
        whole batch goes through the library (tests/tokenizers/test_sentencepiece_flat.py
        compares both on real text in 13 languages)."""
        chars = self._piece_chars
        if chars is None:
            return None
        try:
            arrays = self._sp.encode(texts, out_type="numpy", num_threads=library_threads())
        except (ValueError, TypeError, RuntimeError):  # a release without the numpy out_type
            return None  # (refused before any encoding: cheap to find out per batch)
        per_text = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
        ids = np.concatenate([np.zeros(0, np.int64), *arrays]).astype(np.int64)
        lens = chars.take(ids)
        if lens.size and lens.min() < 0:  # an unknown piece: its span is the library's to say
            return None
        is_byte = self._byte_pieces.take(ids)
        if is_byte.any():  # a character's bytes but its last: no code point of their own
            continued = is_byte & utf8_continues(self._byte_values.take(ids))
            lens[:-1] = np.where(is_byte[:-1] & continued[1:], 0, lens[:-1])
        first = np.cumsum(per_text) - per_text  # each text's first token
        ends = np.cumsum(lens)
        before = np.append(0, ends)[first]  # the code points of the texts before
        ends -= np.repeat(before + self._prefix, per_text)
        starts = np.maximum(ends - lens, 0)
        own = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        spelled = np.append(0, np.cumsum(lens))[first + per_text] - before - self._prefix
        if not np.array_equal(np.where(per_text > 0, spelled, own), own):
            return None
        text_end = np.repeat(first + per_text, per_text)
        enc = _widen_bytes(ids, starts, np.maximum(ends, 0), self._byte_pieces, text_end)
        return enc.ids, enc.starts, enc.ends, per_text

    @cached_property
    def _piece_chars(self) -> np.ndarray | None:
        """Per id, the code points of the text its piece stands for (a byte piece 1, an
        unknown piece -1); None where spans are not lengths: a normaliser other than
        identity, or whitespace kept as a suffix (the dummy space then ends the text)."""
        if self._normalizer["name"] != "identity" or self._ws_suffix:
            return None
        sp = self._sp
        out = np.empty(self.vocab_size, np.int64)
        for i in range(self.vocab_size):
            if sp.IsUnknown(i):
                out[i] = -1
            elif sp.IsByte(i):
                out[i] = 1
            elif sp.IsControl(i) or sp.IsUnused(i):  # never produced by encode
                out[i] = 0
            else:
                out[i] = len(sp.IdToPiece(i))
        return out

    @cached_property
    def _byte_values(self) -> np.ndarray:
        """Per id, the byte a byte piece (`<0x41>`) stands for (its `_table` entry); 0 for
        other pieces."""
        values = np.zeros(self.vocab_size, np.int64)
        table = self._table
        for i in np.flatnonzero(self._byte_pieces).tolist():
            values[i] = table[i][0]
        return values

    @property
    def _prefix(self) -> int:
        """The dummy-prefix space the normaliser writes before a text (1 or 0)."""
        return 1 if self._normalizer["add_dummy_prefix"] else 0

    def decode(self, ids) -> str:
        ids = ids.tolist() if isinstance(ids, np.ndarray) else [int(i) for i in ids]
        return self._sp.decode(ids)

    def pre_tokenize(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if not self._split_ws:
            return whole_texts(texts)
        return split_many(_SUFFIX_SPLIT if self._ws_suffix else FAMILIES["whitespace"], texts)

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
    ids: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    is_byte: np.ndarray,
    text_end: np.ndarray | None = None,
) -> Encoded:
    """Give leading byte pieces of a character (empty span) the span of the piece that
    completes it, so every byte piece spans the character its bytes belong to. `text_end`:
    per token, one past the last token of its text (None: the tokens are one text)."""
    lead = is_byte[ids] & (starts == ends)
    if lead.any():
        n = len(ids)
        idx = np.where(ends > starts, np.arange(n), n)
        nxt = np.minimum.accumulate(idx[::-1])[::-1]
        fix = lead & (nxt < (n if text_end is None else text_end))
        starts[fix] = starts[nxt[fix]]
        ends[fix] = ends[nxt[fix]]
    return Encoded(ids, starts, ends)


# -- fertility export --to hf (fertility.tokenizers.convert) --------------------------------


def to_hf(tok: Tokenizer, src: Path, probes: list[str], error: type[Exception]) -> Converted:
    """The model converted to tokenizer.json when that encodes every one of the `probes`
    alike; else the .model file itself, copied as tokenizer.model (transformers converts it
    on load)."""
    obj = sentencepiece_to_hf(tok, src)
    bad = mismatches(tok, obj, probes) if obj is not None else -1
    if bad:
        why = (
            "its settings have no tokenizer.json equivalent"
            if bad < 0
            else f"the conversion encoded {bad} of {len(probes)} check texts differently"
        )
        return Converted(
            None,
            f"sentencepiece: tokenizer.model copied, no tokenizer.json written ({why}); "
            "tokenizer_config.json names LlamaTokenizer with no BOS added",
        )
    return Converted(
        obj, f"sentencepiece: converted to tokenizer.json, same ids on {len(probes)} check texts"
    )


def sentencepiece_to_hf(tok: Tokenizer, src: Path) -> dict[str, Any] | None:
    """A tokenizer.json mirroring a SentencePiece model (unigram or BPE), or None when its
    settings have no equivalent. The caller checks the result on real text before use."""

    # deferred: sentencepiece only for its files
    import sentencepiece as spm

    conf = tok.config()
    norm, pre = conf["normalizer"], conf["pre_tokenizer"]
    if (
        conf["model"] not in ("unigram", "bpe")
        or pre.get("treat_whitespace_as_suffix")
        or not norm.get("escape_whitespaces", True)
    ):
        return None

    # the model already loaded through the adapter, which read these same settings
    charsmap = model_settings(Path(src).read_bytes())[1].get(2, b"")
    sp = spm.SentencePieceProcessor(model_file=str(src))
    n = sp.get_piece_size()
    pieces = [sp.id_to_piece(i) for i in range(n)]
    normalizers: list[dict] = []
    if isinstance(charsmap, bytes) and charsmap:
        normalizers.append(
            {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()}
        )
    if norm.get("remove_extra_whitespaces", True):
        normalizers += [
            {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        ]
    normalizers.append({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})
    if norm.get("add_dummy_prefix", True):
        normalizers.append({"type": "Prepend", "prepend": "▁"})
    unk = tok.unk_id if tok.unk_id is not None else 0
    if conf["model"] == "unigram":
        model = {
            "type": "Unigram",
            "unk_id": unk,
            "byte_fallback": conf["byte_fallback"],
            "vocab": [[p, float(sp.get_score(i))] for i, p in enumerate(pieces)],
        }
    else:
        vocab = {p: i for i, p in enumerate(pieces)}
        merges = []
        for i, p in enumerate(pieces):
            for k in range(1, len(p)):
                a, b = vocab.get(p[:k]), vocab.get(p[k:])
                if a is not None and b is not None:
                    merges.append((i, a, b, p[:k], p[k:]))
        merges.sort()
        model = {
            "type": "BPE",
            "dropout": None,
            "unk_token": pieces[unk],
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": conf["byte_fallback"],
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [[m[3], m[4]] for m in merges],
        }
    specials = [i for i in range(n) if sp.is_control(i) or sp.is_unknown(i)]
    decoders = [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ]
    if norm.get("add_dummy_prefix", True):
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": pieces[i],
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i in specials
        ],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": (
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True}
            if pre.get("split_by_whitespace", True)
            else None
        ),
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": model,
    }
