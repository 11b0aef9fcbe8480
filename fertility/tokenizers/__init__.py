"""One Tokenizer protocol over Hugging Face tokenizers, SentencePiece, tiktoken and Tekken.

Specs (``load_tokenizer(spec)``, the CLI's ``-t``):

- a Hugging Face ``tokenizer.json``, or a folder holding one (a folder without one but with a
  ``tokenizer.model`` loads that instead);
- a Mistral Tekken file (``tekken_*.json``: ``config.pattern`` and a ``vocab`` of rank
  entries), kind "tekken", ids as mistral-common gives them (fertility._tok_tekken);
- a SentencePiece ``.model`` (protobuf);
- a tiktoken BPE rank file (lines of ``base64 rank``; ``.tiktoken`` or Llama 3/4's
  ``tokenizer.model``). The kind of a file is read from its content, not its extension;
- ``tiktoken:NAME`` (``tiktoken.get_encoding``, tiktoken's own download cache);
- ``hf:ORG/NAME`` or ``hf:ORG/NAME@REVISION`` (the Hugging Face hub or its local cache; with
  ``HF_HUB_OFFLINE=1`` only the cache is read).

Command-line syntax, one ``-t`` per tokenizer::

    -t [LABEL=]SPEC[#PATTERN]

LABEL is ``[A-Za-z0-9_.-]+`` before the first ``=`` (default: a name taken from SPEC).
PATTERN names the pre-tokenizer split for tiktoken rank files, which carry none: a name from
`fertility.patterns.known_names()` (the families gpt2, cl100k, o200k, whitespace, mark_aware
and the encodings r50k_base, p50k_base, p50k_edit, cl100k_base, llama3, o200k_base,
o200k_harmony, llama4) or ``re:REGEX``. Examples::

    -t llama3=Meta-Llama-3-8B/original/tokenizer.model#llama3
    -t llama4=Llama-4-Scout-17B-16E/original/tokenizer.model#llama4
    -t ranks.tiktoken#re:\\S+
    -t gpt4=tiktoken:cl100k_base#mark_aware     (a tiktoken encoding with another split)

A rank file without ``#PATTERN`` takes the split from an encoding name in its own file name
(``cl100k_base.tiktoken``); with neither, loading fails rather than guess. An explicit
``#PATTERN`` wins over the file name. ``#PATTERN`` on a Hugging Face or SentencePiece spec
(and on a Tekken file) is an error: their split is part of the model. A ``#`` followed by a
known name or ``re:`` separates a pattern; ``SPEC#NAME`` with any other NAME, where SPEC is a
file, folder, ``tiktoken:`` or ``hf:`` spec and the whole is no path, is an unknown pattern
(the error lists the known names); otherwise the ``#`` is part of the path.

``load_tokenizer(spec, label, pattern)`` takes the same pieces as arguments; a ``pattern``
argument wins over a ``#PATTERN`` suffix.

Measuring never adds special tokens, truncates, pads or applies BPE-dropout, and special
tokens written in the text are encoded as ordinary text (tiktoken's ``encode_ordinary``).

Spans (`Encoded.starts/ends`) are code points into the original text. Where a normaliser
rewrites text (Hugging Face NFKC, SentencePiece's nmt_nfkc) they follow the library's own
alignment: a character composed from several (e + U+0301 -> é) maps to the first of them,
and Metaspace's inserted "▁" shares the span of the character after it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import cached_property
from itertools import chain
from pathlib import Path
from typing import NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np

from fertility import patterns
from fertility.errors import TokenizerError, one_line  # noqa: F401 (one_line: adapters)


class Encoded(NamedTuple):
    ids: np.ndarray  # int64 token ids
    starts: np.ndarray  # int64 code-point offset of each token's first character
    ends: np.ndarray  # int64 code-point offset one past its last character
    # A token that covers part of a character's bytes spans that whole character, so
    # several tokens may share a span. A token that covers no text has starts == ends.


@runtime_checkable
class Tokenizer(Protocol):
    label: str
    spec: str
    kind: str  # "hf" | "sentencepiece" | "tiktoken" | "tekken"
    vocab_size: int
    fingerprint: str  # sha256 of vocabulary + settings
    unk_id: int | None
    special_tokens: dict[str, int]

    def encode_batch(self, texts: list[str]) -> list[Encoded]: ...  # no specials/trunc/pad
    def decode(self, ids) -> str: ...
    def pre_tokenize(self, text: str) -> list[tuple[int, int]]: ...  # code-point spans
    def token_bytes(self, id: int) -> bytes: ...  # what the token adds to decoded text
    def partial_mask(self) -> np.ndarray: ...  # bool per id: byte pieces, split characters
    def normalize(self, text: str) -> str: ...  # the tokenizer's normaliser (identity if none)

    # {"kind", "model", "byte_level", "byte_fallback", "normalizer", "pre_tokenizer",
    #  "pattern" (a fertility.patterns family name or None), "pattern_regex", "unk_token"}
    def config(self) -> dict: ...


# ---------------------------------------------------------------------------------------
# Parsing "-t [LABEL=]SPEC[#PATTERN]"

_LABEL_RE = re.compile(r"[A-Za-z0-9_.-]+")


def parse_tokenizer_arg(arg: str) -> tuple[str | None, str]:
    """Split ``[LABEL=]SPEC`` into (label or None, spec); the spec keeps any ``#PATTERN``.

    Only a LABEL made of ``[A-Za-z0-9_.-]`` counts, so ``./a=b/tokenizer.json`` or
    ``hf:org/x=y`` are specs. When the whole argument is an existing path and the part after
    ``=`` is not, the argument is a path with ``=`` in its name.
    """
    arg = arg.strip()
    if not arg:
        raise TokenizerError("empty tokenizer argument")
    head, sep, rest = arg.partition("=")
    if not sep or not _LABEL_RE.fullmatch(head):
        if sep and not head:
            raise TokenizerError(f"{arg}: empty label before '='")
        return None, arg
    if not rest:
        raise TokenizerError(f"{arg}: no tokenizer after '{head}='")
    spec_path = split_pattern_suffix(rest)[0]
    if os.path.exists(arg) and not os.path.exists(spec_path) and ":" not in spec_path:
        return None, arg
    return head, rest


def split_pattern_suffix(spec: str) -> tuple[str, str | None]:
    """(spec, pattern or None) for ``SPEC#PATTERN``; see the module docstring."""
    raw = spec.find("#" + patterns.RAW_PREFIX)
    if raw > 0:
        return spec[:raw], spec[raw + 1 :]
    base, sep, tail = spec.rpartition("#")
    if sep and base and tail.lower() in patterns.known_names():
        return base, tail
    return spec, None


def _unknown_suffix(spec: str) -> tuple[str, str | None]:
    """(SPEC, NAME) for ``SPEC#NAME`` when SPEC is a tokenizer and the whole is not a path, so
    an unknown NAME is reported as such (with the known names), not as a missing file."""
    base, sep, tail = spec.rpartition("#")
    if not (sep and base and tail) or os.path.exists(spec):
        return spec, None
    if base.startswith(("tiktoken:", "hf:")) or os.path.exists(base):
        return base, tail
    return spec, None


def default_label(spec: str) -> str:
    if spec.startswith("tiktoken:"):
        return spec.split(":", 1)[1]
    if spec.startswith("hf:"):
        return spec[3:].split("@", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    path = Path(spec)
    if path.name in ("tokenizer.json", "tokenizer.model") and path.parent.name:
        name = path.parent.name
        # Llama 3 ships its rank file in <model>/original/tokenizer.model
        if name == "original" and path.parent.parent.name:
            name = path.parent.parent.name
        return name
    return path.stem if path.suffix else path.name


# ---------------------------------------------------------------------------------------
# Loading


def load_tokenizer_arg(arg: str, label: str | None = None) -> Tokenizer:
    """Load a command-line "[LABEL=]SPEC[#PATTERN]"; `label`, when given, replaces LABEL."""
    given, spec = parse_tokenizer_arg(arg)
    return load_tokenizer(spec, label=label or given)


def load_tokenizer(spec: str, label: str | None = None, pattern: str | None = None) -> Tokenizer:
    """Load a tokenizer from a spec (see the module docstring). Errors: TokenizerError."""
    full_spec = spec
    spec, suffix = split_pattern_suffix(spec)
    if suffix is None:
        spec, suffix = _unknown_suffix(spec)
    pattern = pattern or suffix  # the keyword argument wins over a #PATTERN suffix
    if not spec:
        raise TokenizerError("empty tokenizer spec")
    label = label or default_label(spec)
    if pattern is not None:
        try:  # fail early on an unknown name or bad regex, naming the tokenizer
            patterns.resolve_pattern(pattern)
        except TokenizerError as e:
            raise TokenizerError(f"{spec}: {e}") from None

    if spec.startswith("tiktoken:"):
        from fertility import _tok_tiktoken

        return _tok_tiktoken.from_name(spec, full_spec, label, pattern)
    if spec.startswith("hf:"):
        from fertility import _tok_hf

        path = _tok_hf.download(spec)
        return _load_path(path, full_spec, label, pattern, shown=spec)
    return _load_path(Path(spec), full_spec, label, pattern, shown=spec)


def _load_path(
    path: Path, full_spec: str, label: str, pattern: str | None, shown: str
) -> Tokenizer:
    if not path.exists():
        raise TokenizerError(f"{shown}: no such file or folder")
    if path.is_dir():
        for name in ("tokenizer.json", "tokenizer.model"):
            if (path / name).is_file():
                path = path / name
                break
        else:
            raise TokenizerError(f"{shown}: folder holds no tokenizer.json (nor tokenizer.model)")
    if not path.is_file():  # /dev/zero would be read until memory ran out, a FIFO forever
        raise TokenizerError(f"{shown}: not a regular file")
    from fertility._files import unfinished_by_another

    if unfinished_by_another(path.parent):
        raise TokenizerError(
            f"{path.parent}: an unfinished `fertility fix` run (still writing, or killed) left "
            "this folder; its files may not belong together: run `fertility fix` again")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TokenizerError(f"{path}: cannot read ({e.strerror or e})") from None

    kind, obj = sniff(data, path)
    if kind != "tiktoken" and pattern is not None:
        raise TokenizerError(
            f"{path}: a split pattern (#{pattern}) applies only to tiktoken rank files and "
            f"tiktoken: encodings; this is a {kind} tokenizer with its own pre-tokenizer"
        )
    if kind == "hf":
        from fertility import _tok_hf

        return _tok_hf.HFTokenizer(path, obj, full_spec, label)
    if kind == "tekken":
        from fertility import _tok_tekken

        return _tok_tekken.from_json(path, obj, full_spec, label)
    if kind == "sentencepiece":
        from fertility import _tok_sp

        return _tok_sp.SPTokenizer(path, data, full_spec, label)
    from fertility import _tok_tiktoken

    return _tok_tiktoken.from_rank_file(path, data, full_spec, label, pattern)


# Real vocabularies hold at most a few hundred thousand tokens; tables are built per id, so
# an id of two billion (a typo, or a hostile file) would take gigabytes before any text is read.
MAX_TOKEN_ID = (1 << 24) - 1


def check_max_id(path, max_id: int) -> None:
    if max_id > MAX_TOKEN_ID:
        raise TokenizerError(f"{path}: token id {max_id:,} is beyond any real vocabulary "
                             f"(at most {MAX_TOKEN_ID:,})")


# "=" alone is the empty token (Whisper's multilingual.tiktoken ends with one)
_RANK_LINE = re.compile(rb"(?:[A-Za-z0-9+/]+={0,2}|=) [0-9]+\r?")


def sniff(data: bytes, path: Path) -> tuple[str, dict | None]:
    """(kind, parsed JSON or None) from the file's content, never its extension: "hf" or
    "tekken" (Mistral's tekken_*.json) for a JSON object, "tiktoken" or "sentencepiece"."""
    if not data.strip():
        raise TokenizerError(f"{path}: empty file")
    head = data[:4096].lstrip()
    if head[:1] == b"{":
        try:
            obj = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise TokenizerError(f"{path}: not valid JSON ({one_line(e)})") from None
        except RecursionError:
            raise TokenizerError(f"{path}: JSON nested too deeply to be a tokenizer") from None
        if isinstance(obj, dict) and isinstance(obj.get("model"), dict):
            return "hf", obj
        from fertility import _tok_tekken

        if _tok_tekken.looks_like_tekken(obj):
            return "tekken", obj
        raise TokenizerError(
            f"{path}: neither a Hugging Face tokenizer.json (no 'model' object) nor a Mistral "
            f"Tekken file (no 'config.pattern' and 'vocab' list)"
        )
    first_line = head.split(b"\n", 1)[0]
    if _RANK_LINE.fullmatch(first_line):
        return "tiktoken", None
    from fertility import _tok_sp

    if _tok_sp.looks_like_model_proto(data):
        return "sentencepiece", None
    raise TokenizerError(
        f"{path}: not a tokenizer.json, Tekken JSON, SentencePiece model or tiktoken rank file"
    )


# ---------------------------------------------------------------------------------------
# Shared helpers for the adapters


def sha256_hex(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8") if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()


def offsets_from_token_lengths(
    texts: Sequence[str], ids: Sequence[np.ndarray], token_len: np.ndarray
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
    starts, ends, bad = flat_offsets(texts, all_ids, n_tok, token_len)
    # Plain slicing: np.split costs several times more per piece.
    bounds = np.cumsum(n_tok).tolist()
    return [
        Encoded(all_ids[a:b], starts[a:b], ends[a:b]) for a, b in zip([0, *bounds[:-1]], bounds)
    ], bad


def flat_from_id_lists(
    texts: Sequence[str], lists: Sequence[Sequence[int]], token_len: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The measuring path's flat form of a batch (ids, starts, ends local to each text, tokens
    per text) from a library's id lists, with spans from token byte lengths (`flat_offsets`);
    None when some text's tokens do not add up to its bytes (map those another way)."""
    counts = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    ids = np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(counts.sum()))
    starts, ends, bad = flat_offsets(texts, ids, counts, token_len)
    return None if bad else (ids, starts, ends, counts)


def concat_encoded(
    encs: Sequence[Encoded],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-text encodings laid end to end: ids, starts, ends and tokens per text."""
    counts = np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(encs))
    if not encs:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, counts
    ids, starts, ends = (np.concatenate(col).astype(np.int64, copy=False) for col in zip(*encs))
    return ids, starts, ends, counts


def flat_offsets(texts: Sequence[str], all_ids: np.ndarray, n_tok: np.ndarray,
                 token_len: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Start and end code-point offsets (local to each text) of a whole batch's tokens.

    `token_len[id]` is the byte length of a token. The whole batch is mapped with a handful
    of numpy operations (this sits on the measuring hot path): byte offsets come from
    cumulative token lengths; a byte offset maps to the character holding that byte, so a
    token with part of a character's bytes spans the whole character. Also returns the
    indices of texts whose tokens do not add up to the text's byte length.
    """
    n_docs = len(texts)
    raw = [t.encode("utf-8", "surrogatepass") for t in texts]
    n_bytes = np.fromiter(map(len, raw), dtype=np.int64, count=n_docs)
    n_chars = np.fromiter(map(len, texts), dtype=np.int64, count=n_docs)
    data = np.frombuffer(b"".join(raw), dtype=np.uint8)
    # Character index of every byte of the batch: count the bytes that start a character
    # (all but 0b10xxxxxx continuation bytes); one sentinel past the end.
    index_type = np.int32 if len(data) < 2**31 - 1 else np.int64  # half the memory traffic
    char_of_byte = np.empty(len(data) + 1, dtype=index_type)
    np.cumsum((data & 0xC0) != 0x80, dtype=index_type, out=char_of_byte[1:])
    char_of_byte[:-1] = char_of_byte[1:] - 1
    char_of_byte[-1] = int(n_chars.sum())

    tl = token_len[all_ids]
    cum = np.cumsum(tl)
    tok_end = np.cumsum(n_tok)
    cum0 = np.concatenate(([0], cum))
    doc_tok_bytes = cum0[tok_end] - cum0[tok_end - n_tok]
    bad = np.flatnonzero(doc_tok_bytes != n_bytes).tolist()
    if not bad:  # the usual case: token bytes tile the whole batch
        b1 = cum
        b0 = cum - tl
    else:
        tok_doc = np.repeat(np.arange(n_docs), n_tok)
        byte_start = np.cumsum(n_bytes) - n_bytes
        base = cum0[tok_end - n_tok][tok_doc]
        limit = n_bytes[tok_doc]
        b1 = np.minimum(cum - base, limit) + byte_start[tok_doc]
        b0 = np.minimum(cum - tl - base, limit) + byte_start[tok_doc]
    char_start = np.repeat(np.cumsum(n_chars) - n_chars, n_tok)
    starts = char_of_byte[b0].astype(np.int64) - char_start
    ends = np.where(b1 > b0, char_of_byte[np.maximum(b1 - 1, 0)] + 1 - char_start, starts)
    return starts, ends, bad


class ByteTable:
    """Mixin for adapters that keep `_table`: the bytes each id stands for in decoded text.

    It defines which tokens are partial (see `partial_mask`) once for every adapter: a token
    whose bytes are not complete UTF-8, or a byte-fallback piece (`_byte_pieces`), whichever
    byte it holds (``<0x41>`` is a fallback even though "A" is a whole character).
    """

    @cached_property
    def _token_lengths(self) -> np.ndarray:
        return np.fromiter((len(b) for b in self._table), dtype=np.int64, count=self.vocab_size)

    def token_bytes(self, id: int) -> bytes:
        if not 0 <= int(id) < self.vocab_size:
            raise TokenizerError(f"{self.spec}: token id {id} outside the vocabulary")
        return self._table[int(id)]

    @cached_property
    def _byte_pieces(self) -> np.ndarray:
        """bool per id: byte-fallback pieces; adapters with them override this."""
        return np.zeros(self.vocab_size, dtype=bool)

    @cached_property
    def _partial(self) -> np.ndarray:
        split = np.fromiter((not whole_chars(b) for b in self._table), dtype=bool,
                            count=self.vocab_size)
        return split | self._byte_pieces

    def partial_mask(self) -> np.ndarray:
        return self._partial.copy()


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
