"""Named pre-tokenizer split patterns (for the `regex` module) and helpers.

A byte-level BPE never merges across the pieces its split pattern cuts, so the pattern alone
can decide whether a script's words are ever whole tokens. GPT-2's pattern, for example, puts
every Indic vowel sign (category Mc/Mn, neither \\p{L} nor \\p{N}) in a piece of its own:

    "বাংলা" (ব া ং ল া) -> "ব" | "াং" | "ল" | "া"      (gpt2)
                         -> "বাংলা"                   (o200k, mark_aware)

Families (``FAMILIES``):

- ``gpt2``       r50k_base / p50k_base / GPT-2 (tiktoken's faster equivalent of the original).
- ``cl100k``     cl100k_base; Llama 3 uses the same split (spelled as in its tokenizer.json).
- ``o200k``      o200k_base: letter classes include \\p{M}, so combining marks stay in words.
- ``whitespace`` SentencePiece-style pieces: ``\\s?\\S+|\\s``. Each piece is one optional
                 whitespace character followed by a maximal run of non-whitespace; a whitespace
                 character not followed by non-whitespace is a piece of its own. The pieces
                 tile the text (every character belongs to exactly one piece).
- ``mark_aware`` o200k's structure (same case split, contractions, 1-3 digit groups,
                 whitespace and punctuation handling) with ZWNJ U+200C and ZWJ U+200D added to
                 both letter classes, so conjuncts, half forms and chillus written with joiners
                 stay inside their word. This is the pattern ``fertility fix`` trains with.

Encoding names (``ALIASES``): r50k_base, p50k_base, p50k_edit -> gpt2; cl100k_base,
llama3 -> cl100k; o200k_base, o200k_harmony, llama4 -> o200k. Llama 3 and Llama 4 ship bare
rank files (``tokenizer.model``); llama-models builds their encodings with cl100k's and
o200k's split exactly (llama_models/llama3 and llama4/tokenizer.py), so they need no family
of their own, only a name to ask for it by.
A raw regex is written ``re:REGEX``.

Every family cuts the same way under the `regex` module, tiktoken and tokenizers' `Split`
(Oniguruma), so a vocabulary trained through one is measured faithfully through another.
"""

from __future__ import annotations

import functools
import os
import re as _stdre
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import regex

from fertility.errors import TokenizerError, one_line

_GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

# cl100k in the spelling Llama 3's tokenizer.json uses. tiktoken's own string splits the
# same way, but its possessive interval "\p{N}{1,3}+" means "one or more groups of 1-3
# digits" to Oniguruma (Hugging Face's Split), which would glue long numbers together.
_CL100K = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def _o200k_like(extra: str = "") -> str:
    upper = rf"[\p{{Lu}}\p{{Lt}}\p{{Lm}}\p{{Lo}}\p{{M}}{extra}]"
    lower = rf"[\p{{Ll}}\p{{Lm}}\p{{Lo}}\p{{M}}{extra}]"
    contraction = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    return "|".join(
        [
            rf"[^\r\n\p{{L}}\p{{N}}]?{upper}*{lower}+{contraction}",
            rf"[^\r\n\p{{L}}\p{{N}}]?{upper}+{lower}*{contraction}",
            r"\p{N}{1,3}",
            r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
            r"\s*[\r\n]+",
            r"\s+(?!\S)",
            r"\s+",
        ]
    )


FAMILIES: dict[str, str] = {
    "gpt2": _GPT2,
    "cl100k": _CL100K,
    "o200k": _o200k_like(),
    "whitespace": r"\s?\S+|\s",
    "mark_aware": _o200k_like(r"\u200c\u200d"),
}

ALIASES: dict[str, str] = {
    "r50k_base": "gpt2",
    "p50k_base": "gpt2",
    "p50k_edit": "gpt2",
    "cl100k_base": "cl100k",
    "llama3": "cl100k",
    "o200k_base": "o200k",
    "o200k_harmony": "o200k",
    "llama4": "o200k",
}

# Other spellings of the same splits, as they appear in tokenizer.json files and older
# tiktoken releases; used only to name a pattern found in a tokenizer's configuration.
_VARIANTS: dict[str, str] = {
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""": "gpt2",
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""": "cl100k",
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""": "cl100k",
}

RAW_PREFIX = "re:"

# Letters of several scripts, marks, joiners, digits, punctuation, symbols, tabs, spaces and
# newlines: where a split regex shows, when it is loaded, whether it can match nothing and
# whether ordinary text already makes it backtrack without end.
_PROBE = (
    "Ab c\u09be 12 .!\n\n x Zoë's 3.14 €5 日本語 😀\tবাংলা ক্\u200cষ हिन्दी தமிழ் ภาษาไทย — (x)\r\n  "
)

# A raw split pattern may backtrack catastrophically (`(a|a)+b` on a 36-character line runs
# for minutes in `regex`); tiktoken's own engine gives up quickly. A real pattern cuts text at
# megabytes per second, so this much time per call means the pattern, not the text. (The
# `timeout` costs about a third more time per call, so the known families go without it.)
TIMEOUT_S = 2.0
TIMEOUT_PER_CHAR_S = 1e-6


def _shown(pattern: str, limit: int = 80) -> str:
    text = repr(pattern)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


@functools.lru_cache(maxsize=64)  # split_spans resolves a re: pattern once per document
def _check_probe(pattern: str, name: str, empty_ok: bool) -> None:
    """Run `pattern` (which `regex` compiles) over the probe text under the clock."""
    try:
        spans = [m.span() for m in compile_pattern(pattern).finditer(_PROBE, timeout=TIMEOUT_S)]
    except TimeoutError:
        raise TokenizerError(
            f"{name} took over {TIMEOUT_S:g} s on a {len(_PROBE)}-character probe "
            "(catastrophic backtracking): simplify it"
        ) from None
    if not empty_ok and any(a == b for a, b in spans):
        raise TokenizerError(f"{name} matches the empty string")


def check_split_pattern(where, pattern: str, what: str, *, empty_ok: bool = True) -> None:
    """Checks, when a tokenizer is loaded, of a split regex it brings (`what`: where in the
    file, e.g. "Split pattern"): the probe text cut under the same clock as `split_spans`
    (a pattern that backtracks without end on ordinary text is refused, not left to hang a
    finding or panic the library later), and with `empty_ok` False (tiktoken's engine, which
    panics on an empty piece) no empty match. Known families pass at once; a pattern that
    `regex` cannot compile (another engine's syntax) is left to the library that runs it.
    TokenizerError names `where`."""
    if _known(pattern):
        return
    try:
        compile_pattern(pattern)
    except TokenizerError:
        return
    try:
        _check_probe(pattern, f"{what} {_shown(pattern)}", empty_ok)
    except TokenizerError as e:
        raise TokenizerError(f"{where}: {e}") from None


def known_names() -> list[str]:
    """Every name `resolve_pattern` accepts, families first."""
    return [*FAMILIES, *ALIASES]


@functools.lru_cache(maxsize=64)
def compile_pattern(pattern: str) -> regex.Pattern:
    """Compile once per pattern string; TokenizerError (one line) when it is not a regex."""
    try:
        return regex.compile(pattern)
    except (regex.error, TypeError, ValueError) as e:
        msg = one_line(e)
        raise TokenizerError(f"invalid split pattern {pattern!r}: {msg}") from None


def resolve_pattern(name_or_regex: str) -> tuple[str, str]:
    """(name, regex) for a family name, an encoding name or ``re:REGEX``.

    Encoding names resolve to their family's name ("cl100k_base" -> "cl100k"); a raw regex
    keeps its ``re:...`` text as its name. Unknown names and invalid regexes raise
    TokenizerError.
    """
    key = name_or_regex.strip()
    if key.startswith(RAW_PREFIX):
        body = key[len(RAW_PREFIX) :]
        if not body:
            raise TokenizerError("empty split pattern after 're:'")
        compile_pattern(body)  # an invalid regex is an error here, whatever engine runs it
        # an empty piece is no token; tiktoken's Rust core panics on such a pattern
        _check_probe(body, f"split pattern {key!r}", empty_ok=False)
        return key, body
    lowered = key.lower()
    family = ALIASES.get(lowered, lowered)
    if family in FAMILIES:
        return family, FAMILIES[family]
    raise TokenizerError(
        f"unknown split pattern {name_or_regex!r}: use one of {', '.join(known_names())} "
        f"or {RAW_PREFIX}REGEX"
    )


def identify(pattern: str) -> str | None:
    """The family name of a regex string when it is one we know, else None."""
    for name, body in FAMILIES.items():
        if pattern == body:
            return name
    return _VARIANTS.get(pattern)


# Longest names first so "o200k_base" wins over "o200k"; a name must not be glued to other
# letters or digits ("gpt2" matches "gpt2.tiktoken" and "my-gpt2-ranks", not "gpt20").
_NAME_RE = _stdre.compile(
    r"(?<![a-z0-9])("
    + "|".join(
        _stdre.sub(r"^llama(\d)$", r"llama[-_]?\1", _stdre.escape(n))
        for n in sorted(known_names(), key=len, reverse=True)
    )
    + r")(?![a-z0-9])"
)


def pattern_from_filename(path: str | os.PathLike) -> str | None:
    """A known encoding or family name found in the file's own name (not its folders)."""
    match = _NAME_RE.search(os.path.basename(os.fspath(path)).lower())
    if match is None:
        return None
    found = match.group(1)
    return "llama" + found[-1] if found.startswith("llama") else found


@functools.lru_cache(maxsize=64)
def _known(pattern: str) -> bool:
    return identify(pattern) is not None


def split_spans(pattern: str, text: str) -> list[tuple[int, int]]:
    """Code-point spans of the pieces `pattern` cuts `text` into.

    `pattern` is a known name, ``re:REGEX`` or a bare regex string.
    """
    return [m.span() for m in _splitter(pattern, "finditer")(text)]


def split_many(pattern: str, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """split_spans of every text as one (n, 2) int64 array, the texts' pieces end to end,
    and how many pieces each text has: the measuring path's form. The pieces come from
    `findall` (strings: no match object each) and are made arrays once for all the texts,
    where each text's pieces tile it, as the standard families' do (each has an
    alternative for every character): their lengths then give the spans, the same as
    finditer's. Otherwise the spans are finditer's: for a pattern with groups (its findall
    gives the groups), and for one whose pieces leave gaps (then run a second time). gpt2's
    pattern over 4,096 English lines of 31 characters: 2.5 µs a line, against 5.5 µs for
    finditer's spans made an array a line and 1.9 µs for findall alone."""
    if compile_pattern(_resolved(pattern)).groups == 0:
        findall = _splitter(pattern, "findall")
        lengths: list[int] = []
        counts: list[int] = []
        for text in texts:
            pieces = findall(text)
            counts.append(len(pieces))
            lengths += map(len, pieces)
        n = np.array(counts, dtype=np.int64)
        size = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        piece = np.array(lengths, dtype=np.int64)
        ends = np.cumsum(piece)
        covered = np.concatenate(([0], ends)).take(np.cumsum(n))  # characters up to each text's end
        text_ends = np.cumsum(size)
        if np.array_equal(covered, text_ends):  # every text's pieces add up to its length
            stops = ends - np.repeat(text_ends - size, n)
            return np.stack((stops - piece, stops), axis=1), n
    spans = [np.asarray(split_spans(pattern, t), dtype=np.int64).reshape(-1, 2) for t in texts]
    n = np.fromiter(map(len, spans), dtype=np.int64, count=len(spans))
    return np.concatenate([np.zeros((0, 2), np.int64), *spans]), n


def _resolved(pattern: str) -> str:
    if pattern.startswith(RAW_PREFIX) or pattern.lower() in FAMILIES or pattern.lower() in ALIASES:
        return resolve_pattern(pattern)[1]
    return pattern


def _splitter(pattern: str, how: str) -> Callable[[str], Any]:
    """The compiled pattern's finditer or findall, text -> its matches; a pattern not of the
    standard families runs under a clock (catastrophic backtracking is an error, not a
    hang), and its finditer's matches are all found under it."""
    pattern = _resolved(pattern)
    run = getattr(compile_pattern(pattern), how)
    if _known(pattern):  # the standard families cannot backtrack badly: no clock in the loop
        return run

    def clocked(text: str) -> list:
        limit = TIMEOUT_S + TIMEOUT_PER_CHAR_S * len(text)
        try:
            return list(run(text, timeout=limit))
        except TimeoutError:
            raise TokenizerError(
                f"split pattern {pattern!r} took over {limit:.0f} s on one document of "
                f"{len(text):,} characters (catastrophic backtracking): simplify it"
            ) from None

    return clocked
