"""Tokenizer specs: `[LABEL=]SPEC[#PATTERN]` parsed, and a file's kind read from its content."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from fertility.errors import TokenizerError, one_line
from fertility.tokenizers import patterns, sentencepiece, tekken

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


def unknown_suffix(spec: str) -> tuple[str, str | None]:
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

        if tekken.looks_like_tekken(obj):
            return "tekken", obj
        raise TokenizerError(
            f"{path}: neither a Hugging Face tokenizer.json (no 'model' object) nor a Mistral "
            f"Tekken file (no 'config.pattern' and 'vocab' list)"
        )
    first_line = head.split(b"\n", 1)[0]
    if _RANK_LINE.fullmatch(first_line):
        return "tiktoken", None

    if sentencepiece.looks_like_model_proto(data):
        return "sentencepiece", None
    raise TokenizerError(
        f"{path}: not a tokenizer.json, Tekken JSON, SentencePiece model or tiktoken rank file"
    )
