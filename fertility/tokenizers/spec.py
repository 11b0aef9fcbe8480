"""Tokenizer specs: `[LABEL=]SPEC[#PATTERN]` parsed (a file's kind is read from its content by
fertility.tokenizers.kinds.sniff)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from fertility.errors import TokenizerError
from fertility.tokenizers import patterns

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
