"""Widening a split pattern's letter classes so a script's words are no longer cut.

GPT-2's and cl100k's patterns (Llama 3 uses cl100k's) leave combining marks (\\p{M}: Indic
vowel signs, the virama) and the joiners ZWNJ/ZWJ out of ``\\p{L}``, so every Bengali word is cut
at each vowel sign before BPE sees it. `widen_letters` adds exactly those code points wherever
the pattern says ``\\p{L}``: inside a class ``[...]`` (positive or negated) the three are added
next to it, and a bare ``\\p{L}`` becomes ``[\\p{L}\\p{M}\\u200c\\u200d]``. Nothing else changes,
so on text without marks and joiners every alternative matches exactly what it matched before
and the pieces are the same. A pattern that already names ``\\p{M}`` (o200k, mark_aware) is
returned as it is.
"""

from __future__ import annotations

WIDE = r"\p{L}\p{M}\u200c\u200d"
LETTER = r"\p{L}"


def cuts_marks(regex: str) -> bool:
    """True when the pattern's letter classes leave combining marks out."""
    return LETTER in regex and r"\p{M}" not in regex


def widen_letters(regex: str) -> str:
    r"""`regex` with every ``\p{L}`` widened to letters, marks and joiners (see above)."""
    if not cuts_marks(regex):
        return regex
    out: list[str] = []
    i, in_class = 0, False
    while i < len(regex):
        if regex.startswith(LETTER, i):
            out.append(WIDE if in_class else f"[{WIDE}]")
            i += len(LETTER)
            continue
        ch = regex[i]
        if ch == "\\":  # an escape is two characters: never a class bracket
            out.append(regex[i : i + 2])
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
        elif ch == "]" and in_class and regex[i - 1] not in "[^":
            in_class = False
        out.append(ch)
        i += 1
    return "".join(out)
