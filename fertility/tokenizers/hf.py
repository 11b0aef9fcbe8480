"""Hugging Face `tokenizers` adapter (tokenizer.json) and the `hf:ORG/NAME` download.

Offsets come from the Python binding, which reports character (code point) offsets into the
original string. For byte-level BPE without a text-changing normaliser (GPT-2, Llama 3,
Qwen, ...) the hot path skips them: `encode_batch_fast` returns ids only and the spans are
rebuilt from each token's bytes over the whole batch with numpy (a token's bytes are
exactly a run of the text's UTF-8 there). A WordPiece tokenizer under BERT's normaliser and
pre-tokenizer does the same from its pieces' lengths (fertility.tokenizers.wordpiece). Texts
where that does not hold fall back to the binding's offsets, so both paths give the same
spans.
"""

from __future__ import annotations

import json
import logging
import re
import time
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property
from itertools import accumulate, chain
from operator import attrgetter
from pathlib import Path
from typing import Literal, TypeVar, cast, get_args

import numpy as np

from fertility.errors import TokenizerError, one_line
from fertility.hub import HUB_ANSWER_S, hub_offline, hub_unreachable, within
from fertility.tokenizers.base import (
    ByteTable,
    Checked,
    Converted,
    Encoded,
    Flat,
    Kind,
    PreTokens,
    byte_piece_value,
    canonical_json,
    check_max_id,
    concat_encoded,
    flat_from_id_lists,
    offsets_from_token_bytes,
    pre_tokens_from_words,
    sha256_hex,
    whole_texts,
)
from fertility.tokenizers.guard import reraise_panic, rust_call
from fertility.tokenizers.patterns import FAMILIES, check_split_pattern, identify
from fertility.tokenizers.wordpiece import continuing_prefix, wordpiece_spans_for

_NormalForm = Literal["NFC", "NFD", "NFKC", "NFKD"]
_NORMAL_FORMS = set(get_args(_NormalForm))


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: every byte gets a printable stand-in character."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


# Byte-level string -> latin-1 string with one character per byte, for str.translate.
_UNBYTE = {ord(ch): b for b, ch in bytes_to_unicode().items()}
# and back: a latin-1 character (one per byte) -> its byte-level stand-in
_BYTE_LEVEL = bytes_to_unicode()
_OUTSIDE = re.compile("[^" + re.escape("".join(_BYTE_LEVEL.values())) + "]")


def byte_level_text(data: bytes) -> str:
    """`data` in GPT-2's byte-level alphabet (bytes_to_unicode), one character per byte: a
    str.translate, not a join per byte (extend writes 131,000 tokens and their merges)."""
    return data.decode("latin-1").translate(_BYTE_LEVEL)


def byte_level_texts(pieces: Iterable[bytes]) -> list[str]:
    """byte_level_text of each piece: translated as one string and cut apart (a call per
    piece was most of writing a 200,000-token vocabulary's merges)."""
    pieces = list(pieces)
    whole = byte_level_text(b"".join(pieces))
    ends = list(accumulate(map(len, pieces)))
    return [whole[a:b] for a, b in zip([0, *ends], ends)]


def byte_level_bytes(text: str) -> bytes:
    """The bytes a string of GPT-2's byte-level alphabet stands for; ValueError naming the
    first character outside it (a plain space, say, which the alphabet writes as U+0120)."""
    bad = _OUTSIDE.search(text)
    if bad:
        raise ValueError(f"{bad.group()!r} is not in the byte-level alphabet")
    return text.translate(_UNBYTE).encode("latin-1")


def _walk(component) -> Iterator[dict]:
    """Every component dict inside a (nested) normalizer/pre_tokenizer/decoder JSON."""
    if isinstance(component, dict):
        yield component
        for key in ("normalizers", "pretokenizers", "decoders", "processors"):
            for child in component.get(key) or []:
                yield from _walk(child)


def _pattern(component: dict, kind: str) -> str | None:
    """The pattern of a Split/Replace component when it is of `kind` ("String" or "Regex")."""
    pattern = component.get("pattern")
    return pattern.get(kind) if isinstance(pattern, dict) else None


class HFTokenizer(ByteTable):
    kind: Kind = "hf"

    def __init__(self, path: Path, obj: dict, spec: str, label: str) -> None:
        """`obj`: the parsed tokenizer.json (fertility.tokenizers.kinds.sniff checked its 'model')."""
        # deferred: the Rust tokenizers library only when used
        from tokenizers import Tokenizer as _HF

        # Measured without truncation and padding; the fingerprint covers what is measured.
        obj["truncation"] = None
        obj["padding"] = None
        as_is = obj["model"].get("dropout") is None  # else re-serialised with it off
        if "dropout" in obj["model"]:
            obj["model"]["dropout"] = None  # BPE-dropout would make every measurement differ
        self._measured = dict(obj)  # what the fingerprint covers (the post-processor too)
        # Post-processors only add specials or trim offsets (ByteLevel/Roberta trim_offsets
        # drops the leading space from a token's span); we want neither.
        obj["post_processor"] = None
        for component in _walk(obj.get("pre_tokenizer")):
            regex = _pattern(component, "Regex")
            if component.get("type") == "Split" and isinstance(regex, str):
                check_split_pattern(path, regex, "Split pattern")
        try:
            with rust_call(path, "tokenizers"):
                if as_is:  # the file as it is: re-serialising a 32k vocabulary costs 0.2-0.4 s
                    tok = _HF.from_file(str(path))
                    tok.post_processor = None
                else:
                    tok = _HF.from_str(json.dumps(obj))
        except TokenizerError:
            raise
        except Exception as e:  # the binding raises plain Exception
            raise TokenizerError(f"{path}: not a usable tokenizer.json ({one_line(e)})") from None
        if tok.get_vocab_size(with_added_tokens=False) == 0:
            # every text would encode to nothing or to ids that are not there (measured
            # anyway, exit 0, or a TypeError)
            raise TokenizerError(
                f"{path}: has no vocabulary (its {obj['model'].get('type') or 'model'} "
                "vocab is empty): a tokenizer that cannot encode any text"
            )
        tok.no_truncation()
        tok.no_padding()
        if hasattr(tok, "encode_special_tokens"):
            tok.encode_special_tokens = True  # "<|endoftext|>" in a text is text
        self._tok = tok
        self._obj = obj
        self.path = path
        self.spec = spec
        self.label = label

        model = obj["model"]
        self._model_type = str(model.get("type") or ("BPE" if "merges" in model else "unknown"))
        self._byte_fallback = bool(model.get("byte_fallback", False))
        parts = [*_walk(obj.get("pre_tokenizer")), *_walk(obj.get("decoder"))]
        self._byte_level = any(p.get("type") == "ByteLevel" for p in parts)
        self._metaspace = any(
            p.get("type") == "Metaspace"
            or (p.get("type") == "Replace" and "▁" in (p.get("content"), _pattern(p, "String")))
            for p in [*parts, *_walk(obj.get("normalizer"))]
        )
        prefix_space = any(
            p.get("type") == "ByteLevel" and p.get("add_prefix_space")
            for p in _walk(obj.get("pre_tokenizer"))
        )
        norm = [str(p.get("type")) for p in _walk(obj.get("normalizer"))]
        norm = [t for t in norm if t != "Sequence"]
        # Byte lengths rebuild exact spans only when the normaliser leaves the text alone.
        self._fast = (
            self._byte_level
            and self._model_type == "BPE"
            and not prefix_space
            and set(norm) <= _NORMAL_FORMS
            and hasattr(tok, "encode_batch_fast")
        )
        # (only read when _fast: then every one is a normal form)
        self._forms = cast("list[_NormalForm]", sorted(set(norm)))
        # spans from the pieces' lengths on the measuring path, where they can be exact
        self._wordpiece = (
            wordpiece_spans_for(tok, obj) if hasattr(tok, "encode_batch_fast") else None
        )

        added = tok.get_added_tokens_decoder()
        # The largest id: the model's (its vocabulary in the file, piece -> id, or Unigram's
        # list, whose ids are its positions) or an added token's: the ids the library's
        # get_vocab(with_added_tokens=True) holds, without the dict it builds (15 ms for
        # 32,000 tokens; tests/realworld: the same on every real tokenizer.json).
        vocab = model.get("vocab")
        ids = vocab.values() if isinstance(vocab, dict) else range(len(vocab or ()))
        max_id = max(max(ids, default=-1), max(added, default=-1))
        check_max_id(path, max_id)
        self.vocab_size = max_id + 1
        unk = model.get("unk_token")
        self.unk_id = tok.token_to_id(unk) if isinstance(unk, str) else None
        if self.unk_id is None and isinstance(model.get("unk_id"), int):
            self.unk_id = int(model["unk_id"])
        self._added = {i: t.content for i, t in added.items()}
        # matched in the normalised text, so not found by looking in the text itself
        self._added_normalized = {i for i, t in added.items() if t.normalized}
        self.special_tokens = {t.content: i for i, t in added.items() if t.special}

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the tokenizer.json as measured (truncation, padding and dropout off), in
        json's canonical form. Computed when first asked for: serialising a large vocabulary
        takes 0.08 s per 32,000 tokens, which `fertility.measure` spends beside the first
        batches, in pieces (canonical_json) so that the pass's threads run between them."""
        return sha256_hex("hf", canonical_json(self._measured))

    # -- encoding ------------------------------------------------------------------------

    def encode_batch(self, texts: list[str]) -> list[Encoded]:
        texts = list(texts)
        if not texts:
            return []
        with rust_call(self.path, "tokenizers"):
            return self._encode_batch(texts)

    def _encode_batch(self, texts: list[str]) -> list[Encoded]:
        if not self._fast:
            return [
                _from_encoding(e) for e in self._tok.encode_batch(texts, add_special_tokens=False)
            ]
        encs = self._tok.encode_batch_fast(texts, add_special_tokens=False)
        ids = [np.array(e.ids, dtype=np.int64) for e in encs]
        out, bad = offsets_from_token_bytes(texts, ids, self._token_bytes)
        redo = set(bad)
        if self._forms:
            redo.update(
                i
                for i, t in enumerate(texts)
                if not all(unicodedata.is_normalized(f, t) for f in self._forms)
            )
        if redo:
            order = sorted(redo)
            again = self._tok.encode_batch([texts[i] for i in order], add_special_tokens=False)
            for i, e in zip(order, again):
                out[i] = _from_encoding(e)
        return out

    def encode_flat(self, texts: list[str]) -> Flat:
        """The whole batch as flat arrays: ids, starts, ends (local to each text) and tokens
        per text; the measuring path's form of encode_batch, without per-text arrays."""
        return self._encode_flat(list(texts), None)[0]

    def encode_flat_checked(self, texts: list[str], checked: np.ndarray) -> tuple[Flat, Checked]:
        """encode_flat, with what the detail checks need of the texts `checked` marks, on this
        (encoding) thread: their pre-tokens read off the same encode (pre_tokens_from_words)
        where this tokenizer's word ids give exactly pre_tokenize's spans (byte-level BPE on
        the fast path, whose spans come from the tokens' bytes, and WordPiece, whose tokens
        each lie inside one pre-token), and their decoded texts. Those texts are encoded with
        encode_batch, which keeps the word ids: 0.07 µs a character more than
        encode_batch_fast, against 0.3-0.55 µs for the pre-tokenizer called again per
        document. A WordPiece tokenizer under BERT's parts needs no word ids: its pre-tokens
        are the words its spans were worked out from (WordPieceSpans). decode_batch lets go
        of the interpreter, where decode holds it: beside the measuring thread it runs at the
        same time (one decode per document ran 5-8%)."""
        want = np.flatnonzero(checked)
        flat, pre, encs = self._encode_flat(list(texts), want)
        docs = want.tolist()
        if encs is None or not docs:
            return flat, Checked(pre, None)
        with rust_call(self.path, "tokenizers"):
            texts_out = self._tok.decode_batch(
                [encs[i].ids for i in docs], skip_special_tokens=False
            )
        return flat, Checked(pre, dict(zip(docs, texts_out)))

    def _encode_flat(self, texts: list[str], want: np.ndarray | None):
        """(flat, pre-tokens of texts `want` or None, the batch's encodings or None)."""
        if not texts:
            return concat_encoded([]), None, None
        checked = [] if want is None else want.tolist()
        if self._fast and all(unicodedata.is_normalized(f, t) for f in self._forms for t in texts):
            with rust_call(self.path, "tokenizers"):
                encs = self._encode_checked(texts, checked)
            counts = np.fromiter(map(len, encs), dtype=np.int64, count=len(encs))
            ids = map(attrgetter("ids"), encs)  # one list at a time, not all of them at once
            flat = flat_from_id_lists(texts, ids, counts, self._token_bytes)
            if flat is None:  # the library's offsets
                return concat_encoded(self.encode_batch(texts)), None, None
            return flat, self._pre_tokens(texts, flat, checked, encs), encs
        if self._wordpiece is not None:
            with rust_call(self.path, "tokenizers"):
                encs = self._tok.encode_batch_fast(texts, add_special_tokens=False)
                flat, pre = self._flat_from_pieces(texts, encs, checked)
            return flat, pre, encs
        # the library's own offsets, read into flat arrays in one pass
        with rust_call(self.path, "tokenizers"):
            encs = self._tok.encode_batch(texts, add_special_tokens=False)
        flat = _flat_from_encodings(encs)
        # WordPiece only: a byte-level BPE comes here for a text not in its normal form, with
        # the library's offsets, which its post-processor may trim (trim_offsets)
        wordpiece = self._model_type == "WordPiece"
        pre = self._pre_tokens(texts, flat, checked, encs) if wordpiece else None
        return flat, pre, encs

    def _flat_from_pieces(
        self, texts: list[str], encs: list, checked: list[int]
    ) -> tuple[Flat, PreTokens | None]:
        """The batch's flat arrays with WordPiece spans from the ids (WordPieceSpans), and
        the pre-tokens of texts `checked` (its words). The texts it cannot show exact get
        the library's offsets, encoded again, and no pre-tokens (the measuring thread asks
        pre_tokenize for them)."""
        assert self._wordpiece is not None
        ids, counts = _ids_of(encs)
        got = self._wordpiece.spans(texts, ids, counts)
        starts, ends = got.starts, got.ends
        redo = np.flatnonzero(got.bad).tolist()
        if redo:  # (encode_batch's tokens are encode_batch_fast's, with offsets)
            again = self._tok.encode_batch([texts[i] for i in redo], add_special_tokens=False)
            first = np.cumsum(counts) - counts
            for i, e in zip(redo, again):
                span = slice(first[i], first[i] + counts[i])
                _, starts[span], ends[span], _ = _flat_from_encodings([e])
        return (ids, starts, ends, counts), got.pre_tokens(checked) if checked else None

    def _encode_checked(self, texts: list[str], checked: list[int]) -> list:
        """The batch's encodings: encode_batch's (with word ids) for texts `checked`,
        encode_batch_fast's for the others."""
        if not checked:
            return self._tok.encode_batch_fast(texts, add_special_tokens=False)
        encs: list = [None] * len(texts)
        full = self._tok.encode_batch([texts[i] for i in checked], add_special_tokens=False)
        for i, e in zip(checked, full):
            encs[i] = e
        rest = np.ones(len(texts), dtype=bool)
        rest[checked] = False
        others = np.flatnonzero(rest).tolist()
        fast = self._tok.encode_batch_fast([texts[i] for i in others], add_special_tokens=False)
        for i, e in zip(others, fast):
            encs[i] = e
        return encs

    def _pre_tokens(self, texts: list[str], flat: Flat, docs: list[int], encs: list):
        """pre_tokens_from_words of texts `docs`, less those where the library may have taken
        an added token out of the text before pre-tokenizing it (pre_tokenize does not)."""
        docs = [i for i in docs if not self._may_hold_added(texts[i], encs[i].ids)]
        if not docs:
            return None
        return pre_tokens_from_words(flat, docs, [encs[i].word_ids for i in docs])

    def _may_hold_added(self, text: str, ids: list[int]) -> bool:
        """An added token's id among `ids` that the text may have held as such: one matched
        in the normalised text, or one whose content is in the text. Otherwise the model
        made it (WordPiece's unknown token for a word it cannot split)."""
        got = self._added.keys() & set(ids)
        return bool(got) and (
            bool(got & self._added_normalized) or any(self._added[i] in text for i in got)
        )

    def decode(self, ids) -> str:
        ids = ids.tolist() if isinstance(ids, np.ndarray) else [int(i) for i in ids]
        try:
            return self._tok.decode(ids, skip_special_tokens=False)
        except BaseException as e:
            reraise_panic(e, self.path, "tokenizers")
            raise

    def pre_tokenize(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The library's pre-tokenizer after its normaliser, one call per text (it has no
        batch call), non-empty pieces only."""
        if self._tok.pre_tokenizer is None:
            return whole_texts(texts)
        pairs: list[tuple[int, int]] = []
        counts = []
        for text in texts:
            got = self._pre_tokenize_one(text)
            counts.append(len(got))
            pairs += got
        return np.array(pairs, dtype=np.int64).reshape(-1, 2), np.array(counts, dtype=np.int64)

    def _pre_tokenize_one(self, text: str) -> list[tuple[int, int]]:
        # deferred: the Rust tokenizers library only when used
        from tokenizers import PreTokenizedString

        pts = PreTokenizedString(text)
        try:
            if self._tok.normalizer is not None:
                pts.normalize(self._tok.normalizer.normalize)
            self._tok.pre_tokenizer.pre_tokenize(pts)
        except BaseException as e:
            reraise_panic(e, self.path, "tokenizers")
            raise
        spans = pts.get_splits(offset_referential="original", offset_type="char")
        return [(s, e) for _, (s, e), _ in spans if e > s]

    def normalize(self, text: str) -> str:
        norm = self._tok.normalizer
        if norm is None:
            return text
        try:
            return norm.normalize_str(text)
        except BaseException as e:
            reraise_panic(e, self.path, "tokenizers")
            raise

    # -- vocabulary ----------------------------------------------------------------------

    @cached_property
    def _pieces(self) -> list[str | None]:
        """Each id's piece as the vocabulary writes it (None for an id nothing uses)."""
        pieces: list[str | None] = [None] * self.vocab_size
        for piece, i in self._tok.get_vocab(with_added_tokens=False).items():
            pieces[i] = piece  # one call, not one id_to_token per id
        for i, content in self._added.items():
            pieces[i] = content
        return pieces

    @cached_property
    def _byte_pieces(self) -> np.ndarray:
        fallback = self._byte_fallback
        return np.fromiter(
            (fallback and p is not None and byte_piece_value(p) is not None for p in self._pieces),
            dtype=bool,
            count=self.vocab_size,
        )

    @cached_property
    def _table(self) -> list[bytes]:
        """The bytes each id stands for in decoded text (b"" for unused ids)."""
        model = self._obj["model"]
        strip_prefix = continuing_prefix(model)
        strip_suffix = model.get("end_of_word_suffix") or None
        if self._byte_level and not self._byte_pieces.any():
            fast = self._byte_level_table()
            if fast is not None:
                return fast
        table = []
        for i, (piece, is_byte) in enumerate(zip(self._pieces, self._byte_pieces.tolist())):
            if piece is None:
                table.append(b"")
                continue
            value = byte_piece_value(piece) if is_byte else None
            if value is not None:  # (every byte piece has one)
                table.append(bytes([value]))
                continue
            if i in self._added:
                table.append(piece.encode("utf-8"))
                continue
            if self._byte_level:
                mapped = piece.translate(_UNBYTE)
                try:
                    table.append(mapped.encode("latin-1"))
                    continue
                except UnicodeEncodeError:
                    pass  # not a byte-level string: fall through to plain text
            if strip_prefix and piece.startswith(strip_prefix) and len(piece) > len(strip_prefix):
                piece = piece[len(strip_prefix) :]
            if strip_suffix and piece.endswith(strip_suffix) and len(piece) > len(strip_suffix):
                piece = piece[: -len(strip_suffix)]
            if self._metaspace:
                piece = piece.replace("▁", " ")
            table.append(piece.encode("utf-8"))
        return table

    def _byte_level_table(self) -> list[bytes] | None:
        """The byte table of a byte-level vocabulary in one translate over all pieces (one
        stand-in character per byte); None when some piece is not byte-level text."""
        pieces = ["" if p is None or i in self._added else p for i, p in enumerate(self._pieces)]
        try:
            data = "".join(pieces).translate(_UNBYTE).encode("latin-1")
        except UnicodeEncodeError:
            return None
        ends = np.cumsum([len(p) for p in pieces]).tolist()
        table = [data[a:b] for a, b in zip([0, *ends[:-1]], ends)]
        for i, content in self._added.items():
            table[i] = content.encode("utf-8")
        return table

    def config(self) -> dict:
        pre = self._obj.get("pre_tokenizer")
        regexes = [
            rx for p in _walk(pre) if p.get("type") == "Split" and (rx := _pattern(p, "Regex"))
        ]
        if any(p.get("type") == "ByteLevel" and p.get("use_regex", True) for p in _walk(pre)):
            regexes.append(FAMILIES["gpt2"])
        return {
            "kind": self.kind,
            "model": self._model_type.lower(),
            "byte_level": self._byte_level,
            "byte_fallback": self._byte_fallback,
            "normalizer": self._obj.get("normalizer"),
            "pre_tokenizer": pre,
            "pattern": identify(regexes[0]) if regexes else None,
            "pattern_regex": regexes[0] if regexes else None,
            "unk_token": self._obj["model"].get("unk_token"),
        }


def to_hf(tok: HFTokenizer, src: Path, probes: list[str], error: type[Exception]) -> Converted:
    """For `fertility export --to hf` (fertility.tokenizers.convert): the run's own
    tokenizer.json, as it is."""
    return Converted(
        json.loads(Path(src).read_text(encoding="utf-8")), "hf: the run's tokenizer.json"
    )


def _flat_from_encodings(encs) -> Flat:
    """The library's ids and offsets of every encoding, end to end: flat arrays read in one
    pass (fromiter over the flattened tuples, 2x np.array on a list of them), not an array
    per text (a BERT-style tokenizer's 32,000 short texts: 0.4 s of its encode_flat)."""
    ids, counts = _ids_of(encs)
    spans = chain.from_iterable(chain.from_iterable(map(attrgetter("offsets"), encs)))
    off = np.fromiter(spans, dtype=np.int64, count=2 * len(ids))
    return ids, off[0::2].copy(), off[1::2].copy(), counts


def _ids_of(encs) -> tuple[np.ndarray, np.ndarray]:
    """Every encoding's ids end to end, and how many each has."""
    counts = np.fromiter(map(len, encs), dtype=np.int64, count=len(encs))
    ids = map(attrgetter("ids"), encs)
    return np.fromiter(chain.from_iterable(ids), np.int64, count=int(counts.sum())), counts


def _from_encoding(e) -> Encoded:
    """One encoding's ids and offsets (_flat_from_encodings of it alone)."""
    return Encoded(*_flat_from_encodings([e])[:3])


# -- hf:ORG/NAME -----------------------------------------------------------------------

_REPO_RE = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+|[A-Za-z0-9][\w.-]*")

# `hf:` loading is bounded in wall time, name resolution and the hub client's own retries
# included. The hub must first answer one HTTP request within HUB_ANSWER_S (any status
# counts; the host name resolved in that time too): otherwise only the local cache is read.
# Without this, a resolver that did not answer cost 21 s (getaddrinfo has no timeout) and a
# hub that accepted the connection and never answered was still retrying at 300 s
# (huggingface_hub waits 10 s for each answer, then retries five times with 60 s each).
# A hub that answered then has until HUB_TOTAL_S from the start to deliver the file, its
# client's retries and back-off included: 60 s carries a 33 MB tokenizer.json (Gemma 3's, the
# largest we know of) at about 0.6 MB/s. Past it a cached copy is used, else one line says
# what to do (`hf download` once; the cache is read from then on). The download thread is
# left behind; the command ends without waiting for it.
HUB_TOTAL_S = 60.0


def download(spec: str) -> Path:
    """Local path of the repo's tokenizer.json (else tokenizer.model), fetched or cached,
    within HUB_TOTAL_S seconds (HUB_ANSWER_S when the hub does not answer)."""
    repo, _, revision = spec[len("hf:") :].partition("@")
    if not _REPO_RE.fullmatch(repo):
        raise TokenizerError(f"{spec}: not a Hugging Face repository name (hf:ORG/NAME[@REVISION])")
    try:
        # deferred: huggingface_hub only for hf: specs
        import huggingface_hub
        from huggingface_hub import constants as hub_constants
        from huggingface_hub import errors as hub_errors
    except ImportError:
        raise TokenizerError(
            f"{spec}: needs the huggingface_hub package (pip install huggingface_hub)"
        ) from None

    t0 = time.monotonic()
    offline = hub_offline()
    # Without a hub that answers, the library retries each request with back-off (47 s and 23
    # log lines before its error, or minutes when the connection opens and nothing comes):
    # ask the hub once, quickly, and otherwise read only the cache.
    endpoint = hub_constants.ENDPOINT
    unreachable = None if offline else hub_unreachable(endpoint, HUB_ANSWER_S)
    if offline or unreachable:
        # the cache on disk alone: hf_hub_download(local_files_only=True) still builds its
        # request headers, which (huggingface_hub 2.x) fetch a registry from the hub first
        path = _cached(huggingface_hub, repo, revision)
        if path is not None:
            return path
        where = "offline (HF_HUB_OFFLINE=1)" if offline else unreachable
        raise TokenizerError(
            f"{spec}: {where} and no tokenizer.json or tokenizer.model for it in the local cache"
        )

    quiet = logging.getLogger("huggingface_hub")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its retry warnings; what failed is our one line
    finished = False
    try:
        finished, found = within(
            t0 + HUB_TOTAL_S - time.monotonic(),
            lambda: _fetch(huggingface_hub, hub_errors, repo, revision, endpoint),
        )
    finally:
        if finished:  # else the thread goes on, and its warnings would follow our line
            quiet.setLevel(level)
    # still downloading (or waiting): a cached copy, else one line (found is never None once
    # finished)
    if not finished or found is None:
        _no_progress_bars(huggingface_hub)  # the thread goes on: nothing of it after our line
        path = _cached(huggingface_hub, repo, revision)
        if path is not None:
            return path
        raise TokenizerError(
            f"{spec}: the Hugging Face hub did not deliver tokenizer.json or tokenizer.model "
            f"within {HUB_TOTAL_S:g} s and the local cache holds neither; download it once "
            f"(`hf download {repo} tokenizer.json`): it is read from the cache from then on"
        )
    path, first = found
    if path is not None:
        return path
    raise TokenizerError(
        f"{spec}: {_hub_reason(first, 'cannot reach the Hugging Face hub', hub_errors)}"
    )


def _fetch(
    hub, hub_errors, repo: str, revision: str, endpoint: str
) -> tuple[Path | None, Exception | None]:
    """(path, None) of tokenizer.json, else tokenizer.model, from the hub at `endpoint` (the
    one that answered, also for retries after we stopped waiting), or its cache when the hub
    fails; (None, the first error)."""
    first: Exception | None = None
    for filename in ("tokenizer.json", "tokenizer.model"):
        try:
            path = hub.hf_hub_download(repo, filename, revision=revision or None, endpoint=endpoint)
            return Path(path), None
        except Exception as e:  # hub, HTTP and OS errors all end as one line
            first = first or e
            if not isinstance(e, getattr(hub_errors, "EntryNotFoundError", ())):
                break  # (the cache's "not here" is an EntryNotFoundError too)
    return None, first


def _cached(hub, repo: str, revision: str) -> Path | None:
    """tokenizer.json, else tokenizer.model, from the local cache only (no network)."""
    for filename in ("tokenizer.json", "tokenizer.model"):
        try:
            found = hub.try_to_load_from_cache(repo, filename, revision=revision or None)
        except (OSError, ValueError):
            found = None
        if isinstance(found, str):
            return Path(found)
    return None


_T = TypeVar("_T")


def _no_progress_bars(hub) -> None:
    try:
        hub.utils.disable_progress_bars()
    except Exception:  # an older huggingface_hub without it: a bar may still be drawn
        pass


def _hub_reason(e: Exception | None, where: str, E) -> str:
    def isa(name: str) -> bool:
        cls = getattr(E, name, None)
        return cls is not None and isinstance(e, cls)

    if isa("LocalEntryNotFoundError") or isa("OfflineModeIsEnabled"):
        return f"{where} and no tokenizer.json or tokenizer.model for it in the local cache"
    if isa("GatedRepoError"):
        return "gated repository: accept its terms on the hub and log in (hf auth login)"
    if isa("RepositoryNotFoundError"):
        return "no such repository on the Hugging Face hub (or it is private: log in)"
    if isa("RevisionNotFoundError"):
        return "no such revision in the repository"
    if isa("EntryNotFoundError"):
        return "the repository holds no tokenizer.json or tokenizer.model"
    return f"download failed ({one_line(e) if e else 'unknown error'})"
