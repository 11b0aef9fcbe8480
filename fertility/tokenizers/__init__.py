"""One Tokenizer protocol over Hugging Face tokenizers, SentencePiece, tiktoken and Tekken.

Each kind, and everything that differs between kinds (detection, loading, the worker reload,
the HF conversion, extension, capabilities), is declared once in fertility.tokenizers.kinds.

Specs (``load_tokenizer(spec)``, the CLI's ``-t``):

- a Hugging Face ``tokenizer.json``, or a folder holding one (a folder without one but with a
  ``tokenizer.model`` loads that instead);
- a Mistral Tekken file (``tekken_*.json``: ``config.pattern`` and a ``vocab`` of rank
  entries), kind "tekken", ids as mistral-common gives them (fertility.tokenizers.tekken);
- a SentencePiece ``.model`` (protobuf);
- a tiktoken BPE rank file (lines of ``base64 rank``; ``.tiktoken`` or Llama 3/4's
  ``tokenizer.model``). The kind of a file is read from its content, not its extension;
- ``tiktoken:NAME`` (``tiktoken.get_encoding``, tiktoken's own download cache);
- ``hf:ORG/NAME`` or ``hf:ORG/NAME@REVISION`` (the Hugging Face hub or its local cache; with
  ``HF_HUB_OFFLINE=1``, or a hub that does not answer within ``hf.HUB_ANSWER_S``, only the
  cache is read; the whole load ends within ``hf.HUB_TOTAL_S``).

What a file declares is checked before anything is built from it (token ids, Tekken counts:
`base.MAX_TOKEN_ID`, `tekken.MAX_SPECIAL_TOKENS`), and the split regexes a tokenizer brings
when it is loaded (`patterns.check_split_pattern`). A panic of the Rust libraries is one
TokenizerError naming the file (fertility.tokenizers.guard).

Command-line syntax, one ``-t`` per tokenizer::

    -t [LABEL=]SPEC[#PATTERN]

LABEL is ``[A-Za-z0-9_.-]+`` before the first ``=`` (default: a name taken from SPEC).
PATTERN names the pre-tokenizer split for tiktoken rank files, which carry none: a name from
`fertility.tokenizers.patterns.known_names()` (the families gpt2, cl100k, o200k, whitespace, mark_aware
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

from pathlib import Path

from fertility.errors import TokenizerError
from fertility.files import unfinished_by_another
from fertility.tokenizers import hf, kinds, patterns, tiktoken
from fertility.tokenizers.base import Tokenizer
from fertility.tokenizers.kinds import Measured, ReloadKey, reload_key
from fertility.tokenizers.spec import (
    default_label,
    parse_tokenizer_arg,
    split_pattern_suffix,
    unknown_suffix,
)

__all__ = [
    "Tokenizer",
    "load_tokenizer",
    "load_tokenizer_arg",
    "parse_tokenizer_arg",
    "reload_key",
    "reload_tokenizer",
]


def reload_tokenizer(
    kind: str, label: str, spec: str, pattern: str | None, fingerprint: str
) -> Measured:
    """The tokenizer `reload_key` describes, loaded in another process by its kind's
    declared reload (fertility.tokenizers.kinds); a file that changed since is an error."""
    return kinds.reload(ReloadKey(kind, label, spec, pattern, fingerprint), load_tokenizer)


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
        spec, suffix = unknown_suffix(spec)
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
        return tiktoken.from_name(spec, full_spec, label, pattern)
    if spec.startswith("hf:"):
        path = hf.download(spec)
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

    if unfinished_by_another(path.parent):
        raise TokenizerError(
            f"{path.parent}: an unfinished `fertility fix` run (still writing, or killed) left "
            "this folder; its files may not belong together: run `fertility fix` again"
        )
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TokenizerError(f"{path}: cannot read ({e.strerror or e})") from None

    fmt, obj = kinds.sniff(data, path)
    if not fmt.caps.split_pattern and pattern is not None:
        raise TokenizerError(
            f"{path}: a split pattern (#{pattern}) applies only to tiktoken rank files and "
            f"tiktoken: encodings; this is a {fmt.kind} tokenizer with its own pre-tokenizer"
        )
    if fmt.load is None:  # (every kind a file can be declares its loader)
        raise TokenizerError(f"{path}: a {fmt.kind} tokenizer is not loaded from a file")
    return fmt.load(path, data, obj, full_spec, label, pattern)
