"""What the normaliser `fertility fix` was asked for (--nfc, --nfkc) changes in the user's text.

A tokenizer with a normaliser does not give its text back: decode(encode(x)) is the normalised
x. NFC, the usual "safe" choice, still rewrites real Bengali: U+09DF (য়, in হয় "is"), U+09DC
and U+09DD are composition exclusions, so NFC turns each into letter + nukta, and it joins
U+09C7 U+09BE (common in chat text) into U+09CB. So before training, fix runs the chosen
normaliser over every document and counts, per changed piece of text, how often and in how
many documents it changes and into what (U+09DF -> U+09AF U+09BC: 412). The same counts over
the held-out documents name the cause of their round-trip failures.

A piece is a character and the marks after it, or a run of characters that compose with each
other (U+09C7 U+09BE): found by asking the normaliser itself whether adding a character to the
piece gives other text than normalising the two apart. Only documents the normaliser changes
are cut into pieces, and in them only the words it changes.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from collections import Counter
from collections.abc import Callable
from typing import Literal

import numpy as np

# FixConfig.normalization -> the normaliser's name
FORMS: dict[str, Literal["NFC", "NFKC"]] = {"nfc": "NFC", "nfkc": "NFKC"}
_RUNS = re.compile(r"\s+|\S+")  # words and the space between them, nothing left out


def normalizer(config) -> Callable[[str], str] | None:
    """The very normaliser the trained tokenizer will apply, or None for "none".

    The tokenizers backend: its own NFC/NFKC. SentencePiece: Python's NFC (what
    fertility.fix.train applies to its training text) and, for its nfkc rule, Python's NFKC
    (SentencePiece's rule also folds a few more characters; they are not counted here).
    """
    form = FORMS.get(config.normalization)
    if form is None:
        return None
    if config.backend == "tokenizers":
        # deferred: the Rust tokenizers library only when used
        from tokenizers import normalizers

        return (normalizers.NFKC() if form == "NFKC" else normalizers.NFC()).normalize_str
    return lambda text: unicodedata.normalize(form, text)


def _pieces(word: str, norm: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    for ch in word:
        # A combining mark belongs with its base (NFC reorders marks among themselves); any
        # other character joins the piece only when the two normalise differently together.
        if out and (unicodedata.combining(ch) or norm(out[-1] + ch) != norm(out[-1]) + norm(ch)):
            out[-1] += ch
        else:
            out.append(ch)
    return out


def changes_in(text: str, norm: Callable[[str], str]) -> Counter | None:
    """{(before, after): occurrences} of what `norm` changes in `text`; None if nothing."""
    whole = norm(text)
    if whole == text:
        return None
    found: Counter = Counter()
    done = []
    for run in _RUNS.findall(text):
        after = norm(run)
        done.append(after)
        if after == run:
            continue
        pieces = _pieces(run, norm)
        outs = [norm(p) for p in pieces]
        if "".join(outs) != after:  # the cut was not safe: count the word as one change
            pieces, outs = [run], [after]
        found.update(_trim(p, o) for p, o in zip(pieces, outs) if p != o)
    if "".join(done) != whole:  # a change across words: count the document as one
        found = Counter({(text, whole): 1})
    return found


def _trim(before: str, after: str) -> tuple[str, str]:
    """The change without what it keeps at either end: য় + virama (a mark, so one piece) is
    counted as য় -> য + nukta, the change the virama plays no part in."""
    while len(before) > 1 and after and before[-1] == after[-1]:
        before, after = before[:-1], after[:-1]
    while len(before) > 1 and after and before[0] == after[0]:
        before, after = before[1:], after[1:]
    return before, after


def code_points(s: str) -> str:
    return " ".join(f"U+{ord(c):04X}" for c in s)


def _verb(before: str, after: str) -> str:
    if len(before) == 1 and len(after) > 1 and unicodedata.decomposition(before):
        return "decomposed"
    if len(before) > 1 and len(after) == 1:
        return "composed"
    return "changed"


class ChangeLog:
    """Per document, what the normaliser changes (only documents it changes), kept as three
    int64 arrays (document, change, occurrences) so a corpus of millions of documents costs
    24 bytes per (document, change) and sums over any set of documents are vectorised."""

    def __init__(self, norm: Callable[[str], str], name: str):
        self.norm, self.name = norm, name
        self.keys: dict[tuple[str, str], int] = {}
        self.doc, self.key, self.count = array("q"), array("q"), array("q")

    def add(self, index: int, text: str) -> None:
        for k, n in (changes_in(text, self.norm) or {}).items():
            self.doc.append(index)
            self.key.append(self.keys.setdefault(k, len(self.keys)))
            self.count.append(n)

    def summary(self, docs: np.ndarray, top: int = 50) -> dict:
        """The `normalizer_preview` object of fix-report.json (docs/FIX.md) over the documents
        where the bool mask `docs` is true."""
        doc = np.frombuffer(self.doc, dtype=np.int64) if self.doc else np.zeros(0, np.int64)
        key = np.frombuffer(self.key, dtype=np.int64) if self.key else np.zeros(0, np.int64)
        cnt = np.frombuffer(self.count, dtype=np.int64) if self.count else np.zeros(0, np.int64)
        sel = docs[doc] if len(doc) else np.zeros(0, bool)
        k = len(self.keys)
        occurrences = np.bincount(key[sel], weights=cnt[sel], minlength=k).astype(np.int64)
        documents = np.bincount(key[sel], minlength=k)
        names = list(self.keys)
        ranked: list[int] = sorted(
            np.flatnonzero(occurrences).tolist(), key=lambda i: (-occurrences[i], names[i])
        )
        rows = [_row(*names[i], int(occurrences[i]), int(documents[i])) for i in ranked[:top]]
        return {
            "normalizer": self.name,
            "documents": int(docs.sum()),
            "changed_documents": int(len(np.unique(doc[sel]))),
            "distinct_changes": len(ranked),
            "changes": rows,
        }


def _row(before: str, after: str, occurrences: int, documents: int) -> dict:
    def cps(s: str) -> str:  # a whole document (the fallback of changes_in) is cut short
        return code_points(s[:8]) + (" ..." if len(s) > 8 else "")

    return {
        "from": cps(before),
        "to": cps(after),
        "text": before[:64],
        "normalized": after[:64],
        "name": " + ".join(unicodedata.name(c, "<unnamed>") for c in before[:4]),
        "change": _verb(before, after),
        "occurrences": occurrences,
        "documents": documents,
    }


def describe(row: dict, name: str) -> str:
    """One line: "NFC decomposed U+09DF BENGALI LETTER YYA into U+09AF U+09BC: 412 times in 61
    documents"."""
    what = row["from"] if len(row["text"]) > 4 else f"{row['from']} {row['name']}"
    return (
        f"{name} {row['change']} {what} into {row['to'] or 'nothing'}: "
        f"{row['occurrences']:,} times in {row['documents']:,} documents"
    )
