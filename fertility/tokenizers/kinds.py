"""The tokenizer kinds: each format declared once, with everything that differs between them.

A `Format` says how a file of its kind is recognised (from its content, never its extension),
loaded, loaded again in a worker process, converted for `fertility export --to hf`, extended
by `fertility extend`, and what it can do (`Capabilities`). Code outside this package never
compares a kind string (tests/test_layout.py checks): it asks this registry.

Adding a tokenizer format: write its adapter module (a class that satisfies
`fertility.tokenizers.base.Tokenizer`, with its `kind`; its detection and its HF conversion),
declare it here in FORMATS (and its name in `base.Kind`), and test it in tests/tokenizers/.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from fertility.errors import TokenizerError, one_line
from fertility.tokenizers import hf, sentencepiece, tekken, tiktoken
from fertility.tokenizers.base import Converted, Kind, Tokenizer
from fertility.tokenizers.pretokenizer import PRETOKENIZER, PretokenizerFamily


class ReloadKey(NamedTuple):
    """What a worker process needs to load the very same tokenizer again."""

    kind: str
    label: str
    spec: str
    pattern: str | None  # a rank file's split regex (it may have come as a keyword, not #PATTERN)
    fingerprint: str


# load_tokenizer(spec, label=..., pattern=...), handed to a reload by fertility.tokenizers
Loader = Callable[..., Tokenizer]
Measured = Tokenizer | PretokenizerFamily  # what the measuring workers reload


@dataclass(frozen=True)
class Capabilities:
    # encode_flat builds the flat batch without per-text arrays (else it concatenates
    # encode_batch's)
    flat_encode: bool
    # where token spans come from: the library's own offsets, the tokens' bytes laid over
    # the text's UTF-8 (fertility.tokenizers.base.flat_offsets), or the pre-tokens themselves
    offsets: Literal["library", "byte_lengths", "pre_tokens"]
    # the library spreads one batch over its own threads: one process encodes (the trainer
    # starts no worker processes for it)
    batch_threads: bool
    # takes a split pattern (#PATTERN): the file carries none
    split_pattern: bool
    # real token ids with a vocabulary (not a pre-tokenizer family measured as the ceiling)
    vocabulary: bool
    # encode_flat_checked: the detail documents' pre-tokens from the batch's own encode
    checked_pre_tokens: bool = False


# A kind this registry does not know (a test's stand-in): nothing assumed.
NO_CAPABILITIES = Capabilities(False, "library", False, False, True)


@dataclass(frozen=True)
class Extension:
    """How `fertility extend` extends a tokenizer of this kind."""

    # new merges over the base's rank table (fertility.extend.bpe), over its tokenizer.json
    # (byte-level BPE ones only), or new pieces in its SentencePiece ModelProto
    # (fertility.extend.sentencepiece)
    method: Literal["ranks", "tokenizer_json", "sp_model"]
    # the base's own file format, written beside the extension's tokenizer.json
    also_writes: Literal["tekken.json", "tokenizer.tiktoken"] | None = None


@dataclass(frozen=True)
class HFExport:
    """How `fertility export --to hf` writes a tokenizer of this kind
    (fertility.tokenizers.convert)."""

    # (tokenizer, its file, check texts, error class) -> tokenizer.json, or the file to copy
    convert: Callable[[Any, Path, list[str], type[Exception]], Converted]
    # its unknown piece is a special token for transformers although `special_tokens` does
    # not list it (SentencePiece's <unk>)
    unk_special: bool = False


@dataclass(frozen=True)
class Format:
    kind: Kind
    # (the file's bytes, its parsed JSON object or None when it is not JSON) -> is it this kind
    detect: Callable[[bytes, dict | None], bool] | None
    # (path, bytes, parsed JSON, spec, label, split pattern) -> the tokenizer
    load: Callable[[Path, bytes, Any, str, str, str | None], Tokenizer] | None
    # loads the same tokenizer again in a worker process (measuring, the trainer's encoders);
    # None: never in workers
    reload: Callable[[ReloadKey, Loader], Measured] | None
    to_hf: HFExport | None  # None: not exportable
    extend: Extension | None  # None: `fertility extend` refuses it
    caps: Capabilities


# -- loaders: each typed to return the protocol, so mypy checks every adapter against it ----


def _load_hf(
    path: Path, data: bytes, obj: Any, spec: str, label: str, pattern: str | None
) -> Tokenizer:
    return hf.HFTokenizer(path, obj, spec, label)


def _load_tekken(
    path: Path, data: bytes, obj: Any, spec: str, label: str, pattern: str | None
) -> Tokenizer:
    return tekken.from_json(path, obj, spec, label)


def _load_rank_file(
    path: Path, data: bytes, obj: Any, spec: str, label: str, pattern: str | None
) -> Tokenizer:
    return tiktoken.from_rank_file(path, data, spec, label, pattern)


def _load_sentencepiece(
    path: Path, data: bytes, obj: Any, spec: str, label: str, pattern: str | None
) -> Tokenizer:
    return sentencepiece.SPTokenizer(path, data, spec, label)


def _from_spec(key: ReloadKey, load: Loader) -> Tokenizer:
    """Load the spec again; a file that changed since is an error."""
    tok = load(key.spec, label=key.label, pattern=f"re:{key.pattern}" if key.pattern else None)
    if tok.fingerprint != key.fingerprint:  # the file changed since the parent loaded it
        raise TokenizerError(f"{key.spec}: changed while it was being measured")
    return tok


def _family(key: ReloadKey, load: Loader) -> PretokenizerFamily:
    return PretokenizerFamily(key.spec.split(":", 1)[1])


def _is_hf_json(data: bytes, obj: dict | None) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("model"), dict)


def _is_tekken(data: bytes, obj: dict | None) -> bool:
    return tekken.looks_like_tekken(obj)


def _is_rank_file(data: bytes, obj: dict | None) -> bool:
    return obj is None and tiktoken.looks_like_rank_file(data)


def _is_sentencepiece(data: bytes, obj: dict | None) -> bool:
    return obj is None and sentencepiece.looks_like_model_proto(data)


# In detection order: the first whose `detect` says yes is the file's kind.
FORMATS: dict[str, Format] = {
    f.kind: f
    for f in (
        Format(
            "hf",
            detect=_is_hf_json,
            load=_load_hf,
            reload=_from_spec,
            to_hf=HFExport(hf.to_hf),
            extend=Extension("tokenizer_json"),
            caps=Capabilities(
                flat_encode=True,  # byte-level BPE without a text-changing normaliser
                offsets="library",
                batch_threads=True,
                split_pattern=False,
                vocabulary=True,
                checked_pre_tokens=True,
            ),
        ),
        Format(
            "tekken",
            detect=_is_tekken,
            load=_load_tekken,
            reload=_from_spec,
            to_hf=None,
            extend=Extension("ranks", also_writes="tekken.json"),
            caps=Capabilities(True, "byte_lengths", False, False, True),
        ),
        Format(
            "tiktoken",
            detect=_is_rank_file,
            load=_load_rank_file,
            reload=_from_spec,
            to_hf=HFExport(tiktoken.to_hf),
            extend=Extension("ranks", also_writes="tokenizer.tiktoken"),
            caps=Capabilities(True, "byte_lengths", False, True, True),
        ),
        Format(
            "sentencepiece",
            detect=_is_sentencepiece,
            load=_load_sentencepiece,
            reload=_from_spec,
            to_hf=HFExport(sentencepiece.to_hf, unk_special=True),
            extend=Extension("sp_model"),
            caps=Capabilities(False, "library", False, False, True),
        ),
        Format(
            PRETOKENIZER,  # measured from a family name, never loaded from a file
            detect=None,
            load=None,
            reload=_family,
            to_hf=None,
            extend=None,
            caps=Capabilities(True, "pre_tokens", False, False, False),
        ),
    )
}


def format_of(kind: str) -> Format | None:
    """The declared format of `kind`, None for a kind nothing declares."""
    return FORMATS.get(kind)


def capabilities(tok: Any) -> Capabilities:
    """What the tokenizer's kind can do (NO_CAPABILITIES for an undeclared kind)."""
    fmt = FORMATS.get(getattr(tok, "kind", None) or "")
    return fmt.caps if fmt is not None else NO_CAPABILITIES


def can_reload(tok: Any) -> bool:
    """Whether a worker process can load this very tokenizer again from `reload_key(tok)`."""
    fmt = FORMATS.get(getattr(tok, "kind", None) or "")
    return (
        fmt is not None and fmt.reload is not None and isinstance(getattr(tok, "spec", None), str)
    )


def extension(tok: Any) -> Extension | None:
    """How `fertility extend` extends this tokenizer's kind; None when it cannot."""
    fmt = FORMATS.get(getattr(tok, "kind", None) or "")
    return fmt.extend if fmt is not None else None


def hf_export(tok: Any) -> HFExport | None:
    """How `fertility export --to hf` writes this tokenizer's kind; None when it cannot."""
    fmt = FORMATS.get(getattr(tok, "kind", None) or "")
    return fmt.to_hf if fmt is not None else None


def reload_key(tok: Any) -> ReloadKey:
    """What a worker process needs to load the very same tokenizer again (measuring
    workers, the trainer's encoders)."""
    # a split pattern may have come as a keyword, not a #suffix: pass it on
    pattern = tok.config().get("pattern_regex") if capabilities(tok).split_pattern else None
    return ReloadKey(tok.kind, tok.label, tok.spec, pattern, tok.fingerprint)


def reload(key: ReloadKey, load: Loader) -> Measured:
    """The tokenizer `key` describes, loaded in another process by its kind's declared
    reload; a file that changed since is an error."""
    fmt = FORMATS.get(key.kind)
    if fmt is None or fmt.reload is None:
        raise TokenizerError(f"{key.spec}: a {key.kind!r} tokenizer cannot be loaded in a worker")
    return fmt.reload(key, load)


def sniff(data: bytes, path: Path) -> tuple[Format, dict | None]:
    """(format, parsed JSON or None) of a file, from its content, never its extension: the
    first of FORMATS whose `detect` recognises it."""
    if not data.strip():
        raise TokenizerError(f"{path}: empty file")
    obj = None
    if data[:4096].lstrip()[:1] == b"{":
        try:
            obj = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise TokenizerError(f"{path}: not valid JSON ({one_line(e)})") from None
        except RecursionError:
            raise TokenizerError(f"{path}: JSON nested too deeply to be a tokenizer") from None
    for fmt in FORMATS.values():
        if fmt.detect is not None and fmt.detect(data, obj):
            return fmt, obj
    if obj is not None:
        raise TokenizerError(
            f"{path}: neither a Hugging Face tokenizer.json (no 'model' object) nor a Mistral "
            f"Tekken file (no 'config.pattern' and 'vocab' list)"
        )
    if sentencepiece.model_without_pieces(data):
        raise TokenizerError(f"{path}: has no vocabulary (a SentencePiece model with no pieces)")
    raise TokenizerError(
        f"{path}: not a tokenizer.json, Tekken JSON, SentencePiece model or tiktoken rank file"
    )
