"""What a language label says: its language and, for FineWeb-2 / FLORES labels, its script.

A label is what fertility.corpus gives a document (`bn`, `ben`, `ben_Beng`, `zh-Hans`,
`pt_BR`, `und`). FineWeb-2 folders and FLORES files name a language as ISO 639-3 plus an
ISO 15924 script (`eng_Latn`, `hin_Deva`); the default reference language of the premium is
`en`, so a reference is matched on its language: `en` is `eng_Latn`, `eng` and `en_GB` too
(ISO 639-1 to 639-3 from iso639-pairs.txt beside this file).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib.resources import files

# FineWeb-2 and FLORES-200: ISO 639-3, an underscore, an ISO 15924 script in Titlecase
FLORES_RE = re.compile(r"([a-z]{3})_([A-Z][a-z]{3})")
_SUBTAG = re.compile(r"[-_]")

ISO639_3 = dict(
    line.split()
    for line in (files("fertility.corpus") / "iso639-pairs.txt").read_text("ascii").splitlines()
    if line and not line.startswith("#")
)


def language(label: str) -> str:
    """The ISO 639-3 code of a label's language when it has one (`en`, `eng`, `eng_Latn`,
    `en-GB` -> `eng`), else the label's language part as written."""
    base = _SUBTAG.split(label, maxsplit=1)[0]
    return ISO639_3.get(base, base)


def flores_script(label: str) -> str | None:
    """The script a FineWeb-2 / FLORES label names (`hin_Deva` -> `Deva`), else None."""
    m = FLORES_RE.fullmatch(label)
    return m.group(2) if m else None


def matching(reference: str, labels: Iterable[str]) -> list[str]:
    """The labels that are the language `reference` names: the label itself when present,
    else every label of the same language (`en` -> `eng_Latn`), sorted."""
    labels = set(labels)
    if reference in labels:
        return [reference]
    want = language(reference)
    return sorted(x for x in labels if x != "und" and language(x) == want)
